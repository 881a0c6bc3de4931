"""Capability detection, the strategy fallback, and the multipath hash policy."""

from __future__ import annotations

import os

import pytest
from structlog.testing import capture_logs

from magw.desired.fallback import effective_strategy
from magw.drivers.netlink.capabilities import (
    HASH_POLICY_KEY,
    PROBE_GROUP_ID,
    PROBE_NEXTHOP_ID,
    Capabilities,
    detect,
    probe_nexthops,
    read_hash_policy,
    set_hash_policy,
)
from magw.drivers.netlink.session import NETNS_DIR, NoSuchNetns
from magw.model import Strategy
from tests.netns import ip_json, run

R, G, M = Strategy.RESILIENT, Strategy.GROUP, Strategy.MULTIPATH


@pytest.mark.parametrize(
    ("requested", "nexthops", "resilient", "expected"),
    [
        (R, True, True, R),
        (R, True, False, G),
        (R, False, False, M),
        (R, False, True, M),  # resilient without nexthop objects cannot happen; still no objects
        (G, True, True, G),  # never upgraded
        (G, True, False, G),
        (G, False, False, M),
        (M, True, True, M),
        (M, False, False, M),
    ],
)
def test_effective_strategy_falls_back_resilient_group_multipath(
    requested: Strategy, nexthops: bool, resilient: bool, expected: Strategy
) -> None:
    """The chosen strategy is the best one not above the requested one that the kernel supports."""
    assert effective_strategy(requested, nexthops=nexthops, resilient=resilient) is expected


def _caps(*, nexthops: bool, resilient: bool) -> Capabilities:
    return Capabilities(
        kernel="5.10.0", nexthops=nexthops, resilient=resilient, iproute2="6.1.0", nft="1.0.6", multipath_hash_policy=0
    )


def test_strategy_fallback_is_logged_with_both_strategies() -> None:
    """A fallback logs capabilities.strategy_fallback naming what was asked and what is used."""
    with capture_logs() as logs:
        chosen = _caps(nexthops=True, resilient=False).strategy(R)
    assert chosen is G
    events = [e for e in logs if e["event"] == "capabilities.strategy_fallback"]
    assert [(e["requested"], e["effective"]) for e in events] == [("resilient", "group")]


def test_no_fallback_logs_nothing() -> None:
    """When the kernel supports the requested strategy, no fallback event is logged."""
    with capture_logs() as logs:
        chosen = _caps(nexthops=True, resilient=True).strategy(R)
    assert chosen is R
    assert [e["event"] for e in logs if e["event"] == "capabilities.strategy_fallback"] == []


def test_capabilities_json_names_every_field() -> None:
    """The JSON form (magw diagnose kernel --json) has one key per capability and the resulting strategy."""
    doc = _caps(nexthops=False, resilient=False).to_json()
    assert doc == {
        "kernel": "5.10.0",
        "nexthop_objects": False,
        "resilient_groups": False,
        "iproute2": "6.1.0",
        "nft": "1.0.6",
        "fib_multipath_hash_policy": 0,
        "strategy": "multipath",
        "notes": [],
    }


@pytest.mark.kernel
def test_probe_finds_nexthops_and_resilient_and_leaves_nothing(ns: str) -> None:
    """Kernel 6.18 has nexthop objects and resilient groups; the probe's throwaway objects are gone afterwards."""
    result = probe_nexthops(ns)
    assert (result.nexthops, result.resilient, result.notes) == (True, True, ())
    assert ip_json(ns, "nexthop", "show") == []


@pytest.mark.kernel
def test_probe_never_deletes_an_object_already_at_the_probe_ids(ns: str) -> None:
    """An object that already sits at a probe id survives detection (the probe creates with EXCL)."""
    run(ns, "ip", "nexthop", "add", "id", str(PROBE_NEXTHOP_ID), "blackhole")
    run(ns, "ip", "nexthop", "add", "id", str(PROBE_GROUP_ID), "group", str(PROBE_NEXTHOP_ID))
    result = probe_nexthops(ns)
    assert (result.nexthops, result.resilient) == (True, True)
    ids = sorted(nh["id"] for nh in ip_json(ns, "nexthop", "show"))
    assert ids == [PROBE_GROUP_ID, PROBE_NEXTHOP_ID]


@pytest.mark.kernel
def test_probe_with_lo_down_says_it_guessed(ns: str) -> None:
    """With lo down a blackhole cannot be created: nexthops are still detected and a note explains the guess."""
    run(ns, "ip", "link", "set", "lo", "down")
    result = probe_nexthops(ns)
    assert result.nexthops is True
    assert len(result.notes) == 1
    assert result.notes[0].startswith("lo is down: resilient groups not probed")
    assert ip_json(ns, "nexthop", "show") == []


@pytest.mark.kernel
def test_detect_reports_tools_and_hash_policy(ns: str) -> None:
    """detect() reads the kernel release, tool versions and the namespace's hash policy (0 in a fresh one)."""
    caps = detect(ns)
    assert caps.kernel == os.uname().release
    assert (caps.nexthops, caps.resilient, caps.multipath_hash_policy) == (True, True, 0)
    ip_version = run(ns, "ip", "-V").stdout
    assert caps.iproute2 is not None and f"iproute2-{caps.iproute2}" in ip_version
    assert caps.nft is not None and f"v{caps.nft}" in run(ns, "nft", "--version").stdout


@pytest.mark.kernel
def test_set_hash_policy_changes_only_the_namespace(ns: str) -> None:
    """The hash policy is set to 1 inside the namespace (checked with cat in it); the host's value is unchanged."""
    host_path = "/proc/sys/" + HASH_POLICY_KEY.replace(".", "/")
    with open(host_path) as f:
        host_before = f.read().strip()
    set_hash_policy(ns, 1)
    assert run(ns, "cat", host_path).stdout.strip() == "1"
    assert read_hash_policy(ns) == 1
    with open(host_path) as f:
        assert f.read().strip() == host_before


@pytest.mark.kernel
def test_missing_namespace_is_an_error_and_is_not_created() -> None:
    """Detection in a namespace that does not exist raises NoSuchNetns and creates nothing."""
    name = "magwt-missing-d2cap"
    with pytest.raises(NoSuchNetns, match="no such network namespace: magwt-missing-d2cap"):
        detect(name)
    assert not os.path.exists(os.path.join(NETNS_DIR, name))
