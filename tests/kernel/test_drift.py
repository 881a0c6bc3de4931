"""Drift: objects of ours changed or deleted behind our back are restored by the next sync, which names them.

The changes are made with ``ip``/``bridge``/``nft`` (not through our driver); the
restored state is checked both through the driver and with those same tools.
"""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from magw.desired.node.ids import nexthop_id
from magw.desired.node.planner import plan
from magw.desired.state import DesiredState
from magw.drivers.netlink.constants import RTPROT_MAGW
from magw.model import Strategy
from magw.reconcile.changeset import NftChange, Op
from tests.support.kernel_node import add_cni_device, real_node_driver, sync_once
from tests.support.netns import bridge_json, ip_json, nft_json, run
from tests.support.planner_seed import seed_east

pytestmark = pytest.mark.kernel

NODE = "e-gw1"
REMOTE_VTEP = "241.18.0.4"  # w-gw1 on vxlan-tunnel
REMOTE_MAC = "02:53:f1:12:00:04"
REMOTE_UNDERLAY = "198.51.100.4"


def _named(change: Op | NftChange) -> tuple[str, str, object]:
    if isinstance(change, NftChange):
        return ("replace" if change.table is not None else "delete", "nft", (change.family, change.name))
    return (change.verb, change.kind, change.obj.key)


def _nft_rule_handle(ns: str, chain: str) -> int:
    doc = nft_json(ns, "-a", "list", "chain", "ip", "magw", chain)
    return int(next(item["rule"]["handle"] for item in doc["nftables"] if "rule" in item))


def _installed(ns: str) -> DesiredState:
    snapshot = seed_east(Strategy.RESILIENT)
    add_cni_device(ns, snapshot.node(NODE).cni_ip)
    desired = plan(snapshot, NODE)
    with real_node_driver(ns) as driver:
        first = sync_once(driver, desired)
        assert first.result.failed == ()
        assert driver.observe() == desired
    return desired


def test_drift_is_restored_and_reported(ns: str) -> None:
    """A deleted route, a re-pointed nexthop, a deleted FDB entry, a changed neighbor and a deleted nft rule
    come back in one sync whose changes name exactly those objects."""
    desired = _installed(ns)
    route = next(r for r in desired.routes if str(r.dst) == "10.2.0.0/16")
    nh_id = nexthop_id(IPv4Address(REMOTE_VTEP), inter_cluster=True)
    assert any(nh.id == nh_id for nh in desired.nexthops)

    run(ns, "ip", "route", "del", str(route.dst), "table", str(route.table), "metric", str(route.metric))
    run(ns, "ip", "nexthop", "replace", "id", str(nh_id), "via", "241.18.0.99", "dev", "vxlan-tunnel")
    run(ns, "bridge", "fdb", "del", REMOTE_MAC, "dev", "vxlan-tunnel", "dst", REMOTE_UNDERLAY, "self")
    run(
        ns,
        "ip",
        "neigh",
        "replace",
        REMOTE_VTEP,
        "dev",
        "vxlan-tunnel",
        "lladdr",
        "02:00:00:00:00:99",
        "nud",
        "permanent",
    )
    run(ns, "nft", "delete", "rule", "ip", "magw", "forward", "handle", str(_nft_rule_handle(ns, "forward")))

    with real_node_driver(ns) as driver:
        fixed = sync_once(driver, desired)
        assert fixed.result.failed == ()
        assert sorted(map(_named, fixed.changes.ops), key=str) == sorted(
            [
                ("create", "routes", route.key),
                ("replace", "nexthops", nh_id),
                ("create", "fdb", ("vxlan-tunnel", REMOTE_MAC)),
                ("replace", "neighbors", ("vxlan-tunnel", IPv4Address(REMOTE_VTEP))),
            ],
            key=str,
        )
        assert [_named(c) for c in fixed.changes.nft] == [("replace", "nft", ("ip", "magw"))]
        assert driver.observe() == desired

    routes = ip_json(ns, "route", "show", "table", "100", str(route.dst))
    assert [(r["dst"], r.get("nhid"), r["protocol"]) for r in routes if r.get("metric") == 100] == [
        (str(route.dst), route.nhid, str(RTPROT_MAGW))
    ]
    nh = next(n for n in ip_json(ns, "nexthop", "show") if n["id"] == nh_id)
    assert (nh["gateway"], nh["dev"]) == (REMOTE_VTEP, "vxlan-tunnel")
    fdb = [(e["mac"], e.get("dst")) for e in bridge_json(ns, "fdb", "show", "dev", "vxlan-tunnel")]
    assert (REMOTE_MAC, REMOTE_UNDERLAY) in fdb
    neigh = [(n["dst"], n["lladdr"]) for n in ip_json(ns, "neigh", "show", "dev", "vxlan-tunnel")]
    assert (REMOTE_VTEP, REMOTE_MAC) in neigh
    forward = nft_json(ns, "list", "chain", "ip", "magw", "forward")["nftables"]
    assert desired.nft is not None
    assert len([i for i in forward if "rule" in i]) == len([r for r in desired.nft.rules if r.chain == "forward"])


def test_deleted_link_comes_back_with_its_dependents(ns: str) -> None:
    """Deleting our VXLAN link by hand drops everything on it (kernel); one sync re-creates all of it."""
    desired = _installed(ns)
    run(ns, "ip", "link", "del", "vxlan-tunnel")
    with real_node_driver(ns) as driver:
        fixed = sync_once(driver, desired)
        assert fixed.result.failed == ()
        created = {(verb, kind) for verb, kind, _ in map(_named, fixed.changes.ops)}
        assert ("create", "links") in created
        assert ("create", "routes") in created
        assert driver.observe() == desired
    link = ip_json(ns, "-d", "link", "show", "vxlan-tunnel")[0]
    assert (link["linkinfo"]["info_data"]["id"], link["linkinfo"]["info_data"]["port"]) == (1000, 4500)
    on_tunnel = sorted(n["id"] for n in ip_json(ns, "nexthop", "show") if n.get("dev") == "vxlan-tunnel")
    assert on_tunnel == sorted(nh.id for nh in desired.nexthops if nh.dev == "vxlan-tunnel")
