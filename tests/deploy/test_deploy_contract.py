"""What magw writes to the API server, the CRDs admit; what the examples hold, magw reads (no API server here).

The CRD schemas carry limits, so a limit stricter than the code would make the API server refuse magw's own
writes: the Globalnet controller's objects and statuses (from a real plan of examples/globalnet-snapshot.yaml),
the gateway's Endpoint and Gateway status, each checked against its CRD as the API server would (null fields
pruned, tests/support/deploy_checks.py). The other way round, every example CR maps into the file broker's documents
(magw.sources.kube.mapping) without an error. The daemons' real flag parsers read the manifests' arguments.
"""

from __future__ import annotations

import copy
import json
import os
import re
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pytest

from magw.controllers.egressgw.controller import rfc3339
from magw.daemons.egressgw import main as egress_daemon
from magw.daemons.egressgw_agent import main as egress_agent
from magw.daemons.gateway import main as gateway_daemon
from magw.daemons.globalnet import main as globalnet_daemon
from magw.daemons.route_agent import main as route_agent_daemon
from magw.ipam.globalnet import plan_globalnet
from magw.model import Endpoint
from magw.model.egressgw import EgressBinding, EgressVIP, EgressVIPStatus
from magw.model.globalnet import CLUSTER_GLOBAL_EGRESS_IP, GLOBAL_EGRESS_IP, GLOBAL_INGRESS_IP, ObjectRef
from magw.snapshot.egressgw import vip_to_doc
from magw.snapshot.load import endpoint_doc, load_snapshot
from magw.sources.kube import mapping
from magw.sources.kube.egressgw_store import status_body as egress_status_body
from magw.sources.kube.globalnet_store import object_spec, status_body
from magw.sources.kube.status import gateway_status
from tests.support.deploy_checks import DEPLOY, NAMESPACE, cr_errors, find, manifests

ROOT = DEPLOY.parent
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
# A DNS-1123 subdomain: what metadata.name of a custom resource must be.
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _cr(kind: str, name: str, namespace: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict:
    assert NAME.fullmatch(name) and len(name) <= 253, name
    cr: dict[str, Any] = {
        "apiVersion": "submariner.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if status is not None:
        cr["status"] = status
    return cr


def _globalnet_plan() -> Any:
    snapshot = load_snapshot(ROOT / "examples" / "globalnet-snapshot.yaml")
    gateways = [n.name for n in snapshot.nodes if n.gateway]
    return snapshot.globalnet, plan_globalnet(
        global_cidrs=[IPv4Network("242.1.0.0/16")],
        gateways=gateways,
        globalnet=snapshot.globalnet,
        now=T0,
        grace=timedelta(seconds=300),
    )


def test_the_globalnet_controllers_objects_and_statuses_are_admitted() -> None:
    """Every status of a real plan (all three kinds, per-gateway blocks, selectors) and every object the
    controller makes pass their CRD; the plan has at least one of each, so the test cannot pass empty."""
    globalnet, plan = _globalnet_plan()
    specs: dict[ObjectRef, dict[str, Any]] = {}
    for obj in plan.cluster_egress_ips:
        specs[ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", obj.name)] = object_spec(obj)
    for obj in plan.ingress_ips:
        specs[ObjectRef(GLOBAL_INGRESS_IP, obj.namespace, obj.name)] = object_spec(obj)
    for obj in globalnet.egress_ips:  # users write these: the snapshot's spec fields
        spec: dict[str, Any] = {"numberOfIPs": obj.number_of_ips}
        if obj.pod_selector is not None:
            spec["podSelector"] = obj.pod_selector.to_dict()
        specs[ObjectRef(GLOBAL_EGRESS_IP, obj.namespace, obj.name)] = spec
    for ref, spec in specs.items():
        status = plan.statuses.get(ref)
        body = status_body(ref, status, generation=1) if status is not None else None
        cr = _cr(ref.kind, ref.name, ref.namespace or NAMESPACE, spec, body)
        assert cr_errors(cr) == [], ref
    kinds = {ref.kind for ref in specs if ref in plan.statuses}
    assert kinds == {CLUSTER_GLOBAL_EGRESS_IP, GLOBAL_EGRESS_IP, GLOBAL_INGRESS_IP}


def test_the_gateways_endpoint_is_admitted() -> None:
    endpoint = Endpoint(
        cluster="east",
        hostname="e-gw1",
        private_ip=IPv4Address("172.18.0.6"),
        public_ip=IPv4Address("198.51.100.6"),
        subnets=[IPv4Network("10.1.0.0/16")],
        allocated_ips=[IPv4Address("242.1.0.1"), IPv4Address("242.1.0.2")],
    )
    name = mapping.endpoint_object_name(endpoint.cluster, endpoint.hostname)
    assert cr_errors(_cr("Endpoint", name, NAMESPACE, mapping.endpoint_spec(endpoint_doc(endpoint)))) == []


@pytest.mark.parametrize("ha_status", ["active", "passive"])
def test_the_gateway_status_is_admitted(ha_status: Any) -> None:
    """Every connection state and RTT figures, and a local endpoint without public IP (null, pruned)."""
    local = Endpoint(cluster="east", hostname="e-gw1", private_ip=IPv4Address("172.18.0.6"))

    def remote(host: str, ip: str) -> Endpoint:
        return Endpoint(cluster="west", hostname=host, private_ip=IPv4Address(ip), public_ip=IPv4Address(ip))

    rtt = {"last": 0.001234, "min": 0.001, "average": 0.0013, "max": 0.0025, "stdDev": 0.0002}
    health = {
        "peers": [
            {"cluster": "west", "hostname": "w-gw1", "state": "up", "rtt": rtt},
            {"cluster": "west", "hostname": "w-gw2", "state": "down"},
            {"cluster": "west", "hostname": "w-gw3", "state": "pending"},
        ]
    }
    remotes = [remote("w-gw1", "172.18.0.4"), remote("w-gw2", "172.18.0.9"), remote("w-gw3", "172.18.0.10")]
    status = gateway_status(local=local, ha_status=ha_status, remotes=remotes, health=health, generation=1, now=T0)
    assert cr_errors(_cr("Gateway", "e-gw1", NAMESPACE, {}, status)) == []
    assert len(status["connections"]) == (3 if ha_status == "active" else 0)


@pytest.mark.parametrize("example", manifests("examples"), ids=str)
def test_magw_reads_every_example(example: Any) -> None:
    """The example CRs map into the file broker's documents (mapping raises MappingError when it cannot)."""
    doc = example.doc
    kind = example.kind
    if kind == "Cluster":
        docs = mapping.cluster_docs(doc)
    elif kind == "Endpoint":
        docs = mapping.endpoint_docs(doc)
    elif kind == "Submariner":
        docs = mapping.config_docs(doc, find("ConfigMap", "magw-config"))
    elif kind == "ServiceExport":
        docs = mapping.service_export_docs(doc, "east")
    elif kind in (CLUSTER_GLOBAL_EGRESS_IP, GLOBAL_EGRESS_IP, GLOBAL_INGRESS_IP):
        docs = mapping.globalnet_docs(kind, doc, "east")
    elif kind == "EgressVIP":
        docs = mapping.egress_vip_docs(doc, "east")
        assert [d.kind for d in docs] == ["EgressVIP", "EgressVIPStatus"]
    elif kind == "EgressConfig":
        docs = mapping.egress_config_docs(doc, "east")
        assert docs[0].fields["vipRanges"] == ["192.0.2.0/24"]
    else:
        assert kind == "Gateway"  # status only: magw writes it and nobody maps it back
        return
    assert len(docs) >= 1


@pytest.mark.parametrize(
    ("kind", "name", "build"),
    [
        ("DaemonSet", "magw-route-agent", route_agent_daemon.build_parser),
        ("DaemonSet", "magw-gateway", gateway_daemon.build_parser),
        ("Deployment", "magw-globalnet", globalnet_daemon.parser),
        ("Deployment", "magw-egress", egress_daemon.parser),
        ("DaemonSet", "magw-egress-agent", egress_agent.parser),
    ],
)
def test_the_daemons_parsers_accept_the_manifests_arguments(kind: str, name: str, build: Any) -> None:
    """The container's args, with $(NODE_NAME) and $(CLUSTER_ID) expanded as the kubelet does, parse."""
    container = find(kind, name)["spec"]["template"]["spec"]["containers"][0]
    values = {"NODE_NAME": "e-gw1", "CLUSTER_ID": find("ConfigMap", "magw-config")["data"]["clusterID"]}
    args = [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in container["args"]]
    parsed = build().parse_args(args)
    assert (parsed.source, parsed.namespace, parsed.cluster) == ("kube", NAMESPACE, values["CLUSTER_ID"])
    assert getattr(parsed, "node", "e-gw1") == "e-gw1"
    assert os.path.basename(getattr(parsed, "broker_kubeconfig", None) or "kubeconfig") == "kubeconfig"


@pytest.mark.parametrize(
    "status",
    [
        EgressVIPStatus(),
        EgressVIPStatus(holder="e-gw1", since=rfc3339(T0.timestamp()), services=("shop/db", "shop/web")),
    ],
    ids=["empty", "held"],
)
def test_the_egress_controllers_writes_are_admitted(status: EgressVIPStatus) -> None:
    """What magw-egress --source kube merge-patches into an EgressVIP (its status, and the bindings the API
    changes: shared and exclusive) passes the CRD, the null of an empty ``since`` pruned as the API server does."""
    vip = EgressVIP(
        name="shop",
        vip=IPv4Address("192.0.2.10"),
        vrid=10,
        candidates=("e-gw1", "e-gw2"),
        bindings=(EgressBinding("shop"), EgressBinding("blog", "api")),
    )
    (cr,) = [m.doc for m in manifests("examples") if m.kind == "EgressVIP"]
    patched = {
        **cr,
        "spec": {**cr["spec"], "bindings": vip_to_doc(vip)["bindings"]},
        "status": egress_status_body(status),
    }
    assert cr_errors(patched) == []


def _json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 ``test`` and ``add`` (what deploy/egress-route-agent.patch.json uses), on a deep copy; a failed
    test raises, as kubectl refuses the whole patch."""
    out = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if op["op"] == "test":
            value = node[int(last)] if isinstance(node, list) else node[last]
            if value != op["value"]:
                raise ValueError(f"test failed at {op['path']}: {value!r} != {op['value']!r}")
        elif op["op"] == "add" and isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), op["value"])
        elif op["op"] == "add":
            node[last] = op["value"]
        else:
            raise ValueError(f"unexpected op {op['op']}")
    return out


def test_the_egress_patch_turns_on_the_route_agents_egress_source_and_nothing_else() -> None:
    """deploy/egress-route-agent.patch.json on magw.yaml's route agent (``kubectl patch --type=json``): its args
    gain ``--egress`` (the kube source then reads EgressVIPs, EgressConfig and the workloads, which its RBAC
    grants: test_deploy_rbac), the daemon's parser reads it, and the rest of the DaemonSet is unchanged. Its
    ``test`` op refuses a DaemonSet whose first container is not the route agent."""
    ops = json.loads((DEPLOY / "egress-route-agent.patch.json").read_text())
    before = find("DaemonSet", "magw-route-agent")
    after = _json_patch(before, ops)
    (c_before,), (c_after,) = (d["spec"]["template"]["spec"]["containers"] for d in (before, after))
    assert "--egress" not in c_before["args"]
    assert c_after["args"] == [*c_before["args"], "--egress"]
    c_after["args"] = c_before["args"]
    assert after == before  # nothing else changed
    c_after["args"] = [*c_before["args"], "--egress"]
    parsed = route_agent_daemon.build_parser().parse_args(
        [a.replace("$(NODE_NAME)", "n").replace("$(CLUSTER_ID)", "c") for a in c_after["args"]]
    )
    assert parsed.egress is True
    renamed = copy.deepcopy(before)
    renamed["spec"]["template"]["spec"]["containers"][0]["name"] = "other"
    with pytest.raises(ValueError, match="test failed"):
        _json_patch(renamed, ops)
