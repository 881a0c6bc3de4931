"""Capability detection, the strategy fallback, and the multipath hash policy."""

from __future__ import annotations

import errno
import os
import struct

import pytest
from structlog.testing import capture_logs

from magw.desired.node.fallback import effective_strategy
from magw.drivers.netlink.capabilities import (
    HASH_POLICY_KEY,
    PROBE_GROUP_ID,
    PROBE_NEXTHOP_ID,
    RTM_GETNEXTHOPBUCKET,
    Capabilities,
    detect,
    inspect_nexthops,
    inspect_with,
    probe_nexthops,
    read_hash_policy,
    set_hash_policy,
)
from magw.drivers.netlink.nexthop import RTM_GETNEXTHOP
from magw.drivers.netlink.rawsock import NetlinkError
from magw.drivers.netns import NETNS_DIR, NoSuchNetns
from magw.model import Strategy
from tests.support.netns import ip_json, run

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


_NOTSUP = errno.errorcode[errno.EOPNOTSUPP]  # ENOTSUP on Linux: the same number


class _Kernel:
    """A stand-in for the netlink socket: answers dumps, refusing the message types in ``refuses``."""

    def __init__(self, refuses: dict[int, int]) -> None:
        self.refuses = refuses
        self.sent: list[int] = []

    def dump(self, msg: bytes) -> list[bytes]:
        kind, flags = struct.unpack_from("=HH", msg, 4)
        self.sent.append(kind)
        assert flags & 0x300 == 0x300, "only dump requests: nothing may be created"
        if kind in self.refuses:
            raise NetlinkError(self.refuses[kind])
        return []


@pytest.mark.parametrize(
    ("refuses", "nexthops", "resilient", "note"),
    [
        ({}, True, True, "dry run: resilient groups inferred from the nexthop bucket dump"),
        ({RTM_GETNEXTHOPBUCKET: errno.EOPNOTSUPP}, True, False, f"dry run: nexthop bucket dump: {_NOTSUP}"),
        ({RTM_GETNEXTHOP: errno.EOPNOTSUPP}, False, False, f"dry run: nexthop dump: {_NOTSUP}"),
        ({RTM_GETNEXTHOP: errno.EINVAL}, False, False, "dry run: nexthop dump: EINVAL"),
    ],
)
def test_read_only_detection_reads_the_kernels_answers_to_dumps(
    refuses: dict[int, int], nexthops: bool, resilient: bool, note: str
) -> None:
    """Without creating anything: a kernel that refuses the nexthop dump has no nexthop objects; one that
    refuses the bucket dump (older than 5.13) has no resilient groups; the single note says what was inferred."""
    kernel = _Kernel(refuses)
    result = inspect_with(kernel)
    assert (result.nexthops, result.resilient) == (nexthops, resilient)
    assert len(result.notes) == 1 and result.notes[0].startswith(note)
    assert set(kernel.sent) <= {RTM_GETNEXTHOP, RTM_GETNEXTHOPBUCKET}


def test_read_only_detection_does_not_hide_other_errors() -> None:
    """An error that does not mean "unknown request" (here EPERM) is raised, not read as "unsupported"."""
    with pytest.raises(NetlinkError, match="EPERM"):
        inspect_with(_Kernel({RTM_GETNEXTHOP: errno.EPERM}))


@pytest.mark.kernel
def test_read_only_detection_on_the_kernel(ns: str) -> None:
    """Kernel 6.18 answers both dumps: nexthops and resilient groups, with the dry-run note; also when a
    resilient group exists (its buckets are dumped), and the existing objects are left as they are."""
    fresh = inspect_nexthops(ns)
    assert (fresh.nexthops, fresh.resilient) == (True, True)
    assert fresh.notes == (
        f"dry run: resilient groups inferred from the nexthop bucket dump (kernel {os.uname().release}),"
        " not probed by creating one",
    )
    assert ip_json(ns, "nexthop", "show") == []
    run(ns, "ip", "nexthop", "add", "id", "7", "blackhole")
    run(ns, "ip", "nexthop", "add", "id", "8", "group", "7", "type", "resilient", "buckets", "16")
    before = ip_json(ns, "-d", "nexthop", "show")
    assert inspect_nexthops(ns) == fresh
    assert ip_json(ns, "-d", "nexthop", "show") == before


@pytest.mark.kernel
def test_detect_read_only_plans_like_the_probe(ns: str) -> None:
    """detect(read_only=True) finds the same capabilities as the probing detect, only with the note."""
    probed, inferred = detect(ns), detect(ns, read_only=True)
    assert (inferred.nexthops, inferred.resilient) == (probed.nexthops, probed.resilient)
    assert inferred.strategy(R) is probed.strategy(R) is R
