"""The driver contract, one suite for the fake node (FakeNetlink + FakeNft) and the real kernel
(NetlinkDriver + NftDriver in a throwaway namespace).

Whatever passes here holds for both, so planner and reconciler tests on the fake say
something about the kernel. A case the fake fails is a fake bug.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any

import attrs
import pytest

from magw.desired.node.planner import plan
from magw.desired.state import (
    KINDS,
    MAIN_TABLE,
    Address,
    DesiredState,
    Fdb,
    Link,
    Neighbor,
    Nexthop,
    NexthopGroup,
    Route,
    Rule,
)
from magw.drivers.fake_node import fake_node_driver
from magw.drivers.netlink.constants import RTPROT_MAGW
from magw.drivers.netlink.fake.namespace import RTPROT_BOOT, FakeNetlink
from magw.model import Strategy
from magw.reconcile.changeset import ChangeSet, Op
from magw.reconcile.diff import diff
from magw.reconcile.driver import Driver
from tests.support.kernel_node import add_cni_device, real_node_driver
from tests.support.netns import bridge_json, ip_json, netns, run
from tests.support.planner_seed import seed_east, with_health

WORKER, GATEWAY = "e-w1", "e-gw1"


@attrs.frozen
class Node:
    """A driver under test, a way to give the node its CNI address (routes use it as ``src``), a way to add
    and read foreign routes, and a reading of FDB ports not through the driver (``bridge -j fdb``; the fake's
    dump text)."""

    driver: Driver
    add_cni_ip: Callable[[IPv4Address], None]
    add_foreign_unreachable: Callable[[Route], object]  # an unreachable route of protocol boot at route's key
    foreign_routes: Callable[[int], list[str]]  # "DST proto NAME" of the foreign unreachable routes in a table
    fdb_ports: Callable[[str], dict[str, int | None]]  # MAC -> port of each FDB entry with a dst on a device


_PROTO_NAMES = {RTPROT_BOOT: "boot"}  # as `ip -j route` names them


def _fake_foreign_unreachable(netlink: FakeNetlink, table: int) -> list[str]:
    """``"DST proto NAME"`` of the unreachable routes of another protocol than ours in ``table``."""
    out = []
    for line in netlink.dump().splitlines():
        words = line.split()
        if words[:2] != ["route", "unreachable"] or words[-1] == str(RTPROT_MAGW):
            continue
        if words[4] == ("main" if table == MAIN_TABLE else str(table)):
            out.append(f"{words[2]} proto {_PROTO_NAMES.get(int(words[-1]), words[-1])}")
    return sorted(out)


def _fake_fdb_ports(netlink: FakeNetlink, dev: str) -> dict[str, int | None]:
    """From the fake's dump: ``fdb MAC dev DEV dst IP [port P] self permanent``."""
    out: dict[str, int | None] = {}
    for line in netlink.dump().splitlines():
        words = line.split()
        if words[0] == "fdb" and words[3] == dev:
            out[words[1]] = int(words[words.index("port") + 1]) if "port" in words else None
    return out


@contextlib.contextmanager
def _fake() -> Iterator[Node]:
    netlink = FakeNetlink()
    yield Node(
        driver=fake_node_driver(netlink=netlink),
        add_cni_ip=lambda ip: netlink.add_foreign_address("cni0", IPv4Interface(f"{ip}/24")),
        add_foreign_unreachable=lambda route: netlink.add_foreign(
            Route(table=route.table, dst=route.dst, metric=route.metric, type="unreachable"), protocol=RTPROT_BOOT
        ),
        foreign_routes=lambda table: _fake_foreign_unreachable(netlink, table),
        fdb_ports=lambda dev: _fake_fdb_ports(netlink, dev),
    )


