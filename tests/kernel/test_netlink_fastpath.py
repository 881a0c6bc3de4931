"""Kernel tests of the fast netlink path (RawNetlink + RouteNexthopIO) in throwaway namespaces.

Every effect is read back with iproute2 (``ip -json``), independently of our own parsers.
Each namespace holds a veth pair ``va``/``vb`` (both up) with 10.0.0.1/24 on ``va``, so
gateways 10.0.0.2-10.0.0.9 are on-link.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pytest
from structlog.testing import capture_logs

from magw.desired.state import GroupMember, Nexthop, NexthopGroup, Route, RouteNexthop
from magw.drivers.netlink import fastpath
from magw.drivers.netlink.fastpath import RouteNexthopIO
from magw.drivers.netlink.linktable import link_names
from magw.drivers.netlink.nlattr import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST
from magw.drivers.netlink.rawsock import RawNetlink
from magw.drivers.netlink.routes import pack_route
from magw.drivers.netns import NoSuchNetns
from magw.reconcile.changeset import Op
from tests.support.netns import ip_json, run

pytestmark = pytest.mark.kernel

NH_A = 0x61000002
NH_B = 0x61000003
NH_C = 0x61000004
GROUP = 0x62000001
RES_GROUP = 0x63000001


def gw(last: int) -> IPv4Address:
    return IPv4Address(f"10.0.0.{last}")


def nexthop(nh_id: int, last: int) -> Nexthop:
    return Nexthop(id=nh_id, via=gw(last), dev="va")


def route(dst: str, *, table: int = 100, metric: int = 100, **kw: Any) -> Route:
    return Route(table=table, dst=IPv4Network(dst), metric=metric, **kw)


def create(kind: str, *objs: Any) -> list[Op]:
    return [Op(verb="create", kind=kind, obj=o) for o in objs]


def ops(verb: str, kind: str, *objs: Any) -> list[Op]:
    return [Op(verb=verb, kind=kind, obj=o) for o in objs]


def wire(ns: str) -> None:
    run(ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
    run(ns, "ip", "link", "set", "va", "up")
    run(ns, "ip", "link", "set", "vb", "up")
    run(ns, "ip", "addr", "add", "10.0.0.1/24", "dev", "va")


def kernel_nexthops(ns: str) -> dict[int, dict[str, Any]]:
    return {n["id"]: n for n in ip_json(ns, "-d", "nexthop", "show")}


def kernel_routes(ns: str, protocol: str = "157") -> dict[tuple[str, str, int], dict[str, Any]]:
    """Routes of ``protocol`` by (table, dst, metric), as ``ip -json -d route show table all`` prints them
    (``-d`` for the type and table of every route; iproute2 6.1 omits a metric of 0)."""
    out = {}
    for r in ip_json(ns, "-d", "route", "show", "table", "all"):
        if r.get("protocol") == protocol:
            out[(r["table"], r["dst"], r.get("metric", 0))] = r
    return out


@pytest.fixture
def wired(ns: str) -> str:
    wire(ns)
    return ns


@pytest.fixture
def io(wired: str) -> Iterator[RouteNexthopIO]:
    with RawNetlink(wired) as sock:
        yield RouteNexthopIO(sock)


# -- the socket ---------------------------------------------------------------------------------


def test_missing_namespace_is_refused_and_not_created() -> None:
    """RawNetlink on a namespace that does not exist raises NoSuchNetns naming it, and creates nothing."""
    name = f"magwt-missing-{uuid.uuid4().hex[:10]}"
    with pytest.raises(NoSuchNetns, match=f"^no such network namespace: {name}$"):
        RawNetlink(name)
    assert os.path.exists(f"/var/run/netns/{name}") is False
    listed = subprocess.run(["ip", "-json", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert name not in [n["name"] for n in json.loads(listed or "[]")]


def test_socket_lives_in_the_namespace_and_the_thread_comes_back(wired: str) -> None:
    """The socket sees the namespace's links (va/vb exist only there); the calling thread's namespace is unchanged."""
    before = os.readlink("/proc/thread-self/ns/net")
    with RawNetlink(wired) as sock:
        assert os.readlink("/proc/thread-self/ns/net") == before
        names = set(link_names(sock).values())
    assert names == {link["ifname"] for link in ip_json(wired, "link", "show")}
    assert {"va", "vb"} <= names


# -- nexthops and groups ------------------------------------------------------------------------


def test_nexthops_create_replace_delete(wired: str, io: RouteNexthopIO) -> None:
    """Nexthop objects are created, replaced in place (new gateway) and deleted; iproute2 sees each step."""
    assert io.apply(create("nexthops", nexthop(NH_A, 2), nexthop(NH_B, 3))) == []
    seen = kernel_nexthops(wired)
    assert {i: (seen[i]["gateway"], seen[i]["dev"], seen[i]["protocol"]) for i in seen} == {
        NH_A: ("10.0.0.2", "va", "157"),
        NH_B: ("10.0.0.3", "va", "157"),
    }
    assert io.apply(ops("replace", "nexthops", nexthop(NH_A, 4))) == []
    assert kernel_nexthops(wired)[NH_A]["gateway"] == "10.0.0.4"
    assert io.apply(ops("delete", "nexthops", nexthop(NH_B, 3))) == []
    assert sorted(kernel_nexthops(wired)) == [NH_A]
    assert io.observe() == ([nexthop(NH_A, 4)], [], [])


def test_plain_and_resilient_groups(wired: str, io: RouteNexthopIO) -> None:
    """A plain group with weights and a resilient group with buckets/idle/unbalanced timers, as iproute2 prints them."""
    plain = NexthopGroup(id=GROUP, members=(GroupMember(id=NH_A), GroupMember(id=NH_B, weight=3)))
    resilient = NexthopGroup(
        id=RES_GROUP,
        members=(GroupMember(id=NH_A), GroupMember(id=NH_B)),
        type="resilient",
        buckets=32,
        idle_timer=7,
        unbalanced_timer=20,
    )
    # Members and groups in ONE apply: the kernel handles the batch in order.
    assert io.apply(create("nexthops", nexthop(NH_A, 2), nexthop(NH_B, 3)) + create("groups", plain, resilient)) == []
    seen = kernel_nexthops(wired)
    assert seen[GROUP]["group"] == [{"id": NH_A}, {"id": NH_B, "weight": 3}]
    assert "type" not in seen[GROUP]
    assert seen[RES_GROUP]["type"] == "resilient"
    assert seen[RES_GROUP]["resilient_args"] == {
        "buckets": 32,
        "idle_timer": 7,
        "unbalanced_timer": 20,
        "unbalanced_time": 0,
    }
    smaller = NexthopGroup(
        id=RES_GROUP, members=(GroupMember(id=NH_B),), type="resilient", buckets=32, idle_timer=7, unbalanced_timer=20
    )
    assert io.apply(ops("replace", "groups", smaller)) == []
    assert kernel_nexthops(wired)[RES_GROUP]["group"] == [{"id": NH_B}]
    assert io.observe() == ([nexthop(NH_A, 2), nexthop(NH_B, 3)], [plain, smaller], [])


def test_resilient_bucket_count_cannot_change(wired: str, io: RouteNexthopIO) -> None:
    """The kernel refuses to change a resilient group's bucket count: the op fails with EINVAL naming the group
    and carrying the kernel's reason; the group keeps its buckets."""
    group = NexthopGroup(id=RES_GROUP, members=(GroupMember(id=NH_A),), type="resilient", buckets=32)
    assert io.apply(create("nexthops", nexthop(NH_A, 2)) + create("groups", group)) == []
    bigger = NexthopGroup(id=RES_GROUP, members=(GroupMember(id=NH_A),), type="resilient", buckets=64)
    failures = io.apply(ops("replace", "groups", bigger))
    assert [f.op.obj for f in failures] == [bigger]
    assert failures[0].error.startswith(f"EINVAL: invalid argument: nexthop group id {RES_GROUP} (resilient)")
    assert "(kernel: " in failures[0].error
    assert kernel_nexthops(wired)[RES_GROUP]["resilient_args"]["buckets"] == 32


