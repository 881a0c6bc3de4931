"""What the kernel and tools of a node support, detected inside its network namespace.

Nexthop objects and resilient groups are probed, not guessed from the kernel
version: a throwaway blackhole nexthop and a resilient group holding it are
created with ids at the top of our range (``PROBE_NEXTHOP_ID``,
``PROBE_GROUP_ID``), then deleted in ``finally``. The probe uses NLM_F_EXCL and
deletes only what it created, so an object already at those ids is never touched.

A dry run (``magw apply --dry-run``) must change nothing, not even for an
instant, so ``detect(netns, read_only=True)`` only reads: an RTM_GETNEXTHOP dump
tells whether nexthop objects exist (a kernel without them answers EOPNOTSUPP,
the answer to any message type it does not know), and an RTM_GETNEXTHOPBUCKET
dump whether resilient groups do (that message came with them, in Linux 5.13).
Nothing is created, so resilient groups are inferred, not proven; the result
carries a note saying so, which the dry run prints.

Also here: the multipath hash policy. Linux hashes multipath on L3 only by
default (policy 0), so every flow between two pods takes the same gateway; we set
``net.ipv4.fib_multipath_hash_policy=1`` (L4) in the namespace we manage and read
it back. Never the host's own: the CLI passes ``--netns`` and tests always name a
throwaway namespace.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import subprocess
from typing import Any, Protocol

import attrs
import structlog

from magw.desired.node.fallback import effective_strategy
from magw.desired.node.ids import NEXTHOP_ID_MAX
from magw.drivers.netlink.nexthop import (
    NHMSG,
    GroupSpec,
    NexthopSpec,
    encode_delete,
    encode_dump,
    encode_group,
    encode_nexthop,
)
from magw.drivers.netlink.nlattr import NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, message
from magw.drivers.netlink.rawsock import NetlinkError, RawNetlink
from magw.drivers.netlink.session import errno_name
from magw.drivers.netlink.sysctl import read_sysctl, write_sysctl
from magw.drivers.netns import check_netns
from magw.model import Strategy

log = structlog.get_logger(__name__)

PROBE_NEXTHOP_ID = NEXTHOP_ID_MAX
PROBE_GROUP_ID = NEXTHOP_ID_MAX - 1
HASH_POLICY_KEY = "net.ipv4.fib_multipath_hash_policy"
NEXTHOP_COMPAT_KEY = "net.ipv4.nexthop_compat_mode"
HASH_POLICY_L4 = 1

_CREATE_EXCL = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
_EEXIST = 17
_ENETDOWN = 100
_RESILIENT_SINCE = (5, 13)
# Answers of a kernel that does not know a message type (EOPNOTSUPP) or its body (EINVAL).
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.EINVAL)
RTM_GETNEXTHOPBUCKET = 118


@attrs.frozen(kw_only=True)
class Capabilities:
    """What one namespace's kernel (and the host's tools) support. ``notes`` explain any guess."""

    kernel: str
    nexthops: bool
    resilient: bool
    iproute2: str | None
    nft: str | None
    multipath_hash_policy: int | None
    notes: tuple[str, ...] = ()

    def strategy(self, requested: Strategy) -> Strategy:
        """The strategy to plan with; logs ``capabilities.strategy_fallback`` when it is not ``requested``."""
        chosen = effective_strategy(requested, nexthops=self.nexthops, resilient=self.resilient)
        if chosen is not requested:
            log.warning(
                "capabilities.strategy_fallback",
                requested=requested.value,
                effective=chosen.value,
                nexthops=self.nexthops,
                resilient=self.resilient,
                kernel=self.kernel,
            )
        return chosen

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "nexthop_objects": self.nexthops,
            "resilient_groups": self.resilient,
            "iproute2": self.iproute2,
            "nft": self.nft,
            "fib_multipath_hash_policy": self.multipath_hash_policy,
            "strategy": effective_strategy(Strategy.RESILIENT, nexthops=self.nexthops, resilient=self.resilient).value,
            "notes": list(self.notes),
        }


def _version(cmd: list[str], pattern: str) -> str | None:
    """The version a tool prints (``ip -V``, ``nft --version``), None when it is missing or says nothing usable."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out.stdout + out.stderr)
    return match.group(1) if match else None


def iproute2_version() -> str | None:
    return _version(["ip", "-V"], r"iproute2-v?([0-9][0-9.]*)")


def nft_version() -> str | None:
    return _version(["nft", "--version"], r"v([0-9][0-9.]*)")


def kernel_release() -> str:
    return os.uname().release


def _release_at_least(release: str, wanted: tuple[int, int]) -> bool:
    match = re.match(r"(\d+)\.(\d+)", release)
    return match is not None and (int(match.group(1)), int(match.group(2))) >= wanted


@attrs.frozen(kw_only=True)
class CapabilityProbeResult:
    nexthops: bool
    resilient: bool
    notes: tuple[str, ...] = ()