@contextlib.contextmanager
def _kernel() -> Iterator[Node]:
    with netns("magwt-contract") as ns, real_node_driver(ns) as driver:
        yield Node(
            driver=driver,
            add_cni_ip=lambda ip: add_cni_device(ns, ip),
            add_foreign_unreachable=lambda route: run(
                ns,
                "ip",
                "route",
                "add",
                "unreachable",
                str(route.dst),
                "table",
                str(route.table),
                "metric",
                str(route.metric),
                "proto",
                "boot",
            ),
            foreign_routes=lambda table: sorted(
                f"{r['dst']} proto {r['protocol']}"
                for r in ip_json(ns, "-d", "route", "show", "table", str(table))
                if r.get("protocol") != "157" and r.get("type") == "unreachable"
            ),
            fdb_ports=lambda dev: {
                e["mac"]: e.get("port") for e in bridge_json(ns, "fdb", "show", "dev", dev) if "dst" in e
            },
        )


@pytest.fixture(params=["fake", pytest.param("kernel", marks=pytest.mark.kernel)])
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    with _fake() if request.param == "fake" else _kernel() as made:
        yield made


def _planned(node: Node, name: str, strategy: Strategy = Strategy.RESILIENT) -> DesiredState:
    snapshot = seed_east(strategy)
    node.add_cni_ip(snapshot.node(name).cni_ip)
    return plan(snapshot, name)


def _sync(node: Node, desired: DesiredState) -> ChangeSet:
    """One sync that must not fail; returns the changes it carried out."""
    changes = diff(desired, node.driver.observe())
    result = node.driver.apply(changes)
    assert [f.describe() for f in result.failed] == []
    assert len(result.applied) == len(changes)
    return changes


def _installed(node: Node, name: str = GATEWAY, strategy: Strategy = Strategy.RESILIENT) -> DesiredState:
    desired = _planned(node, name, strategy)
    _sync(node, desired)
    assert node.driver.observe() == desired
    return desired


@pytest.mark.parametrize("strategy", list(Strategy))
@pytest.mark.parametrize("name", [WORKER, GATEWAY])
def test_apply_plan_then_observe_equals_plan(node: Node, name: str, strategy: Strategy) -> None:
    """After one sync the driver observes exactly the plan, and a second diff is empty."""
    desired = _planned(node, name, strategy)
    changes = _sync(node, desired)
    assert len(changes.ops) == sum(len(desired.of_kind(kind)) for kind in KINDS)
    assert node.driver.observe() == desired
    assert diff(desired, node.driver.observe()) == ChangeSet()


def test_applying_the_same_changes_twice_succeeds(node: Node) -> None:
    """Create of an existing identical object succeeds: the same ChangeSet applied again has no failure."""
    desired = _planned(node, GATEWAY)
    changes = diff(desired, node.driver.observe())
    assert node.driver.apply(changes).failed == ()
    assert node.driver.apply(changes).failed == ()
    assert node.driver.observe() == desired


def _first(objs: tuple[object, ...], dev: str | None = None) -> int:
    return next(i for i, o in enumerate(objs) if dev is None or getattr(o, "dev", None) == dev)


def _evolve_one(state: DesiredState, kind: str, index: int, **changes: Any) -> DesiredState:
    objs = list(state.of_kind(kind))
    objs[index] = attrs.evolve(objs[index], **changes)
    alone: dict[str, Any] = {kind: objs}
    return attrs.evolve(state, **alone)


def _tunnel_nexthop(state: DesiredState) -> Nexthop:
    return next(nh for nh in state.nexthops if nh.dev == "vxlan-tunnel")


