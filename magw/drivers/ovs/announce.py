"""Teach a gateway router the host's MAC before traffic needs it: ARP requests from ``ovn-k8s-sub0``.

Each gateway router reaches its host through ``submariner_up_lrp`` (169.254.254.9) to ``ovn-k8s-sub0``
(169.254.254.10). A new router does not know that address's MAC: OVN learns it (a ``MAC_Binding`` row) from an
ARP packet of the host's, or resolves it with an ARP of its own when the first reply must leave that way, and
drops the packet that needed it. In the lab that first-use resolution left some of the first UDP flows through a
new router dark for as long as they sent (docs/ovn.md, "A new gateway router's first flows"): their requests
left the router without the load balancer's SNAT. A router answers an ARP request for its own address and learns
the sender from it (``put_arp``), so the route agent of a gateway sends one request from ``ovn-k8s-sub0`` for
169.254.254.9 in a short burst whenever it gives the device its address (the router may be created a moment
later by the cluster's syncer) and again at each full sync (a router recreated later learns it then).

The request is a plain broadcast ARP request, as the kernel would send: ``ovn-k8s-sub0``'s own MAC and address,
on ``ovn-k8s-sub0`` only (its own L2 segment: br-submariner and the router's localnet port). Nothing in the
kernel's neighbour table is changed.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from ipaddress import IPv4Address

import structlog

log = structlog.get_logger(__name__)

ETH_P_ARP = 0x0806
BROADCAST = b"\xff" * 6
BURST = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)  # seconds after a trigger: the syncer may make the router after us


def arp_request(src_mac: bytes, src_ip: IPv4Address, target_ip: IPv4Address) -> bytes:
    """The Ethernet frame of a broadcast ARP request (RFC 826) from ``src_mac``/``src_ip`` for ``target_ip``."""
    if len(src_mac) != 6:
        raise ValueError(f"a MAC is 6 bytes, not {len(src_mac)}")
    eth = BROADCAST + src_mac + struct.pack("!H", ETH_P_ARP)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + src_mac + src_ip.packed + b"\x00" * 6 + target_ip.packed
    return eth + arp


def send_arp_request(dev: str, src_ip: IPv4Address, target_ip: IPv4Address) -> None:
    """Send one ARP request on ``dev`` (in the current namespace) from its own MAC. OSError when it cannot."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP)) as s:
        s.bind((dev, ETH_P_ARP))
        mac = s.getsockname()[4]  # an AF_PACKET socket's address ends with the device's hardware address
        s.send(arp_request(mac, src_ip, target_ip))


class Announcer:
    """Sends ``send()`` at the offsets of ``BURST`` after each ``trigger()`` (a new trigger restarts the burst), in a
    daemon thread of its own: the sync that triggers it never waits. A failed send is logged once per burst."""

    def __init__(self, send: Callable[[], None], what: str, burst: tuple[float, ...] = BURST) -> None:
        self._send = send
        self._what = what
        self._burst = burst
        self._wake = threading.Condition()
        self._generation = 0
        self._stopped = False
        self._thread: threading.Thread | None = None

    def trigger(self) -> None:
        with self._wake:
            self._generation += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="arp-announce", daemon=True)
                self._thread.start()
            self._wake.notify()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        done = 0  # the last generation whose burst ran to its end
        while True:
            with self._wake:
                while not self._stopped and self._generation == done:
                    self._wake.wait()
                if self._stopped:
                    return
                generation = self._generation
            done = generation if self._burst_of(generation) else done

    def _burst_of(self, generation: int) -> bool:
        """One burst; False when a newer trigger (or stop) cut it short."""
        failed = False
        previous = 0.0
        for offset in self._burst:
            with self._wake:
                self._wake.wait_for(lambda: self._stopped or self._generation != generation, offset - previous)
                if self._stopped or self._generation != generation:
                    return False
            previous = offset
            try:
                self._send()
            except OSError as exc:
                if not failed:
                    log.warning("ovn.arp_announce_failed", what=self._what, error=str(exc))
                failed = True
        log.debug("ovn.arp_announced", what=self._what, sends=len(self._burst), failed=failed)
        return True
