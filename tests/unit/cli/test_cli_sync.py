"""The command line's sync (magw.cli.sync) on the fake node: one line per change, failures, summary."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs
import pytest

import magw.cli.sync
from magw.cli.sync import change_text, recreated, sync
from magw.desired.nft.values import NftTable
from magw.desired.node.planner import plan
from magw.desired.render import object_line
from magw.desired.state import MAIN_TABLE, DesiredState, NexthopGroup, Route, RouteNexthop
from magw.drivers.fake_node import fake_node_driver
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.drivers.node import NodeDriver
from magw.reconcile.changeset import ChangeSet, NftChange, Op
from magw.reconcile.diff import diff
from magw.reconcile.diff import diff_ops as diff_ops_of_reconcile
from magw.reconcile.driver import ApplyResult
from tests.support.planner_seed import seed_east

NO_GW = IPv4Address("172.18.0.9")


def _worker_node() -> tuple[FakeNetlink, DesiredState]:
    netlink = FakeNetlink()
    netlink.add_foreign_address("cni0", IPv4Interface("10.1.3.1/24"))
    return netlink, plan(seed_east(), "e-w1")


def test_sync_prints_each_change_then_no_changes() -> None:
    """A first sync prints every change in ip/bridge style and a summary; a second prints only "no changes"."""
    netlink, desired = _worker_node()
    driver = fake_node_driver(netlink=netlink)
    out = io.StringIO()
    report = sync(driver, desired, dry_run=False, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "create link vx-submariner type vxlan id 100 dstport 4800 nolearning local 172.18.0.3 mtu 1450"
        " address 02:53:f0:12:00:03 up"
    )
    assert lines[-2:] == ["replace nft table ip magw", "12 changes applied, 0 failed"]
    assert (len(report.changes), report.result.failed) == (12, ())
    again = io.StringIO()
    sync(driver, desired, dry_run=False, out=again)
    assert again.getvalue() == "no changes\n"


def test_dry_run_applies_nothing() -> None:
    """--dry-run prints the same changes and leaves the node as it was."""
    netlink, desired = _worker_node()
    driver = fake_node_driver(netlink=netlink)
    out = io.StringIO()
    report = sync(driver, desired, dry_run=True, out=out)
    assert out.getvalue().splitlines()[-1] == "12 changes (dry run: nothing applied)"
    assert report.result.applied == ()
    assert driver.observe() == DesiredState()


def test_failures_are_one_line_each() -> None:
    """Without the CNI address the routes' src is refused: one "failed:" line per route, and the summary counts them."""
    desired = plan(seed_east(), "e-w1")
    driver = fake_node_driver()
    out = io.StringIO()
    report = sync(driver, desired, dry_run=False, out=out)
    failed = [line for line in out.getvalue().splitlines() if line.startswith("failed: ")]
    assert [line.split(": ")[1] for line in failed] == [
        "create route 10.2.0.0/16 table main nhid 1677721597 src 10.1.3.1 metric 100",
        "create route 100.2.0.0/16 table main nhid 1677721597 src 10.1.3.1 metric 100",
    ]
    assert [line.split(": ")[2] for line in failed] == ["EINVAL", "EINVAL"]
    assert out.getvalue().splitlines()[-1] == "10 changes applied, 2 failed"
    assert len(report.result.failed) == 2


class _CountingDriver:
    """A Driver that counts ``observe`` calls (the passes a sync made)."""

    def __init__(self, driver: NodeDriver) -> None:
        self.driver = driver
        self.observes = 0

    def observe(self) -> DesiredState:
        self.observes += 1
        return self.driver.observe()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        return self.driver.apply(changes)


def test_second_pass_only_after_a_re_creation() -> None:
    """An ordinary sync observes once; one that re-creates a link (VNI change) observes again and then converges."""
    netlink, desired = _worker_node()
    counting = _CountingDriver(fake_node_driver(netlink=netlink))
    sync(counting, desired, dry_run=False, out=io.StringIO())
    assert counting.observes == 1
    link = desired.links[0]
    moved = attrs.evolve(desired, links=(attrs.evolve(link, vni=link.vni + 1), *desired.links[1:]))
    counting.observes = 0
    out = io.StringIO()
    report = sync(counting, moved, dry_run=False, out=out)
    assert counting.observes == 2
    assert f"delete link {link.name}" in {" ".join(line.split()[:3]) for line in out.getvalue().splitlines()}
    assert report.result.failed == ()
    assert counting.driver.observe() == moved


def test_recreated_needs_the_same_object_deleted_and_created() -> None:
    """Only a delete and a create of one object (nexthop/group ids shared) count as a re-creation, not a replace."""
    _, desired = _worker_node()
    link, nexthop = desired.links[0], desired.nexthops[0]
    group = NexthopGroup(id=nexthop.id, members=())
    assert not recreated([Op(verb="replace", kind="links", obj=link), Op(verb="create", kind="links", obj=link)])
    assert recreated([Op(verb="delete", kind="links", obj=link), Op(verb="create", kind="links", obj=link)])
    assert recreated([Op(verb="delete", kind="groups", obj=group), Op(verb="create", kind="nexthops", obj=nexthop)])
    assert not recreated([Op(verb="delete", kind="links", obj=link), Op(verb="create", kind="nexthops", obj=nexthop)])