def _probe(sock: RawNetlink, created: list[int]) -> CapabilityProbeResult:
    blackhole = NexthopSpec(id=PROBE_NEXTHOP_ID, family=socket.AF_INET, blackhole=True)
    err = sock.transact([encode_nexthop(blackhole, flags=_CREATE_EXCL)])[0]
    if err == 0:
        created.append(PROBE_NEXTHOP_ID)
    elif err == _ENETDOWN:
        # kernel 6.18: a blackhole nexthop needs `lo` up ("Device for nexthop is not up"). The request was
        # understood, so nexthop objects exist; resilient groups cannot be probed without a member.
        resilient = _release_at_least(kernel_release(), _RESILIENT_SINCE)
        note = f"lo is down: resilient groups not probed, assumed {resilient} from kernel {kernel_release()}"
        return CapabilityProbeResult(nexthops=True, resilient=resilient, notes=(note,))
    elif err != _EEXIST:
        return CapabilityProbeResult(nexthops=False, resilient=False, notes=(f"nexthop probe: {errno_name(err)}",))
    group = GroupSpec(id=PROBE_GROUP_ID, members=((PROBE_NEXTHOP_ID, 1),), resilient=True, buckets=8)
    err = sock.transact([encode_group(group, flags=_CREATE_EXCL)])[0]
    if err == 0:
        created.append(PROBE_GROUP_ID)
    # EEXIST comes after the kernel validated the request: the group type is known.
    notes = () if err in (0, _EEXIST) else (f"resilient group probe: {errno_name(err)}",)
    return CapabilityProbeResult(nexthops=True, resilient=err in (0, _EEXIST), notes=notes)


def probe_nexthops(netns: str | None) -> CapabilityProbeResult:
    """Create and delete throwaway nexthop objects in ``netns`` to learn what the kernel supports."""
    check_netns(netns)
    with RawNetlink(netns) as sock:
        created: list[int] = []
        try:
            return _probe(sock, created)
        finally:
            if created:
                sock.transact([encode_delete(nh_id) for nh_id in reversed(created)])


class Dumper(Protocol):
    """What read-only detection needs of a netlink socket (``RawNetlink``): one dump request."""

    def dump(self, msg: bytes) -> list[bytes]: ...


def encode_bucket_dump() -> bytes:
    """An RTM_GETNEXTHOPBUCKET dump of every resilient group's buckets (read-only)."""
    return message(RTM_GETNEXTHOPBUCKET, NLM_F_REQUEST | NLM_F_DUMP, NHMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0), 0)


def _refusal(sock: Dumper, request: bytes) -> str | None:
    """None when the kernel answers the dump ``request``; the errno name when it does not know it."""
    try:
        sock.dump(request)
    except NetlinkError as exc:
        if exc.errno in _UNSUPPORTED:
            return errno_name(exc.errno)
        raise
    return None


def inspect_with(sock: Dumper) -> CapabilityProbeResult:
    """Nexthop and resilient-group support from the kernel's answers to two dumps; the note says it was inferred."""
    refused = _refusal(sock, encode_dump())
    if refused:
        note = f"dry run: nexthop dump: {refused}, not probed"
        return CapabilityProbeResult(nexthops=False, resilient=False, notes=(note,))
    refused = _refusal(sock, encode_bucket_dump())
    if refused:
        note = f"dry run: nexthop bucket dump: {refused}, so no resilient groups assumed, not probed"
        return CapabilityProbeResult(nexthops=True, resilient=False, notes=(note,))
    note = (
        f"dry run: resilient groups inferred from the nexthop bucket dump (kernel {kernel_release()}),"
        " not probed by creating one"
    )
    return CapabilityProbeResult(nexthops=True, resilient=True, notes=(note,))


def inspect_nexthops(netns: str | None) -> CapabilityProbeResult:
    """What ``probe_nexthops`` learns, from two read-only dumps in ``netns``: nothing is created."""
    check_netns(netns)
    with RawNetlink(netns) as sock:
        return inspect_with(sock)


def read_hash_policy(netns: str | None) -> int | None:
    return _read_int(netns, HASH_POLICY_KEY)


def _read_int(netns: str | None, key: str) -> int | None:
    """The integer value of sysctl ``key`` in ``netns``; None when it cannot be read."""
    try:
        return int(read_sysctl(netns, key))
    except (OSError, ValueError):
        return None


def set_hash_policy(netns: str | None, policy: int = HASH_POLICY_L4) -> None:
    """Set the IPv4 multipath hash policy in ``netns`` and verify it; RuntimeError when it does not stick."""
    _set_checked(netns, HASH_POLICY_KEY, policy, "capabilities.hash_policy_set")


def set_nexthop_compat_mode(netns: str | None, mode: int = 0) -> None:
    """Set ``net.ipv4.nexthop_compat_mode`` in ``netns`` and verify it; RuntimeError when it does not stick.

    With 0 the kernel no longer expands routes that use nexthop objects in dumps and notifications, and a
    nexthop or group change no longer sends a notification per route that uses it: a resilient group replace
    under 100k routes took the kernel 115-180 ms with 1 and 3-4 ms with 0 (docs/performance.md, rows 18d-18e). Routes
    without nexthop objects (everything not magw's) are dumped as before; magw's own show only ``nhid``."""
    _set_checked(netns, NEXTHOP_COMPAT_KEY, mode, "capabilities.nexthop_compat_mode_set")


def _set_checked(netns: str | None, key: str, value: int, event: str) -> None:
    if _read_int(netns, key) != value:
        write_sysctl(netns, key, str(value))
        log.info(event, netns=netns, key=key, value=value)
    got = _read_int(netns, key)
    if got != value:
        raise RuntimeError(f"{key}: set to {value} but reads back {got}")


def detect(netns: str | None, *, read_only: bool = False) -> Capabilities:
    """Every capability we plan around, for ``netns`` (None: the current namespace).

    ``read_only``: learn nexthop support from dumps only (``inspect_nexthops``), for a dry run.
    """
    probe = inspect_nexthops(netns) if read_only else probe_nexthops(netns)
    caps = Capabilities(
        kernel=kernel_release(),
        nexthops=probe.nexthops,
        resilient=probe.resilient,
        iproute2=iproute2_version(),
        nft=nft_version(),
        multipath_hash_policy=read_hash_policy(netns),
        notes=probe.notes,
    )
    log.debug("capabilities.detected", netns=netns, **caps.to_json())
    return caps
