"""Every combination of the chart's features (cable, cni, Globalnet, egress gateway), rendered by the real helm 4
and checked offline as deploy/ is (tests/deploy/test_deploy_manifests.py, test_deploy_rbac.py): the Kubernetes
1.37 schemas (strict), custom resources against their CRDs, least-privilege RBAC equal to deploy/'s, the daemons'
arguments through their own parsers, and the ConfigMap and Submariner object through magw's own mapping."""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any

import kubernetes_validate
import pytest

from magw.daemons.gateway import main as gateway_daemon
from magw.daemons.route_agent import main as route_agent_daemon
from magw.sources.kube import mapping
from tests.support.deploy_checks import K8S_VERSION, NAMESPACE, cr_errors, grants
from tests.support.helm_tool import Helm

COMBOS = list(itertools.product(("vxlan", "wireguard"), ("generic", "ovn"), (False, True), (False, True)))
IDS = [f"{c}-{n}-{'globalnet' if g else 'noglobalnet'}-{'egress' if e else 'noegress'}" for c, n, g, e in COMBOS]
DAEMONS = {
    "magw-route-agent": True,
    "magw-gateway": True,
    "magw-globalnet": False,  # with Globalnet only
    "magw-egress": False,  # with the egress gateway only
    "magw-egress-agent": False,
}


def _values(cable: str, cni: str, globalnet: bool, egress: bool) -> dict[str, Any]:
    return {
        "clusterID": "east",
        "cable": cable,
        "cni": cni,
        "globalnet": {"enabled": globalnet, "globalCIDR": ["242.1.0.0/16"]},
        "egress": {
            "enabled": egress,
            "interface": "ens5",
            "networkPolicy": {"enabled": True, "nodeCIDR": "10.0.0.0/24"},
        },
        "submariner": {"create": True, "multiActiveGatewayEnabled": True},
        "cluster": {"create": True, "clusterCIDR": ["10.1.0.0/16"], "serviceCIDR": ["100.1.0.0/16"]},
        "gateway": {"nodeSelector": {"example.com/edge": "gw"}},
    }


@functools.cache
def _render(helm: Helm, combo: tuple[str, str, bool, bool]) -> tuple[dict[str, Any], ...]:
    return tuple(helm.template(_values(*combo)))


def _find(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any] | None:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) <= 1
    return found[0] if found else None


def _container(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    obj = _find(docs, kind, name)
    assert obj is not None, f"{kind}/{name} not rendered"
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def _args(container: dict[str, Any], cluster: str) -> list[str]:
    values = {"NODE_NAME": "e-gw1", "CLUSTER_ID": cluster}
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in container["args"]]


@pytest.mark.parametrize("combo", COMBOS, ids=IDS)
def test_every_rendered_object_is_valid_offline(helm: Helm, combo: tuple[str, str, bool, bool]) -> None:
    docs = _render(helm, combo)
    for doc in docs:
        if doc["apiVersion"].startswith(("submariner.io/", "multicluster.x-k8s.io/")):
            assert cr_errors(doc) == [], doc["metadata"]["name"]
        else:
            assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.37"


@pytest.mark.parametrize("combo", COMBOS, ids=IDS)
def test_the_features_show_in_the_objects_magw_reads(helm: Helm, combo: tuple[str, str, bool, bool]) -> None:
    cable, cni, globalnet, egress = combo
    docs = _render(helm, combo)
    config_map, submariner = _find(docs, "ConfigMap", "magw-config"), _find(docs, "Submariner", "submariner")
    config = mapping.config_docs(submariner, config_map)[0].fields
    assert config["cable"] == cable and config["multi_active_gateway"] is True
    assert config.get("wireguard_port") == (51820 if cable == "wireguard" else None)
    assert config.get("cni", "generic") == cni

    agent = route_agent_daemon.build_parser().parse_args(
        _args(_container(docs, "DaemonSet", "magw-route-agent"), "east")
    )
    assert (agent.namespace, agent.cluster, agent.egress) == (NAMESPACE, "east", egress)
    assert agent.ovs_db == ("unix:/var/run/openvswitch/db.sock" if cni == "ovn" else None)
    gateway_ds = _find(docs, "DaemonSet", "magw-gateway")
    assert gateway_ds is not None
    assert gateway_ds["spec"]["template"]["spec"]["nodeSelector"] == {"example.com/edge": "gw"}
    gateway_daemon.build_parser().parse_args(_args(_container(docs, "DaemonSet", "magw-gateway"), "east"))

    cluster = _find(docs, "Cluster", "east")
    assert cluster is not None
    assert cluster["spec"].get("global_cidr") == (["242.1.0.0/16"] if globalnet else None)
    assert (_find(docs, "Deployment", "magw-globalnet") is not None) == globalnet
    for kind, name in (("Deployment", "magw-egress"), ("DaemonSet", "magw-egress-agent"), ("Service", "magw-egress")):
        assert (_find(docs, kind, name) is not None) == egress
    if egress:
        agent_args = _container(docs, "DaemonSet", "magw-egress-agent")["args"]
        assert agent_args[agent_args.index("--interface") + 1] == "ens5"
        policy = _find(docs, "NetworkPolicy", "magw-egress-api")
        assert policy is not None and policy["spec"]["ingress"][0]["from"][1] == {"ipBlock": {"cidr": "10.0.0.0/24"}}


@pytest.mark.parametrize("combo", COMBOS, ids=IDS)
def test_rbac_is_deploys_for_each_daemon_rendered_and_absent_otherwise(
    helm: Helm, combo: tuple[str, str, bool, bool]
) -> None:
    """Each rendered daemon's service account gets exactly deploy/'s grants; a daemon not rendered gets none."""
    _, _, globalnet, egress = combo
    docs = list(_render(helm, combo))
    on = {**DAEMONS, "magw-globalnet": globalnet, "magw-egress": egress, "magw-egress-agent": egress}
    for account, rendered in on.items():
        assert (_find(tuple(docs), "ServiceAccount", account) is not None) == rendered
        assert grants(NAMESPACE, account, docs) == (grants(NAMESPACE, account) if rendered else set())
    for doc in docs:
        for rule in doc.get("rules", ()):
            assert not any("*" in rule.get(k, ()) for k in ("apiGroups", "resources", "verbs", "resourceNames"))
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            ref = doc["roleRef"]
            assert ref["name"] == "system:auth-delegator" or _find(tuple(docs), ref["kind"], ref["name"]), ref
            for subject in doc["subjects"]:
                assert _find(tuple(docs), "ServiceAccount", subject["name"]) is not None, subject