# -- routes -------------------------------------------------------------------------------------


def test_route_shapes(wired: str, io: RouteNexthopIO) -> None:
    """nhid, inline multipath, single inline, unreachable, src, metric, table 100/150/main: iproute2 shows each
    as intended, and observe() returns exactly what was applied."""
    group = NexthopGroup(id=GROUP, members=(GroupMember(id=NH_A), GroupMember(id=NH_B)))
    desired = [
        route("10.9.0.0/16", nhid=GROUP, src=IPv4Address("10.0.0.1")),
        route(
            "10.8.0.0/16",
            metric=98,
            nexthops=(RouteNexthop(via=gw(2), dev="va", weight=2), RouteNexthop(via=gw(3), dev="va")),
        ),
        route("10.7.0.0/16", table=254, metric=0, nexthops=(RouteNexthop(via=gw(4), dev="va"),)),
        route("10.6.0.0/16", table=150, metric=5, type="unreachable"),
        route("0.0.0.0/0", metric=7, nhid=NH_A),
    ]
    changes = create("nexthops", nexthop(NH_A, 2), nexthop(NH_B, 3)) + create("groups", group)
    assert io.apply(changes + create("routes", *desired)) == []
    seen = kernel_routes(wired)
    assert sorted(seen) == [
        ("100", "10.8.0.0/16", 98),
        ("100", "10.9.0.0/16", 100),
        ("100", "default", 7),
        ("150", "10.6.0.0/16", 5),
        ("main", "10.7.0.0/16", 0),
    ]
    nhid_route = seen[("100", "10.9.0.0/16", 100)]
    assert (nhid_route["nhid"], nhid_route["prefsrc"], nhid_route["type"]) == (GROUP, "10.0.0.1", "unicast")
    assert [(n["gateway"], n["dev"], n["weight"]) for n in seen[("100", "10.8.0.0/16", 98)]["nexthops"]] == [
        ("10.0.0.2", "va", 2),
        ("10.0.0.3", "va", 1),
    ]
    single = seen[("main", "10.7.0.0/16", 0)]
    assert (single["gateway"], single["dev"], "nexthops" in single) == ("10.0.0.4", "va", False)
    assert seen[("150", "10.6.0.0/16", 5)]["type"] == "unreachable"
    assert seen[("100", "default", 7)]["nhid"] == NH_A
    assert io.observe()[2] == sorted(desired, key=lambda r: r.key)