REPLACEMENTS: dict[str, Callable[[DesiredState], DesiredState]] = {
    "link mtu": lambda s: _evolve_one(s, "links", 0, mtu=1400),
    "link mac": lambda s: _evolve_one(s, "links", 0, mac="02:53:aa:bb:cc:dd"),
    "link vni (re-created)": lambda s: _evolve_one(s, "links", 0, vni=101),
    "link port (re-created)": lambda s: _evolve_one(s, "links", 1, port=4501),
    "address": lambda s: _evolve_one(s, "addresses", 0, address=IPv4Interface("240.18.0.60/8")),
    "neighbor mac": lambda s: _evolve_one(s, "neighbors", 0, mac="02:53:00:00:00:99"),
    "fdb dst": lambda s: _evolve_one(s, "fdb", 0, dst=IPv4Address("172.18.0.99")),
    "fdb port": lambda s: _evolve_one(s, "fdb", 0, port=5001),
    "nexthop via": lambda s: _evolve_one(
        s, "nexthops", s.nexthops.index(_tunnel_nexthop(s)), via=IPv4Address("241.18.0.99")
    ),
    "group members": lambda s: _evolve_one(s, "groups", 0, members=s.groups[0].members[:1]),
    "route src": lambda s: _evolve_one(s, "routes", 0, src=None),
    "route unreachable": lambda s: _evolve_one(s, "routes", 0, type="unreachable", nhid=None, src=None),
    "rule table": lambda s: _evolve_one(s, "rules", 0, table=101),
    "rule iif": lambda s: _evolve_one(s, "rules", 0, iif="vxlan-tunnel"),
    "nft table": lambda s: attrs.evolve(s, nft=attrs.evolve(s.nft, rules=s.nft.rules[1:])) if s.nft else s,
}


@pytest.mark.parametrize("change", list(REPLACEMENTS))
def test_replace_each_kind(node: Node, change: str) -> None:
    """Every kind of object can be changed by a sync; afterwards the driver observes the new state."""
    desired = REPLACEMENTS[change](_installed(node))
    changes = _sync(node, desired)
    assert len(changes) >= 1
    assert node.driver.observe() == desired
    assert diff(desired, node.driver.observe()) == ChangeSet()


def _without(state: DesiredState, *kinds: str) -> DesiredState:
    empty: dict[str, Any] = {kind: () for kind in kinds}
    return attrs.evolve(state, **empty)


# Each kind, removed with whatever refers to it (a state that refers to a missing object is not a plan).
DELETIONS: dict[str, tuple[str, ...]] = {
    "rules": ("rules",),
    "routes": ("routes", "rules"),
    "groups": ("groups", "routes", "rules"),
    "nexthops": ("nexthops", "groups", "routes", "rules"),
    "fdb": ("fdb",),
    "neighbors": ("neighbors",),
    "links": ("links", "addresses", "neighbors", "fdb", "nexthops", "groups", "routes", "rules"),
}


@pytest.mark.parametrize("kind", list(DELETIONS))
def test_delete_each_kind(node: Node, kind: str) -> None:
    """Every kind of object can be deleted by a sync; what is still desired stays."""
    desired = _without(_installed(node), *DELETIONS[kind])
    _sync(node, desired)
    assert node.driver.observe() == desired


def test_deleting_the_last_address_flushes_the_links_neighbors(node: Node) -> None:
    """Kernel 6.18: when a link loses its last IPv4 address, its neighbor entries go too, permanent ones
    included (fib_disable_ip -> arp_ifdown); FDB entries stay."""
    installed = _installed(node)
    desired = _without(installed, "addresses", "nexthops", "groups", "routes", "rules")
    _sync(node, desired)
    assert node.driver.observe() == attrs.evolve(desired, neighbors=())
    _sync(node, installed)
    assert node.driver.observe() == installed


def test_delete_nft_table(node: Node) -> None:
    """A state without an nft table deletes ours."""
    desired = attrs.evolve(_installed(node), nft=None)
    changes = _sync(node, desired)
    assert (changes.ops, [c.table for c in changes.nft]) == ((), [None])
    assert node.driver.observe() == desired


