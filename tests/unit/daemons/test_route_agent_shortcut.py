"""The route agent's failover shortcut: which peers it takes out of the groups, and when it leaves it to the sync.

A worker of the seed (e-w1: local gateways e-gw1 and e-gw2, remote cluster west) with its real probe plan and its
real plan as the known state; the reconciler is a stand-in that applies what ``apply_now`` is given to that state.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from magw.daemons.route_agent.shortcut import FailoverShortcut
from magw.desired.node.planner import plan
from magw.desired.state import DesiredState
from magw.health.monitor import HealthMonitor
from magw.health.params import LivenessParams, ProbeParams
from magw.model import Health, Snapshot
from magw.reconcile.changeset import Op
from magw.reconcile.driver import ApplyResult
from tests.support.planner_seed import seed_east, with_health


@attrs.define
class Reconciler:
    known: DesiredState
    calls: list[tuple[Op, ...]] = attrs.field(factory=list)

    def apply_now(
        self, make: Callable[[DesiredState], tuple[Op, ...]], *, driver: object = None
    ) -> ApplyResult | None:
        ops = make(self.known)
        self.calls.append(ops)
        return ApplyResult(applied=ops) if ops else None


@attrs.define
class Source:
    snapshot: Snapshot


def shortcut(snapshot: Snapshot) -> tuple[FailoverShortcut, Reconciler]:
    monitor = HealthMonitor("e-w1", probe=ProbeParams(), liveness=LivenessParams(), sockets=lambda _i: None)  # type: ignore[arg-type,return-value]
    monitor.update(snapshot)
    rec = Reconciler(known=plan(snapshot, "e-w1"))
    return FailoverShortcut("e-w1", rec, monitor, Source(snapshot)), rec  # type: ignore[arg-type]


def test_a_gateway_that_goes_down_leaves_the_group_as_the_plan_with_it_down_has_it_once() -> None:
    snapshot = seed_east()
    short, rec = shortcut(snapshot)
    short.changed(Health(down={"e-gw1"}, reach={"e-gw2": {"west"}}))
    expected = plan(with_health(snapshot, down=["e-gw1"]), "e-w1").groups
    (ops,) = rec.calls
    assert [op.obj for op in ops] == list(expected)
    assert short.applied == 1
    short.changed(Health(down={"e-gw1"}, reach={"e-gw2": {"west"}}))  # still down: nothing more
    short.changed(Health(down={"e-gw1"}))
    assert len(rec.calls) == 1


def test_a_group_whose_other_gateway_reaches_only_some_clusters_is_left_to_the_plan() -> None:
    """e-gw2 no longer reaches west: e-gw1 going down leaves west with no usable gateway (fail static keeps
    both), so the shortcut must not make the group e-gw2 alone."""
    snapshot = with_health(seed_east(), reach={"e-gw2": []})
    short, rec = shortcut(snapshot)
    short.changed(Health(down={"e-gw1"}, reach={"e-gw2": set()}))
    assert rec.calls == [()]
    assert short.applied == 0


def test_a_health_change_without_a_new_down_peer_asks_nothing() -> None:
    short, rec = shortcut(seed_east())
    short.changed(Health(reach={"e-gw1": {"west"}, "e-gw2": {"west"}}))
    short.changed(Health(down={"nobody-we-probe"}))
    assert rec.calls == []