def test_route_replace_and_delete(wired: str, io: RouteNexthopIO) -> None:
    """Replace changes a route in place (same key, new path); delete removes it by key."""
    r = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(2), dev="va"),))
    assert io.apply(create("routes", r)) == []
    moved = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(3), dev="va"),))
    assert io.apply(ops("replace", "routes", moved)) == []
    assert kernel_routes(wired)[("100", "10.9.0.0/16", 100)]["gateway"] == "10.0.0.3"
    assert len(kernel_routes(wired)) == 1
    assert io.apply(ops("delete", "routes", moved)) == []
    assert kernel_routes(wired) == {}


def test_create_of_an_existing_route_of_ours_replaces_it(wired: str, io: RouteNexthopIO) -> None:
    """Create is idempotent for our own routes: an EEXIST on one of ours becomes a replace (stale observe)."""
    first = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(2), dev="va"),))
    assert io.apply(create("routes", first)) == []
    changed = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(5), dev="va"),))
    assert io.apply(create("routes", changed)) == []
    seen = kernel_routes(wired)
    assert [(k, v["gateway"]) for k, v in seen.items()] == [(("100", "10.9.0.0/16", 100), "10.0.0.5")]


# -- ownership ----------------------------------------------------------------------------------


def add_foreign_state(ns: str) -> None:
    run(ns, "ip", "nexthop", "add", "id", "5", "via", "10.0.0.2", "dev", "va")
    run(ns, "ip", "route", "add", "10.50.0.0/16", "via", "10.0.0.2", "table", "100", "proto", "static")
    run(ns, "ip", "route", "add", "10.51.0.0/16", "nhid", "5", "proto", "static")
    run(ns, "ip", "route", "add", "10.9.0.0/16", "via", "10.0.0.3", "table", "100", "metric", "100", "proto", "static")


