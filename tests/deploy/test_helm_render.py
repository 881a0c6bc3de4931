"""The Helm chart deploy/helm/magw, rendered by the real helm 4 (docs/helm.md).

With its default values the chart renders exactly the objects of deploy/ for one member cluster: namespace.yaml,
crds/, rbac/ and magw.yaml, object by object, egress parts apart; with ``egress.enabled`` also egress.yaml,
egress-api-networkpolicy.yaml and rbac/egress.yaml, and the route agent as egress-route-agent.patch.json makes it.
The chart adds no label of its own, so the comparison is plain equality (docs/helm.md lists the differences: the
broker's files and the examples are not rendered).
"""

from __future__ import annotations

import json

from tests.support.deploy_checks import DEPLOY
from tests.support.helm_tool import CHART, Helm
from tests.support.rendered import assert_same, by_key, deploy_objects, json_patch


def test_the_default_values_render_deploys_objects(helm: Helm) -> None:
    assert_same(by_key(helm.template()), deploy_objects(egress=False))


def test_egress_enabled_renders_deploys_egress_files_and_the_patched_route_agent(helm: Helm) -> None:
    expected = deploy_objects(egress=True)
    patch = json.loads((DEPLOY / "egress-route-agent.patch.json").read_text(encoding="utf-8"))
    json_patch(expected[("DaemonSet", "submariner-operator", "magw-route-agent")], patch)
    assert_same(by_key(helm.template({"egress": {"enabled": True}})), expected)


def test_the_charts_crds_are_deploys_byte_for_byte() -> None:
    """helm installs crds/ as they are (never templated): the chart holds copies of deploy/crds."""
    ours = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    theirs = {p.name: p.read_bytes() for p in (DEPLOY / "crds").glob("*.yaml")}
    assert ours == theirs


def test_helm_lint_passes_on_the_defaults_and_with_every_feature(helm: Helm) -> None:
    everything = {
        "cable": "wireguard",
        "cni": "ovn",
        "egress": {"enabled": True},
        "submariner": {"create": True},
        "cluster": {"create": True, "clusterCIDR": ["10.1.0.0/16"], "serviceCIDR": ["100.1.0.0/16"]},
        "globalnet": {"enabled": True, "globalCIDR": ["242.1.0.0/16"]},
    }
    for values in (None, everything):
        done = helm.run("lint", CHART, "--strict", values=values)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout
