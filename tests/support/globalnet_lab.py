"""Oracles of the Globalnet lab tests (tests/lab/test_lab_globalnet.py, tests/lab/test_lab_ovn_globalnet.py).

What the controllers allocated is read from their statuses in the broker with a plain ``FileBroker`` (never
through the planner or the lab's own views), and what a server saw from the echo server's own answer.
"""

from __future__ import annotations

from ipaddress import IPv4Address

from magw.lab.build.state import LabState
from magw.lab.spec.layout import ECHO_PORT, LabLayout
from magw.lab.verify.connectivity import TrafficTarget, probe
from magw.model.globalnet import GlobalIPStatus, ObjectRef
from magw.sources.file.broker import FileBroker


def statuses(st: LabState, cluster: str) -> dict[ObjectRef, GlobalIPStatus]:
    broker = FileBroker(st.broker_dir, local_cluster=cluster)
    broker.scan()
    assert broker.snapshot is not None
    return dict(broker.snapshot.globalnet.statuses)


def status(st: LabState, cluster: str, kind: str, namespace: str, name: str) -> GlobalIPStatus:
    found = statuses(st, cluster).get(ObjectRef(kind, namespace, name))
    assert found is not None and found.allocated_ips, f"no addresses for {kind} {namespace}/{name} in {cluster}"
    return found


def ingress_ip(st: LabState, cluster: str, namespace: str, name: str) -> IPv4Address:
    """The global IP of GlobalIngressIP ``namespace/name`` (``svc-echo``, ``pod-web-0``)."""
    return status(st, cluster, "GlobalIngressIP", namespace, name).allocated_ips[0]


def egress_owner(st: LabState, cluster: str) -> dict[str, str]:
    """address -> ``<kind>/<name>@<gateway node>`` whose block holds it, over every many-to-one object of
    ``cluster``."""
    owner = {}
    for ref, s in statuses(st, cluster).items():
        if ref.kind in ("ClusterGlobalEgressIP", "GlobalEgressIP"):
            for block in s.gateways:
                owner.update({str(ip): f"{ref.kind}/{ref.name}@{block.node}" for ip in block.ips})
    return owner


def pod_ns(lab: LabLayout, cluster: str, name: str) -> str:
    """The network namespace of pod ``name`` (a default pod's short name like ``w1-p1`` or an extra pod's name)."""
    for p in lab.cluster(cluster).pods:
        if name in (p.name, p.short) or p.name.endswith(f"-{name}"):
            return p.namespace
    raise KeyError(name)


def seen(ns: str, ip: IPv4Address, proto: str) -> str:
    """The source address the echo server at ``ip`` saw from ``ns`` (the probe must be answered)."""
    (result,) = probe(ns, [TrafficTarget(proto=proto, ip=ip, port=ECHO_PORT)], timeout=2.0, attempts=3)
    assert result.ok, f"{ns} -> {proto}:{ip}: {result.error}"
    assert result.seen_ip is not None
    return result.seen_ip