def test_foreign_routes_and_nexthops_survive_and_are_not_observed(wired: str, io: RouteNexthopIO) -> None:
    """Foreign routes (other protocol, same tables) and nexthops outside our id range are never observed, survive
    a create-then-delete-everything cycle, and a create over a foreign route's exact key fails and leaves it."""
    add_foreign_state(wired)
    foreign_routes = kernel_routes(wired, "static")
    foreign_nexthops = kernel_nexthops(wired)
    clash = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(4), dev="va"),))
    mine = route("10.10.0.0/16", nhid=NH_A)
    failures = io.apply(create("nexthops", nexthop(NH_A, 2)) + create("routes", clash, mine))
    assert [f.op.obj for f in failures] == [clash]
    assert failures[0].error.startswith("EEXIST: a foreign route (another protocol) holds this table/dst/metric")
    assert io.observe() == ([nexthop(NH_A, 2)], [], [mine])
    nexthops, groups, routes = io.observe()
    cleanup = ops("delete", "routes", *routes) + ops("delete", "groups", *groups) + ops("delete", "nexthops", *nexthops)
    assert io.apply(cleanup) == []
    assert io.observe() == ([], [], [])
    assert kernel_routes(wired, "static") == foreign_routes
    assert kernel_nexthops(wired) == foreign_nexthops


def test_objects_outside_our_range_are_refused_unsent(wired: str, io: RouteNexthopIO) -> None:
    """A delete of a foreign nexthop id and a route in a table we do not own fail with EPERM and touch nothing."""
    add_foreign_state(wired)
    before_nh, before_routes = kernel_nexthops(wired), ip_json(wired, "route", "show", "table", "all")
    failures = io.apply(
        ops("delete", "nexthops", nexthop(5, 2)) + create("routes", route("10.60.0.0/16", table=200, nhid=5))
    )
    assert [f.error.split(":")[0] for f in failures] == ["EPERM", "EPERM"]
    assert "id 5 is outside magw's nexthop id range" in failures[0].error
    assert "table 200 is not one of magw's tables" in failures[1].error
    assert kernel_nexthops(wired) == before_nh
    assert ip_json(wired, "route", "show", "table", "all") == before_routes


# -- failures -----------------------------------------------------------------------------------


def test_one_failing_op_does_not_stop_the_others(wired: str, io: RouteNexthopIO) -> None:
    """A route to a missing nhid and a nexthop on a missing device fail, each naming its object; the rest apply."""
    good_before = route("10.1.0.0/16", nhid=NH_A)
    dangling = route("10.2.0.0/16", nhid=NH_C)
    good_after = route("10.3.0.0/16", nexthops=(RouteNexthop(via=gw(3), dev="va"),))
    no_dev = Nexthop(id=NH_B, via=gw(3), dev="nosuch0")
    changes = create("nexthops", nexthop(NH_A, 2), no_dev) + create("routes", good_before, dangling, good_after)
    failures = io.apply(changes)
    assert [f.op.obj for f in failures] == [no_dev, dangling]
    assert failures[0].error == f"ENODEV: no device nosuch0: nexthop id {NH_B} via 10.0.0.3 dev nosuch0"
    # Kernel 6.18 answers EINVAL "Nexthop id does not exist" for a route to a missing nhid.
    assert failures[1].error.startswith(f"EINVAL: invalid argument: route 10.2.0.0/16 table 100 metric 100 nhid {NH_C}")
    assert sorted(kernel_routes(wired)) == [("100", "10.1.0.0/16", 100), ("100", "10.3.0.0/16", 100)]
    assert sorted(kernel_nexthops(wired)) == [NH_A]


def test_delete_of_missing_objects_succeeds(wired: str, io: RouteNexthopIO) -> None:
    """Deleting a nexthop, a group and routes (existing and missing table) that are not there is success."""
    group = NexthopGroup(id=GROUP, members=(GroupMember(id=NH_A),))
    changes = (
        ops("delete", "routes", route("10.1.0.0/16", nhid=GROUP), route("10.2.0.0/16", table=150, nhid=GROUP))
        + ops("delete", "groups", group)
        + ops("delete", "nexthops", nexthop(NH_A, 2))
    )
    assert io.apply(changes) == []


def test_wrong_kind_is_a_programming_error(io: RouteNexthopIO) -> None:
    """Ops of kinds this path does not handle are refused up front with one line naming op.kind."""
    from magw.desired.state import Rule

    with pytest.raises(ValueError, match=r"^op.kind: RouteNexthopIO handles nexthops, groups, routes, got 'rules'$"):
        io.apply([Op(verb="create", kind="rules", obj=Rule(priority=100, table=100))])