def test_delete_missing_objects_succeeds(node: Node) -> None:
    """Deleting objects that do not exist (of every kind, some on a missing link) succeeds and changes nothing."""
    desired = _installed(node, WORKER)
    ghost_ops = [
        Op(verb="delete", kind="rules", obj=Rule(priority=100, table=100)),
        Op(verb="delete", kind="routes", obj=Route(table=100, dst=IPv4Network("10.99.0.0/16"), metric=100)),
        Op(verb="delete", kind="groups", obj=NexthopGroup(id=0x62ABCDEF, members=())),
        Op(
            verb="delete",
            kind="nexthops",
            obj=Nexthop(id=0x60ABCDEF, via=IPv4Address("240.1.2.3"), dev="vx-submariner"),
        ),
        Op(
            verb="delete",
            kind="fdb",
            obj=Fdb(dev="vx-submariner", mac="02:53:00:00:00:42", dst=IPv4Address("172.18.0.42")),
        ),
        Op(
            verb="delete",
            kind="neighbors",
            obj=Neighbor(dev="vxlan-tunnel", ip=IPv4Address("241.1.2.3"), mac="02:53:00:00:00:43"),
        ),
        Op(verb="delete", kind="addresses", obj=Address(dev="vxlan-tunnel", address=IPv4Interface("241.9.9.9/8"))),
        Op(
            verb="delete",
            kind="links",
            obj=Link(name="vxlan-tunnel", vni=1000, port=4500, mtu=1450, mac="02:53:f1:00:00:01"),
        ),
    ]
    result = node.driver.apply(ChangeSet(ops=tuple(ghost_ops)))
    assert [f.describe() for f in result.failed] == []
    assert node.driver.observe() == desired


def test_address_on_missing_link_fails_alone(node: Node) -> None:
    """An address on a link that does not exist fails with ENODEV naming that address; the next op still applies."""
    desired = _installed(node, WORKER)
    bad = Op(verb="create", kind="addresses", obj=Address(dev="vxlan-tunnel", address=IPv4Interface("241.18.0.3/8")))
    neigh = Neighbor(dev="vx-submariner", ip=IPv4Address("240.18.0.77"), mac="02:53:f0:12:00:4d")
    good = Op(verb="create", kind="neighbors", obj=neigh)
    result = node.driver.apply(ChangeSet(ops=(bad, good)))
    assert [(f.op, f.error.split(":")[0]) for f in result.failed] == [(bad, "ENODEV")]
    assert result.applied == (good,)
    assert node.driver.observe() == attrs.evolve(desired, neighbors=(*desired.neighbors, neigh))


def test_route_to_missing_nexthop_fails_alone(node: Node) -> None:
    """A route to a nexthop id that does not exist fails (EINVAL "Nexthop id does not exist", kernel 6.18)
    naming that route; a valid route in the same batch is installed."""
    desired = _installed(node, WORKER)
    src = desired.routes[0].src
    bad_route = Route(table=254, dst=IPv4Network("10.98.0.0/16"), metric=100, src=src, nhid=0x62ABCDEF)
    good_route = attrs.evolve(desired.routes[0], dst=IPv4Network("10.97.0.0/16"))
    bad = Op(verb="create", kind="routes", obj=bad_route)
    good = Op(verb="create", kind="routes", obj=good_route)
    result = node.driver.apply(ChangeSet(ops=(bad, good)))
    assert [(f.op, f.error.split(":")[0]) for f in result.failed] == [(bad, "EINVAL")]
    assert result.applied == (good,)
    assert node.driver.observe() == attrs.evolve(desired, routes=(*desired.routes, good_route))


def test_failover_is_one_group_replace(node: Node) -> None:
    """A gateway going down changes only the group's members: one replace, routes keep their nhid."""
    before = _installed(node, WORKER)
    snapshot = with_health(seed_east(Strategy.RESILIENT), down=["e-gw2"])
    after = plan(snapshot, WORKER)
    changes = _sync(node, after)
    assert [(op.verb, op.kind) for op in changes.ops] == [("replace", "groups")]
    assert node.driver.observe() == after
    assert [r.nhid for r in after.routes] == [r.nhid for r in before.routes]
    assert [len(g.members) for g in after.groups] == [1]

    recovered = _sync(node, before)
    assert [(op.verb, op.kind) for op in recovered.ops] == [("replace", "groups")]
    assert node.driver.observe() == before