@pytest.mark.parametrize("table", [MAIN_TABLE, 100, 1000])
@pytest.mark.parametrize("src", [None, IPv4Address("10.1.3.1")])
@pytest.mark.parametrize("dst", ["0.0.0.0/0", "11.0.0.0/24", "100.2.0.0/16", "10.9.9.9/32"])
def test_route_change_lines_read_as_magw_plan_renders_them(table: int, src: IPv4Address | None, dst: str) -> None:
    """The shortcut for routes via nhid prints exactly render.object_line's text, in every table, with or
    without src; an inline route and an unreachable one keep the general text."""
    routes = [
        Route(table=table, dst=IPv4Network(dst), metric=100, src=src, nhid=1677721597),
        Route(
            table=table, dst=IPv4Network(dst), metric=5, src=src, nexthops=(RouteNexthop(via=src or NO_GW, dev="x"),)
        ),
        Route(table=table, dst=IPv4Network(dst), metric=7, type="unreachable"),
    ]
    for route in routes:
        op = Op(verb="create", kind="routes", obj=route)
        assert change_text(op) == f"create {object_line('routes', route)}"


class _SlowNft:
    """The nft half of a NodeDriver that records when it ran (the printing waits, bounded, to see it start)."""

    tables: tuple[tuple[str, str], ...] = (("ip", "magw"),)

    def __init__(self) -> None:
        self.started = threading.Event()

    def observe_all(self) -> tuple[NftTable, ...]:
        return ()

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
        self.started.set()
        return ApplyResult(applied=tuple(changes))


class _Out(io.StringIO):
    """stdout that notes, per write, whether the nft half had started; it can also fail like a closed pipe."""

    def __init__(self, nft: _SlowNft, *, broken: bool = False) -> None:
        super().__init__()
        self.nft = nft
        self.broken = broken
        self.nft_running: list[bool] = []

    def write(self, text: str) -> int:
        self.nft_running.append(self.nft.started.wait(timeout=5))
        if self.broken:
            raise BrokenPipeError("stdout closed")
        return super().write(text)


def test_the_nft_half_starts_before_the_change_lines_are_printed() -> None:
    """``magw apply`` prints its change lines while the nft transaction already runs (docs/performance.md: libnftables'
    second at 100k elements overlaps the printing); the lines and the result are as before."""
    netlink, desired = _worker_node()
    nft = _SlowNft()
    out = _Out(nft)
    report = sync(NodeDriver(netlink=netlink, nft=nft), desired, dry_run=False, out=out)
    assert out.nft_running[0] is True
    assert out.getvalue().splitlines()[-2:] == ["replace nft table ip magw", "12 changes applied, 0 failed"]
    assert report.result.failed == ()


def test_a_failed_print_still_finishes_the_apply() -> None:
    """When printing the lines fails (stdout closed), the apply that already started is carried out to its end
    (nothing half-applied, no transaction left running) and the error reaches the caller."""
    netlink, desired = _worker_node()
    nft = _SlowNft()
    driver = NodeDriver(netlink=netlink, nft=nft)
    with pytest.raises(BrokenPipeError):
        sync(driver, desired, dry_run=False, out=_Out(nft, broken=True))
    assert nft.started.is_set()
    observed = driver.observe()
    assert (observed.links, observed.routes) == (desired.links, desired.routes)


def test_the_nft_half_starts_before_the_netlink_ops_are_diffed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nft changes are diffed first and started at once, so the nft transaction also overlaps the netlink diff
    (docs/performance.md: 0.3 s at 100k routes); the ops diffed afterwards are the same as ``diff``'s."""
    netlink, desired = _worker_node()
    nft = _SlowNft()
    seen: list[bool] = []

    def diff_ops(want: DesiredState, have: DesiredState) -> tuple[Op, ...]:
        seen.append(nft.started.wait(timeout=5))
        return diff_ops_of_reconcile(want, have)

    monkeypatch.setattr(magw.cli.sync, "diff_ops", diff_ops)
    driver = NodeDriver(netlink=netlink, nft=nft)
    expected = diff(desired, driver.observe())
    report = sync(driver, desired, dry_run=False, out=io.StringIO())
    assert seen == [True]
    assert report.changes == (*expected.ops, *expected.nft)
    assert (report.result.applied, report.result.failed) == ((*expected.ops, *expected.nft), ())


def test_a_failed_netlink_diff_still_finishes_the_nft_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error after the nft apply started (here in the netlink diff) reaches the caller only once the nft
    transaction has ended: nothing is left running."""
    netlink, desired = _worker_node()
    finished = threading.Event()

    class _EndingNft(_SlowNft):
        def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
            result = super().apply(changes)
            time.sleep(0.2)  # a sync that did not wait for it would be past its assertion by now
            finished.set()
            return result

    def broken(want: DesiredState, have: DesiredState) -> tuple[Op, ...]:
        raise RuntimeError("diff bug")

    monkeypatch.setattr(magw.cli.sync, "diff_ops", broken)
    with pytest.raises(RuntimeError, match="diff bug"):
        sync(NodeDriver(netlink=netlink, nft=_EndingNft()), desired, dry_run=False, out=io.StringIO())
    assert finished.is_set()


def test_only_nft_changes_are_applied_and_printed() -> None:
    """A pass with nft changes and no netlink op (our table dropped behind our back): one line, applied."""
    netlink, desired = _worker_node()
    driver = fake_node_driver(netlink)
    sync(driver, desired, dry_run=False, out=io.StringIO())
    driver.nft.apply([NftChange(family="ip", name="magw", table=None)])
    out = io.StringIO()
    report = sync(driver, desired, dry_run=False, out=out)
    assert out.getvalue().splitlines() == ["replace nft table ip magw", "1 changes applied, 0 failed"]
    assert driver.observe().nft == desired.nft and report.result.failed == ()