# -- failover -----------------------------------------------------------------------------------


def gateways_used(ns: str, count: int = 64) -> set[str]:
    """The gateway the kernel picks for ``count`` destinations in 10.9.0.0/16 (``ip route get``)."""
    used = set()
    for i in range(count):
        got = ip_json(ns, "route", "get", f"10.9.{i}.{i + 1}")
        used.add(got[0]["gateway"])
    return used


def test_group_replace_moves_traffic_off_a_gateway(wired: str, io: RouteNexthopIO) -> None:
    """Failover is one group replace: the route keeps its nhid, the group loses the gateway, and no destination
    resolves through that gateway any more."""
    members = (GroupMember(id=NH_A), GroupMember(id=NH_B), GroupMember(id=NH_C))
    group = NexthopGroup(id=RES_GROUP, members=members, type="resilient", buckets=64, idle_timer=10)
    r = route("10.9.0.0/16", table=254, nhid=RES_GROUP)
    setup = create("nexthops", nexthop(NH_A, 2), nexthop(NH_B, 3), nexthop(NH_C, 4)) + create("groups", group)
    assert io.apply(setup + create("routes", r)) == []
    assert gateways_used(wired) == {"10.0.0.2", "10.0.0.3", "10.0.0.4"}
    without_b = NexthopGroup(
        id=RES_GROUP, members=(members[0], members[2]), type="resilient", buckets=64, idle_timer=10
    )
    assert io.apply(ops("replace", "groups", without_b)) == []
    assert kernel_routes(wired)[("main", "10.9.0.0/16", 100)]["nhid"] == RES_GROUP
    assert kernel_nexthops(wired)[RES_GROUP]["group"] == [{"id": NH_A}, {"id": NH_C}]
    assert gateways_used(wired) == {"10.0.0.2", "10.0.0.4"}


# -- batching -----------------------------------------------------------------------------------


def _packed_creates(
    sock: RawNetlink, count: int, *, flags: int = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL, **kw: Any
) -> tuple[list[Route], list[bytes]]:
    index = {name: i for i, name in link_names(sock).items()}.__getitem__
    routes = [route(f"10.{i // 256}.{i % 256}.0/24", **kw) for i in range(count)]
    return routes, [pack_route(r, index, flags=flags) for r in routes]


def test_acks_lost_to_a_tiny_receive_buffer_are_recovered(wired: str) -> None:
    """transact_ext, one ack per message: with a receive buffer far too small for the window, acks are dropped
    (ENOBUFS); the batch is resent from the first lost ack in smaller windows and every route ends up installed
    exactly once, each message reported ok (create-or-replace: a resent message is harmless)."""
    replace = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE
    with RawNetlink(wired, buffer_size=4096, window=1000) as sock, capture_logs() as logs:
        _, msgs = _packed_creates(sock, 1500, flags=replace, nexthops=(RouteNexthop(via=gw(2), dev="va"),))
        assert [a.errno for a in sock.transact_ext(msgs)] == [0] * 1500
        assert sock.window < 1000
    assert "netlink.acks_lost" in [e["event"] for e in logs]
    assert len(kernel_routes(wired)) == 1500


def test_errors_only_batches_need_one_ack_per_batch(wired: str) -> None:
    """The fastpath's transact_errors asks for the last message's ack only: the same tiny receive buffer that
    drops acks above holds one ack per batch, so 1,500 routes go in whole windows, nothing lost or resent."""
    desired = [
        route(f"10.{i // 256}.{i % 256}.0/24", nexthops=(RouteNexthop(via=gw(2), dev="va"),)) for i in range(1500)
    ]
    with RawNetlink(wired, buffer_size=4096, window=1000) as sock, capture_logs() as logs:
        rnio = RouteNexthopIO(sock)
        assert rnio.apply(create("routes", *desired)) == []
        assert sock.window == 1000
        observed = rnio.observe()[2]
    assert not {"netlink.acks_lost", "netlink.results_unknown"} & {e["event"] for e in logs}
    assert observed == sorted(desired, key=lambda r: r.key)
    assert len(kernel_routes(wired)) == 1500


