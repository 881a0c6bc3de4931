"""What crosses a lab's WAN: every frame on every port of the WAN bridge, caught with one AF_PACKET socket.

The socket (``ETH_P_ALL``, bound to no interface) is opened inside the lab's WAN namespace
(``magw.drivers.netns.run_in_netns``) and keeps that namespace for its whole life, so it sees the frames of the
WAN's interfaces only: each gateway's bridge port (``C-N``), once as received from the gateway (PACKET_OTHERHOST)
and once as sent to the other gateway (PACKET_OUTGOING), and ``br0``. It is read from a thread of ours in the
test's own namespace; nothing is changed anywhere (no promiscuous mode, no filter program).

Bounded: at most ``max_frames`` frames and ``max_seconds`` seconds, whichever comes first; the socket is closed
when the block ends, also on failure.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from ipaddress import IPv4Address

import attrs

from magw.drivers.netns import run_in_netns

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
IPPROTO_UDP = 17
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
RCVBUF = 8 * 1024 * 1024
SNAPLEN = 65535


@attrs.frozen
class Frame:
    """One frame as the WAN namespace saw it: the interface, the packet type (``socket.PACKET_*``) and its bytes."""

    ifname: str
    pkttype: int
    data: bytes

    @property
    def ethertype(self) -> int:
        return int.from_bytes(self.data[12:14], "big") if len(self.data) >= 14 else -1

    def udp(self) -> tuple[IPv4Address, IPv4Address, int, int] | None:
        """(source, destination, source port, destination port) of an IPv4 UDP frame (first fragment), else None."""
        d = self.data
        if self.ethertype != ETH_P_IP or len(d) < 34 or d[23] != IPPROTO_UDP:
            return None
        ihl = (d[14] & 0x0F) * 4
        if int.from_bytes(d[20:22], "big") & 0x1FFF or len(d) < 14 + ihl + 8:  # a later fragment: no UDP header
            return None
        udp = 14 + ihl
        return (
            IPv4Address(d[26:30]),
            IPv4Address(d[30:34]),
            int.from_bytes(d[udp : udp + 2], "big"),
            int.from_bytes(d[udp + 2 : udp + 4], "big"),
        )

    def describe(self) -> str:
        udp = self.udp()
        if udp is not None:
            return f"{self.ifname}: udp {udp[0]}:{udp[2]} -> {udp[1]}:{udp[3]} ({len(self.data)} bytes)"
        if self.ethertype == ETH_P_IP and len(self.data) >= 34:
            src, dst = IPv4Address(self.data[26:30]), IPv4Address(self.data[30:34])
            return f"{self.ifname}: ip proto {self.data[23]} {src} -> {dst} ({len(self.data)} bytes)"
        return f"{self.ifname}: ethertype {self.ethertype:#06x} ({len(self.data)} bytes)"


class WanCapture:
    """The frames caught so far (``frames``, a copy) and whether a bound stopped the capture early (``truncated``)."""

    def __init__(self, sock: socket.socket, *, max_frames: int, max_seconds: float) -> None:
        self._sock = sock
        self._max_frames = max_frames
        self._deadline = time.monotonic() + max_seconds
        self._frames: list[Frame] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.truncated = False
        self.error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="wan-capture", daemon=True)

    def _run(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            if time.monotonic() >= self._deadline or len(self._frames) >= self._max_frames:
                self.truncated = True
                return
            try:
                data, addr = self._sock.recvfrom(SNAPLEN)
            except TimeoutError:
                continue
            except OSError as exc:
                self.error = exc
                return
            with self._lock:
                self._frames.append(Frame(ifname=str(addr[0]), pkttype=int(addr[2]), data=data))

    @property
    def frames(self) -> list[Frame]:
        with self._lock:
            return list(self._frames)

    def finish(self, linger: float = 0.3) -> list[Frame]:
        """Wait ``linger`` seconds for frames still on their way, stop the capture; the frames caught."""
        time.sleep(linger)
        self._stop.set()
        self._thread.join(timeout=5.0)
        return self.frames


def _open_packet_socket() -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    return sock


@contextlib.contextmanager
def capture(namespace: str, *, max_frames: int = 100_000, max_seconds: float = 60.0) -> Iterator[WanCapture]:
    """Capture every frame of ``namespace``'s interfaces for the length of the block (bounded)."""
    sock = run_in_netns(namespace, _open_packet_socket)
    cap = WanCapture(sock, max_frames=max_frames, max_seconds=max_seconds)
    try:
        cap._thread.start()
        yield cap
    finally:
        cap._stop.set()
        cap._thread.join(timeout=5.0)
        sock.close()


def containing(frames: Iterable[Frame], needle: bytes) -> list[Frame]:
    """The frames whose bytes (headers included) contain ``needle``."""
    return [f for f in frames if needle in f.data]
