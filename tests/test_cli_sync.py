"""The command line's sync (magw.cli.sync) on the fake node: one line per change, failures, summary."""

from __future__ import annotations

import io
from ipaddress import IPv4Interface

from magw.cli.sync import sync
from magw.desired.planner import plan
from magw.desired.state import DesiredState
from magw.drivers.fake import fake_node_driver
from magw.drivers.fake_netlink import FakeNetlink
from tests.planner_seed import seed_east


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
        "create route 10.2.0.0/16 table main nhid 1674236386 src 10.1.3.1 metric 100",
        "create route 100.2.0.0/16 table main nhid 1674236386 src 10.1.3.1 metric 100",
    ]
    assert [line.split(": ")[2] for line in failed] == ["EINVAL", "EINVAL"]
    assert out.getvalue().splitlines()[-1] == "10 changes applied, 2 failed"
    assert len(report.result.failed) == 2