def test_errors_only_failures_keep_their_place_among_successes(wired: str) -> None:
    """The kernel answers only the failing messages (by sequence number): each errno lands on its own message,
    the messages between them report success, and the last message (the barrier) reports its own result."""
    with RawNetlink(wired, window=4) as sock:
        ok_routes, ok_msgs = _packed_creates(sock, 6, nexthops=(RouteNexthop(via=gw(2), dev="va"),))
        _, bad_msgs = _packed_creates(sock, 3, nhid=NH_C)  # no such nexthop: EINVAL or ENOENT
        msgs = [ok_msgs[0], bad_msgs[0], ok_msgs[1], ok_msgs[2], ok_msgs[0], ok_msgs[3], bad_msgs[1], ok_msgs[4]]
        msgs += [ok_msgs[5], bad_msgs[2]]
        results = [a.errno for a in sock.transact_errors(msgs)]
    assert [e == 0 for e in results] == [True, False, True, True, False, True, False, True, True, False]
    assert results[4] == errno.EEXIST  # the exclusive create again
    assert sorted(kernel_routes(wired)) == sorted(("100", str(r.dst), 100) for r in ok_routes)


def test_errors_only_never_reports_success_when_error_replies_were_lost(wired: str) -> None:
    """Fail closed: 1,500 failing creates overflow a tiny receive buffer with error replies. Which ones were lost
    cannot be known, so those are reported as ENOBUFS ("result unknown"), never as a success, and are not sent
    again."""
    with RawNetlink(wired, buffer_size=4096, window=1000) as sock, capture_logs() as logs:
        _, msgs = _packed_creates(sock, 1500, nhid=NH_C)
        acks = sock.transact_errors(msgs)
    assert len(acks) == 1500
    assert all(a.errno != 0 for a in acks)
    unknown = [a for a in acks if a.errno == errno.ENOBUFS]
    assert unknown and all(a.message.startswith("result unknown") for a in unknown)
    assert "netlink.results_unknown" in [e["event"] for e in logs]
    assert kernel_routes(wired) == {}


def test_transact_returns_errno_per_message_in_order(wired: str) -> None:
    """transact() gives one errno per message, in order: 0, EEXIST for a duplicate exclusive create, 0."""
    path = (RouteNexthop(via=gw(2), dev="va"),)
    exclusive = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    with RawNetlink(wired) as sock:
        index = {name: i for i, name in link_names(sock).items()}.__getitem__
        first = pack_route(route("10.1.0.0/16", nexthops=path), index, flags=exclusive)
        again = pack_route(route("10.1.0.0/16", nexthops=path), index, flags=exclusive)
        other = pack_route(route("10.2.0.0/16", nexthops=path), index, flags=exclusive)
        assert sock.transact([first, again, other]) == [0, errno.EEXIST, 0]
    assert sorted(kernel_routes(wired)) == [("100", "10.1.0.0/16", 100), ("100", "10.2.0.0/16", 100)]


def test_ops_sent_in_chunks_keep_their_failures_and_adoptions(
    wired: str, io: RouteNexthopIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two ops per chunk, a refused op, a kernel error and a create over one of our routes (adopted) fall
    in different chunks; each failure still names its own op, and everything else is applied."""
    monkeypatch.setattr(fastpath, "CHUNK", 2)
    ours = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(2), dev="va"),))
    assert io.apply(create("routes", ours)) == []
    no_dev = Nexthop(id=NH_B, via=gw(3), dev="nosuch0")
    dangling = route("10.2.0.0/16", nhid=NH_C)
    changed = route("10.9.0.0/16", nexthops=(RouteNexthop(via=gw(5), dev="va"),))
    good = route("10.3.0.0/16", nhid=NH_A)
    failures = io.apply(create("nexthops", nexthop(NH_A, 2), no_dev) + create("routes", dangling, changed, good))
    assert [f.op.obj for f in failures] == [no_dev, dangling]
    routes = kernel_routes(wired)
    assert sorted(routes) == [("100", "10.3.0.0/16", 100), ("100", "10.9.0.0/16", 100)]
    assert routes[("100", "10.9.0.0/16", 100)]["gateway"] == "10.0.0.5"  # adopted: replaced with the new hop
