"""Kernel test: several active gateways on OVN, with packets, and a gateway failover (docs/ovn.md, "Failover").

A small ``--cni ovn`` lab (east: two gateways and a worker; west: a gateway and a worker; two pods per node) with
real traffic: paced UDP flows from east-w1's two pods to every west pod (``magw.lab.scenarios.pairs``: in Open
vSwitch's userspace datapath OVN's ECMP hash ignores UDP ports, so the flows of one pod pair share a gateway router;
eight pairs spread over both). Which gateways each flow crossed is read in the gateways' own kernels (nft sets in
their forward hook, ``magw.lab.observe.flowwatch``: every packet OVN's gateway router ``submariner_router[_k]``
hands to its gateway host over ``ovn-k8s-sub0`` is forwarded there); the NB reroute policy with ``ovn-nbctl``.
Waits are bounded polls; nothing asserts how long anything took (``benchmarks/failover.py --cni ovn`` measures it).
Every measurement sends from client ports of its own (see ``magw.lab.scenarios.pairs``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from magw.desired.ovn.topology import Slot
from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import agent_status, daemons_installed
from magw.lab.planes.ovn import ovn_dir, syncer_status
from magw.lab.planes.ovn_nodes import ovs_missing
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.planes.ovn_topology import nbctl
from magw.lab.scenarios import failure
from magw.lab.scenarios.failover import BASE_PORT, FailoverResult
from magw.lab.scenarios.pairs import make_pairs, measure_pairs
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import parse_topology
from tests.support.labkit import poll, unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

VICTIM, SURVIVOR = "east-gw1", "east-gw2"
FLOWS, RATE = 16, 50  # two flows per pod pair, 50 datagrams/s each: light for the userspace datapath on 2 cores
EAST_GATEWAYS = {VICTIM, SURVIVOR}


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    reason = ovn_missing() or ovs_missing()
    if reason:
        pytest.skip(reason)
    topo = parse_topology({"clusters": [{"id": "east", "gateways": 2, "workers": 1, "pods_per_node": 2},
                                        {"id": "west", "gateways": 1, "workers": 1, "pods_per_node": 2}]})  # fmt: skip
    name = unique_name()
    try:
        st = build.up(topo, name=name, cni="ovn", wait_timeout=120.0)
        yield layout(name, topo), st
    finally:
        build.down(name)


class Ports:
    """A fresh range of client ports for every measurement of the module (never a UDP 5-tuple twice)."""

    next_base = BASE_PORT

    @classmethod
    def take(cls) -> int:
        base, cls.next_base = cls.next_base, cls.next_base + FLOWS
        return base


def policy_nexthops(st: LabState) -> set[str]:
    """east's reroute policy toward west (priority 20000), read from the NB with ovn-nbctl."""
    out = nbctl(ovn_dir(st, "east"), "--bare", "--columns=nexthops", "find", "Logical_Router_Policy",
                "priority=20000")  # fmt: skip
    return set(out.split())


def join_ip(st: LabState, gateway: str) -> str:
    slots = ((syncer_status(st, "east") or {}).get("last_sync") or {}).get("slots") or {}
    return Slot(int(slots[gateway])).join_ip


def all_up(lab: LabLayout, st: LabState) -> bool:
    """Every route agent probes every gateway it should and has none down."""
    return all(((agent_status(st, n) or {}).get("health") or {}).get("down") == [] for n in lab.nodes)


def measure(lab: LabLayout, st: LabState, *, fail: bool = False, duration: float = 4.0) -> FailoverResult:
    """Flows from east-w1's pods to every west pod; with ``fail``, east-gw1 loses power a third of the way in."""
    east, west = lab.cluster("east"), lab.cluster("west")
    pairs = make_pairs(east.pods_of("east-w1"), west.pods, FLOWS, Ports.take())
    act = (lambda: failure.fail(st.name, VICTIM)) if fail else (lambda: None)
    return measure_pairs(lab, st, pairs=pairs, event=act, victim=VICTIM, rate=RATE, duration=duration,
                         event_at=min(2.0, duration / 3))  # fmt: skip


def leaving_east(result: FailoverResult, when: str) -> set[str]:
    return {g for f in result.flows for g in getattr(f, when).forward if g in EAST_GATEWAYS}


def test_flows_leave_through_every_gateway_router(lab: tuple[LabLayout, LabState]) -> None:
    """Both of east's gateway routers carry flows out of east, the policy has both join addresses, and every flow
    runs both ways."""
    layout_, st = lab
    poll("every gateway up", lambda: all_up(layout_, st))
    assert policy_nexthops(st) == {join_ip(st, VICTIM), join_ip(st, SURVIVOR)}
    result = measure(layout_, st)
    assert [f.sport for f in result.flows if not (f.before.forward and f.before.back)] == []
    assert leaving_east(result, "before") == EAST_GATEWAYS
    assert [(f.sport, f.lost_tail) for f in result.flows] == [(f.sport, 0) for f in result.flows]
    assert all(f.sent > 0 and f.lost < f.sent for f in result.flows)


def test_a_dead_gateway_moves_only_its_flows_and_recovery_restores_it(lab: tuple[LabLayout, LabState]) -> None:
    """``magw lab fail east-gw1`` mid-stream: the flows that never crossed it lose nothing and keep their gateways;
    the flows that did resume, all through east-gw2 now; east's policy keeps east-gw2's join address only.
    ``magw lab recover``: the policy has both again, and flows leave through both gateways again."""
    layout_, st = lab
    poll("every gateway up", lambda: all_up(layout_, st))
    victim_ip, survivor_ip = join_ip(st, VICTIM), join_ip(st, SURVIVOR)
    try:
        result = measure(layout_, st, fail=True, duration=6.0)
        crossed_forward = [f for f in result.flows if VICTIM in f.before.forward]
        untouched = result.untouched
        assert crossed_forward and untouched  # eight pod pairs over two gateway routers: both kinds exist
        assert not [f for f in untouched if f.lost], result.loss_report(untouched)
        assert [(f.sport, f.before) for f in untouched] == [(f.sport, f.after) for f in untouched]
        assert [(f.sport, f.lost_tail) for f in result.flows] == [(f.sport, 0) for f in result.flows]
        assert [f.sport for f in result.flows if VICTIM in f.after.gateways] == []
        assert {f.sport: sorted(f.after.forward & EAST_GATEWAYS) for f in crossed_forward} == {
            f.sport: [SURVIVOR] for f in crossed_forward
        }
        assert policy_nexthops(st) == {survivor_ip}
    finally:
        failure.recover(st.name, VICTIM)
    poll("east's policy has both join addresses again", lambda: policy_nexthops(st) == {victim_ip, survivor_ip},
         limit=60.0)  # fmt: skip
    poll("every gateway up again", lambda: all_up(layout_, st), limit=60.0)
    again = measure(layout_, st)
    assert leaving_east(again, "before") == EAST_GATEWAYS
    assert [(f.sport, f.lost_tail) for f in again.flows] == [(f.sport, 0) for f in again.flows]
