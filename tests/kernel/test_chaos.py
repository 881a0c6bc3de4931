"""The chaos test in small (``benchmarks/chaos.py``): killed syncs converge, and its checker can fail.

The full run (20 kills each of ``magw apply`` and ``magw-route-agent`` at 10k routes) is a benchmark;
here 3 kills of each at 2,000 routes, with a fixed seed. The checker reads the namespace with
iproute2, bridge and nft only (``tests/support/kernel_dump.py``) and compares with ``magw plan --format json``:
the second half shows it reports a stale route, nexthop, FDB entry or nft element, a missing route
and a change to foreign state, and that one more ``magw apply`` repairs what is ours.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.bigsnap import snapshot_text
from benchmarks.chaos import BIN, Checker, Deadline, apply_changes, chaos, checker_for, namespace
from tests.support.netns import run

pytestmark = pytest.mark.kernel

SEED = 9


def test_killed_syncs_converge() -> None:
    """3 SIGKILLs of magw apply and 3 of the route agent, each followed by one converging run: all converge."""
    lines: list[str] = []
    outcomes = chaos(routes=2000, remotes=20, trials=3, seed=SEED, timeout=900, which=("apply", "agent"),
                     report=lines.append)  # fmt: skip
    assert [(o.tool, o.exit) for o in outcomes] == [("apply", -9)] * 3 + [("agent", -9)] * 3
    assert [o.problems for o in outcomes] == [()] * 6, "\n".join(lines)
    assert all(o.fixed >= 0 for o in outcomes)


class Node:
    """A namespace synced once by ``magw apply`` to a 200-route plan, with its checker."""

    def __init__(self, ns: str, snapshot: Path, deadline: Deadline) -> None:
        self.ns, self.snapshot, self.deadline = ns, snapshot, deadline
        self.check: Checker = checker_for(ns, snapshot, deadline)

    def apply(self) -> int:
        cmd = [str(BIN / "magw"), "apply", "--snapshot", str(self.snapshot), "--node", "gw1", "--netns", self.ns]
        return apply_changes(subprocess.run(cmd, capture_output=True, text=True, timeout=self.deadline.left()))


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    deadline = Deadline(600)
    with tempfile.TemporaryDirectory() as tmp, namespace(deadline) as ns:
        snapshot = Path(tmp) / "snapshot.yaml"
        snapshot.write_text(snapshot_text(200, 20))
        synced = Node(ns, snapshot, deadline)
        assert synced.apply() > 0
        assert synced.check.problems() == []
        yield synced


INJECTIONS = {
    "stale route": (("ip", "route", "add", "12.0.0.0/24", "via", "192.168.50.2", "table", "100", "proto", "157"),
                    "routes: 1 extra (stale)"),
    "stale nexthop": (("ip", "nexthop", "add", "id", "1629421999", "via", "192.168.50.9", "dev", "fgn0", "proto",
                       "157"), "nexthops: 1 extra (stale)"),
    "stale fdb entry": (("bridge", "fdb", "append", "02:53:f0:10:00:09", "dev", "vx-submariner", "dst", "172.16.0.9",
                         "self", "permanent"), "fdb: 1 extra (stale)"),
    "stale nft element": (("nft", "add element ip magw remote_cidrs { 12.0.0.0/24 }"), "nft: 1 extra (stale)"),
    "missing route": (("ip", "route", "del", "11.0.0.0/24", "table", "100", "proto", "157"), "routes: 1 missing"),
}  # fmt: skip


@pytest.mark.parametrize("what", list(INJECTIONS))
def test_checker_reports_what_is_not_the_plan_and_apply_repairs_it(node: Node, what: str) -> None:
    """One object of ours made stale, missing or wrong is reported by kind; one more apply fixes it."""
    cmd, expected = INJECTIONS[what]
    run(node.ns, *cmd)
    problems = node.check.problems()
    assert [p.split(",")[0] for p in problems] == [expected]
    assert node.apply() > 0
    assert node.check.problems() == []


def test_checker_reports_a_change_to_foreign_state(node: Node) -> None:
    """A foreign route removed, or put back with another metric (also an object that is not in the plan),
    is reported; put back as it was, the check passes again."""
    run(node.ns, "ip", "route", "del", "10.77.0.0/16", "proto", "static")
    assert node.check.problems() == ["foreign state changed"]
    run(node.ns, "ip", "route", "add", "10.77.0.0/16", "via", "192.168.50.2", "proto", "static", "metric", "5")
    problems = node.check.problems()
    assert [p.split(",")[0] for p in problems] == ["routes: 1 extra (stale)", "foreign state changed"]
    run(node.ns, "ip", "route", "del", "10.77.0.0/16", "proto", "static", "metric", "5")
    run(node.ns, "ip", "route", "add", "10.77.0.0/16", "via", "192.168.50.2", "proto", "static")
    assert node.check.problems() == []