# Driver semantics: "create" means "make it exist with exactly this content", the same as "replace".
CREATES_OVER: dict[str, Callable[[DesiredState], DesiredState]] = {
    "link mtu": REPLACEMENTS["link mtu"],
    "neighbor mac": REPLACEMENTS["neighbor mac"],
    "fdb dst": REPLACEMENTS["fdb dst"],
    "fdb port": REPLACEMENTS["fdb port"],
    "rule table": REPLACEMENTS["rule table"],
    "nexthop gateway": REPLACEMENTS["nexthop via"],
}


@pytest.mark.parametrize("change", list(CREATES_OVER))
def test_create_over_different_content_replaces(node: Node, change: str) -> None:
    """A ``create`` of an object of ours whose key holds other content succeeds and leaves exactly the new
    content, everything else unchanged: fake and kernel follow the same semantics (magw/reconcile/driver.py)."""
    installed = _installed(node)
    desired = CREATES_OVER[change](installed)
    (kind,) = [k for k in KINDS if desired.of_kind(k) != installed.of_kind(k)]
    (new,) = set(desired.of_kind(kind)) - set(installed.of_kind(kind))
    result = node.driver.apply(ChangeSet(ops=(Op(verb="create", kind=kind, obj=new),)))
    assert [f.describe() for f in result.failed] == []
    assert node.driver.observe() == desired


@pytest.mark.parametrize("mac", ["01:00:5e:00:00:01", "00:00:00:00:00:00"])
def test_fdb_entry_with_a_multicast_or_zero_mac_is_refused(node: Node, mac: str) -> None:
    """The vxlan driver refuses a multicast or all-zero FDB MAC written with NLM_F_REPLACE: EOPNOTSUPP (Python
    names errno 95 ENOTSUP). Nothing is added; a good entry in the same ChangeSet still applies."""
    installed = _installed(node, WORKER)
    bad = Op(verb="create", kind="fdb", obj=Fdb(dev="vx-submariner", mac=mac, dst=IPv4Address("172.18.0.42")))
    good_fdb = Fdb(dev="vx-submariner", mac="02:53:00:00:00:42", dst=IPv4Address("172.18.0.42"))
    good = Op(verb="create", kind="fdb", obj=good_fdb)
    result = node.driver.apply(ChangeSet(ops=(bad, good)))
    assert [(f.op, f.error.split(":")[0]) for f in result.failed] == [(bad, "ENOTSUP")]
    assert node.driver.observe() == attrs.evolve(installed, fdb=(*installed.fdb, good_fdb))


def test_fdb_port_is_written_changed_and_dropped(node: Node) -> None:
    """An FDB entry's own port (``bridge fdb replace ... dst IP port P``, NDA_PORT) is written, read back equal
    (a second diff is empty), changed by one replace, and dropped (None: the device's port) by one replace;
    ``bridge -j fdb show`` (the fake: its dump) shows the port only while it is set."""
    installed = _installed(node)
    index = _first(installed.fdb, dev="vxlan-tunnel")
    entry = installed.fdb[index]
    assert entry.port is None
    for port in (5001, 5002, None):
        desired = _evolve_one(installed, "fdb", index, port=port)
        changes = _sync(node, desired)
        assert [(op.verb, op.kind, op.obj) for op in changes.ops] == [("replace", "fdb", desired.fdb[index])]
        assert node.driver.observe() == desired
        assert diff(desired, node.driver.observe()) == ChangeSet()
        ports = node.fdb_ports(entry.dev)
        assert ports[entry.mac] == port
        assert {mac: p for mac, p in ports.items() if mac != entry.mac} == {
            f.mac: None for f in installed.fdb if f.dev == entry.dev and f.mac != entry.mac
        }


