"""ICMP echo over ping sockets (``SOCK_DGRAM``/``IPPROTO_ICMP``): one socket per echo id.

A ping socket's bound "port" is the echo id of every request it sends, and the
kernel delivers to it only the echo replies carrying that id. So a prober
reads exactly its own replies, whatever else the node receives: on a gateway
answering thousands of workers, no probe of theirs ever reaches Python.

Ping sockets need the caller's group in ``net.ipv4.ping_group_range`` (per
network namespace; the default "1 0" allows nobody, even root):
``enable_ping_sockets`` widens it in the node's namespace. In the current
namespace it first asks the guard of ``magw.drivers.netns``: it refuses to
change the host's initial namespace, or one it cannot tell apart from it,
unless told so (``allow_initial``).

Receive times are the kernel's (``SO_TIMESTAMPNS``), converted to the
monotonic clock: a reply read late because the event loop was busy still
counts with the time it arrived.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from ipaddress import IPv4Address

import attrs
import structlog

from magw.drivers.netlink.sysctl import read_sysctl, write_sysctl
from magw.drivers.netns import current_netns_refusal, run_in_netns
from magw.health.fastaddr import FastAddress

log = structlog.get_logger(__name__)

PING_GROUP_RANGE = "net.ipv4.ping_group_range"
SO_TIMESTAMPNS = 35  # <asm-generic/socket.h> SO_TIMESTAMPNS_OLD; not exported by Python's socket module
ICMP_ECHO_REPLY = 0
ICMP_ECHO_REQUEST = 8
PAYLOAD = b"magw-hc!"
_HEADER = struct.Struct("!BBHHH")  # type, code, checksum, id, sequence
_TIMESPEC = struct.Struct("@qq")
_CMSG_SPACE = 64
_RECV_BATCH = 256
_PEER_CACHE = 65536  # peers' addresses kept per socket (the targets; anything else answering is cleared out)


class PingSocketError(RuntimeError):
    """Ping sockets cannot be used here; the message says why and what to do."""


@attrs.frozen(kw_only=True)
class Reply:
    address: IPv4Address
    seq: int
    at: float  # monotonic seconds


def _gid_in_range(text: str, gid: int) -> bool:
    low, high = (int(x) for x in text.split())
    return low <= gid <= high


def enable_ping_sockets(netns: str | None, *, allow_initial: bool = False) -> None:
    """Make sure our group may open ping sockets in ``netns`` (None: the current namespace).

    Nothing is written when the range already holds our group. PingSocketError when it
    does not and the current namespace may be the host's (see ``current_netns_refusal``).
    """
    gid = os.getegid()
    current = read_sysctl(netns, PING_GROUP_RANGE)
    if _gid_in_range(current, gid):
        return
    refused = current_netns_refusal(f"set {PING_GROUP_RANGE} in", allow=allow_initial) if netns is None else None
    if refused is not None:
        raise PingSocketError(
            f"{PING_GROUP_RANGE} is {current!r} (excludes gid {gid}): {refused}, "
            f"or set it yourself (sysctl -w {PING_GROUP_RANGE}='{gid} {gid}')"
        )
    low, high = (int(x) for x in current.split())
    value = f"{gid} {gid}" if low > high else f"{min(low, gid)} {max(high, gid)}"
    write_sysctl(netns, PING_GROUP_RANGE, value)
    log.info("health.ping_group_range_set", netns=netns, old=" ".join(current.split()), new=value)


def _open(echo_id: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind(("0.0.0.0", echo_id))
    except BaseException:
        sock.close()
        raise
    return sock


class EchoSocket:
    """A ping socket in ``netns`` whose requests carry ``echo_id``."""

    def __init__(self, echo_id: int, *, netns: str | None = None) -> None:
        if not 1 <= echo_id <= 0xFFFF:
            raise ValueError(f"echo id: must be from 1 to 65535, got {echo_id}")
        self.echo_id = echo_id
        self._peers: dict[str, IPv4Address] = {}
        try:
            self._sock = run_in_netns(netns, lambda: _open(echo_id))
        except PermissionError as exc:
            raise PingSocketError(f"ping socket: {exc.strerror} (is our group in {PING_GROUP_RANGE}?)") from None

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()

    def send(self, address: IPv4Address, seq: int) -> bool:
        """Send one echo request; False when the kernel refused it at once (no route, link down...)."""
        packet = _HEADER.pack(ICMP_ECHO_REQUEST, 0, 0, 0, seq) + PAYLOAD  # the kernel fills id and checksum
        try:
            self._sock.sendto(packet, (str(address), 0))
        except OSError:
            return False
        return True

    def replies(self) -> list[Reply]:
        """Every echo reply queued on the socket (non-blocking), with its kernel receive time."""
        out: list[Reply] = []
        offset = time.time() - time.monotonic()
        for _ in range(_RECV_BATCH):
            try:
                data, ancdata, _flags, peer = self._sock.recvmsg(64, _CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # an ICMP error reported on the socket (e.g. host unreachable): not a reply
                continue
            if len(data) < _HEADER.size:
                continue
            kind, _code, _sum, _id, seq = _HEADER.unpack_from(data)
            if kind != ICMP_ECHO_REPLY:
                continue
            address = self._peers.get(peer[0])
            if address is None:  # one FastAddress per peer, not one parse and hash per reply
                if len(self._peers) >= _PEER_CACHE:
                    self._peers.clear()
                address = self._peers[peer[0]] = FastAddress(peer[0])
            out.append(Reply(address=address, seq=seq, at=_received_at(ancdata, offset)))
        return out


def _received_at(ancdata: list[tuple[int, int, bytes]], offset: float) -> float:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return float(sec) + float(nsec) / 1e9 - offset
    return time.monotonic()
