"""The reconciler test harness: a fake node driver that can fail, a fake clock, a settable desired state.

Shared by tests/unit/reconcile/test_reconcile_loop.py and tests/unit/reconcile/test_reconcile_audit.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any

import attrs
from prometheus_client import CollectorRegistry

from magw.desired.node.ids import nexthop_id
from magw.desired.state import Address, DesiredState, Link, Nexthop, Route
from magw.drivers.fake_node import fake_node_driver
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.drivers.node import NodeDriver
from magw.reconcile.changeset import ChangeSet, Op
from magw.reconcile.clock import FakeClock
from magw.reconcile.driver import ApplyResult, Failure
from magw.reconcile.loop import Reconciler, SyncResult

A = IPv4Address
N = IPv4Network

LINK = Link(name="vx-submariner", vni=100, port=4800, mtu=1450, mac="02:53:f0:12:00:03", local=A("172.18.0.3"))
ADDR = Address(dev="vx-submariner", address=IPv4Interface("240.18.0.3/8"))
NH = Nexthop(id=nexthop_id(A("240.18.0.6"), inter_cluster=False), via=A("240.18.0.6"), dev="vx-submariner")
SETTLE = 0.01
RESYNC = 60.0


def route(dst: str, src: str = "10.1.3.1") -> Route:
    return Route(table=254, dst=N(dst), metric=100, src=A(src), nhid=NH.id)


R1 = route("10.2.0.0/16")
R2 = route("100.2.0.0/16")
STALE = route("10.9.0.0/16")
BASE = DesiredState(links=[LINK], addresses=[ADDR], nexthops=[NH], routes=[R1, R2])


@attrs.define
class FlakyDriver:
    """The fake node driver, except that ops matching ``fails`` fail with ENOBUFS and never reach it."""

    inner: NodeDriver
    fails: Callable[[Op], bool] = lambda op: False
    broken: str | None = None
    applied_batches: list[ChangeSet] = attrs.field(factory=list)
    observes: int = 0

    def observe(self) -> DesiredState:
        self.observes += 1
        if self.broken is not None:
            raise RuntimeError(self.broken)
        return self.inner.observe()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        self.applied_batches.append(changes)
        bad = tuple(op for op in changes.ops if self.fails(op))
        good = ChangeSet(ops=tuple(op for op in changes.ops if not self.fails(op)), nft=changes.nft)
        result = self.inner.apply(good)
        failures = tuple(Failure(op=op, error="ENOBUFS: No buffer space available") for op in bad)
        return ApplyResult(applied=result.applied, failed=(*result.failed, *failures))

    def sent(self, obj: object) -> int:
        """How many times an op for ``obj`` was handed to the driver."""
        return sum(1 for batch in self.applied_batches for op in batch.ops if op.obj == obj)


def netlink_of(driver: FlakyDriver) -> FakeNetlink:
    fake = driver.inner.netlink
    assert isinstance(fake, FakeNetlink)
    return fake


@attrs.define
class Harness:
    """A reconciler under test: a settable desired state, a fake clock, a private metrics registry."""

    driver: FlakyDriver
    desired: DesiredState | None = BASE
    synced: bool = True
    clock: FakeClock = attrs.field(factory=FakeClock)
    registry: CollectorRegistry = attrs.field(factory=CollectorRegistry)
    results: list[SyncResult] = attrs.field(factory=list)
    rec: Reconciler = attrs.field(init=False)
    task: asyncio.Task[None] | None = None
    audit: Callable[[], DesiredState] | None = None  # the Reconciler's ``audit``: an observe on a second driver

    def __attrs_post_init__(self) -> None:
        self.rec = Reconciler(
            self.driver,
            lambda: self.desired,
            resync_period=RESYNC,
            name="t",
            registry=self.registry,
            backoff_base=1.0,
            backoff_cap=4.0,
            settle=SETTLE,
            clock=self.clock,
            inputs_synced=lambda: self.synced,
            on_sync=self.results.append,
            audit=self.audit,
        )

    async def start(self) -> None:
        self.task = asyncio.create_task(self.rec.run())
        await self.until(lambda: len(self.results) == 1)

    async def until(self, predicate: Callable[[], bool], *, limit: int = 5000) -> None:
        """Let the loop run (ending each settle delay on the fake clock) until ``predicate`` holds.

        Bounded by a number of event-loop turns: a safety net, not a speed assertion.
        """
        for _ in range(limit):
            if predicate():
                return
            if self.rec.phase == "settling":
                self.clock.advance(SETTLE)
            # A sync waits for its worker thread (planner, diff, driver), an audit for its own: give them time rather
            # than spin (spinning, a loaded machine ran out of turns before an audit's thread was scheduled).
            audit = self.rec._audit
            waiting = self.rec.phase == "syncing" or (audit is not None and audit.busy)
            await asyncio.sleep(0.001 if waiting else 0)
        raise AssertionError("condition not reached within the safety limit")

    async def idle(self) -> None:
        """Wait until the loop waits for work (nothing dirty, nothing settling)."""
        await self.until(lambda: self.rec.phase == "idle" and self.clock.waiting == 1)

    async def stop(self) -> None:
        self.rec.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, {"reconciler": "t", **labels})


def fresh_driver(**kwargs: Any) -> FlakyDriver:
    return FlakyDriver(inner=fake_node_driver(netlink=FakeNetlink(check_prefsrc=False)), **kwargs)


def sync_events(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "reconciler.sync_done"]