def test_fdb_port_0_or_the_devices_own_port_reads_back_none(node: Node) -> None:
    """The kernel reports NDA_PORT only when it is neither 0 nor the device's port (vxlan_fdb_info, 6.18): an
    entry written with either reads back with port None, so a plan that says so never converges."""
    installed = _installed(node)
    index = _first(installed.fdb, dev="vxlan-tunnel")
    (link,) = [lk for lk in installed.links if lk.name == "vxlan-tunnel"]
    for port in (0, link.port):
        desired = _evolve_one(installed, "fdb", index, port=port)
        result = node.driver.apply(ChangeSet(ops=(Op(verb="replace", kind="fdb", obj=desired.fdb[index]),)))
        assert [f.describe() for f in result.failed] == []
        assert node.driver.observe() == installed
        assert node.fdb_ports("vxlan-tunnel")[desired.fdb[index].mac] is None


@pytest.mark.parametrize("port", [-1, 65536])
def test_fdb_port_outside_u16_fails_alone(node: Node, port: int) -> None:
    """A port NDA_PORT cannot carry fails with EINVAL naming the entry (the netlink driver does not send it);
    the entry keeps what it had, and another op of the same ChangeSet applies."""
    installed = _installed(node)
    index = _first(installed.fdb, dev="vxlan-tunnel")
    bad = Op(verb="replace", kind="fdb", obj=attrs.evolve(installed.fdb[index], port=port))
    good_fdb = Fdb(dev="vxlan-tunnel", mac="02:53:00:00:00:42", dst=IPv4Address("172.18.0.42"), port=5003)
    good = Op(verb="create", kind="fdb", obj=good_fdb)
    result = node.driver.apply(ChangeSet(ops=(bad, good)))
    assert [(f.op, f.error.split(":")[0]) for f in result.failed] == [(bad, "EINVAL")]
    assert str(port) in result.failed[0].error
    assert result.applied == (good,)
    assert node.driver.observe() == attrs.evolve(installed, fdb=(*installed.fdb, good_fdb))


def test_vxlan_port_0_reads_back_8472(node: Node) -> None:
    """The kernel accepts a VXLAN link with port 0, silently, and gives it Linux's default port 8472."""
    link = Link(name="vxlan-tunnel", vni=1000, port=0, mtu=1450, mac="02:53:f1:00:00:01")
    result = node.driver.apply(ChangeSet(ops=(Op(verb="create", kind="links", obj=link),)))
    assert [f.describe() for f in result.failed] == []
    assert node.driver.observe().links == (attrs.evolve(link, port=8472),)


def test_route_create_over_a_foreign_route_is_eexist_and_leaves_it(node: Node) -> None:
    """The one refusal of "create = make it exist": the kernel's route key has no protocol, and a route create
    whose table/dst/metric holds a route of another protocol fails with EEXIST; the foreign route stays."""
    installed = _installed(node, WORKER)
    ours = attrs.evolve(installed.routes[0], dst=IPv4Network("10.99.0.0/16"))
    node.add_foreign_unreachable(ours)
    result = node.driver.apply(ChangeSet(ops=(Op(verb="create", kind="routes", obj=ours),)))
    assert [f.error.split(":")[0] for f in result.failed] == ["EEXIST"]
    assert node.driver.observe() == installed
    assert node.foreign_routes(ours.table) == ["10.99.0.0/16 proto boot"]


def test_rules_with_iif_at_the_ovn_priorities(node: Node) -> None:
    """OVN's rules (149 ``iif vxlan-tunnel lookup 149``, 150 ``from all lookup 150``) are written, read back with
    their iif, changed (iif renamed, then dropped) and deleted by syncs like any rule of ours."""
    installed = _installed(node)
    ovn = (Rule(priority=149, table=149, iif="vxlan-tunnel"), Rule(priority=150, table=150))
    desired = attrs.evolve(installed, rules=(*installed.rules, *ovn))
    _sync(node, desired)
    assert node.driver.observe() == desired
    for iif in ("vx-submariner", None):
        desired = _evolve_one(desired, "rules", 1, iif=iif)
        assert desired.rules[1].priority == 149
        assert len(_sync(node, desired)) == 1
        assert node.driver.observe() == desired
    _sync(node, installed)
    assert node.driver.observe() == installed
