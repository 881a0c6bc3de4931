"""NAT discovery: can this gateway reach a remote gateway at its private address? (docs/load-balancer.md)

Two gateways of different clusters may reach each other on their private addresses (one VPC, peered networks)
or only through the public ones (a load balancer, a NAT). A gateway's route agent asks each remote gateway that
publishes a public address different from its private one, on the private address: a request to UDP
``port`` (4490, as Submariner's NAT discovery) carrying 16 random bytes; the remote route agent answers with the
same bytes and the source address and port it saw. An answer within ``timeout`` (``attempts`` tries) means the
private path works: the cable then goes there (``Endpoint.private_path`` in the planning snapshot, so the FDB
entry or WireGuard peer names the private address and the cable's own port). No answer: the public path, as
published. The public path needs no discovery: the health probes run over it.

Checked when a remote gateway appears or its addresses change, when ``recheck`` is called (the route agent does
on every health change, so a private path that died is found again within a check), and every ``interval``. A
check that got no answer is repeated sooner: after ``RETRY`` s, then twice as long each time, up to ``interval``.
The remote route agent may simply not have been listening yet (its node publishes its Endpoint after it starts,
later still on a loaded machine): a clean-clone CI run saw every remote gateway called public at a lab's start
and, at 60 s between checks, not found at its private address 20 s later.
Only gateways ask and answer (the socket is open while this node publishes an Endpoint). An answer counts only
for the request in flight whose bytes it carries, from the address it was sent to. The responder answers at
most ``RATE`` requests a second, with a datagram no larger than the request's allowance.

Not built (docs/load-balancer.md): the translated source a remote NAT gives our packets, learned from answers,
admitted by the VXLAN and WireGuard guards when it is not a published address; authentication of requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog

from magw.model import Endpoint, Snapshot

log = structlog.get_logger(__name__)

PORT = 4490
MAGIC = b"magw-nd1"
REQUEST, ANSWER = b"Q", b"A"
NONCE = 16
MAX_DATAGRAM = 512
RATE = 200  # answers per second at most
TICK = 0.1  # the shortest sleep of the loop
IDLE = 5.0  # the longest: a worker, or a gateway with nothing in flight or due (a new snapshot or recheck wakes it)
BIND_RETRY = 5.0  # seconds between tries to bind a port that was taken
RETRY = 2.0  # seconds before a check that got no answer is repeated; doubled each time, up to the interval


def request_bytes(nonce: bytes, node: str) -> bytes:
    return MAGIC + REQUEST + nonce + json.dumps({"from": node}).encode()[:200]


def answer_bytes(nonce: bytes, node: str, seen: tuple[str, int]) -> bytes:
    return MAGIC + ANSWER + nonce + json.dumps({"from": node, "seen": f"{seen[0]}:{seen[1]}"}).encode()[:200]


def parse(data: bytes) -> tuple[bytes, bytes, dict[str, Any]] | None:
    """(kind, nonce, fields) of a discovery datagram; None for anything else."""
    head = len(MAGIC) + 1 + NONCE
    if len(data) < head or len(data) > MAX_DATAGRAM or not data.startswith(MAGIC):
        return None
    kind, nonce = data[len(MAGIC) : len(MAGIC) + 1], data[len(MAGIC) + 1 : head]
    if kind not in (REQUEST, ANSWER):
        return None
    try:
        fields = json.loads(data[head:]) if len(data) > head else {}
    except ValueError:
        return None
    return kind, nonce, fields if isinstance(fields, dict) else {}


@attrs.define
class Target:
    cluster: str
    private_ip: IPv4Address
    path: str = "checking"  # "private", "public" or "checking" (not known yet: the published path is used)
    seen: str | None = None  # our source as the remote gateway saw it on the private path
    checked_at: str | None = None
    due: float = 0.0  # when the next check starts
    nonce: bytes | None = None  # the request in flight
    sent_at: float = 0.0
    attempt: int = 0
    unanswered: int = 0  # checks in a row that got no answer (they are repeated sooner: ``RETRY``)


class NatDiscovery:
    """One route agent's discovery (see the module's docstring). ``on_change`` is called when a path changes."""

    def __init__(
        self,
        node: str,
        *,
        port: int = PORT,
        interval: float = 60.0,
        timeout: float = 0.5,
        attempts: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.port = port
        self.interval = interval
        self.timeout = timeout
        self.attempts = attempts
        self._clock = clock
        # By hostname: gateway hostnames are unique in the clusterset, as everywhere in magw (``Health.down``).
        self.targets: dict[str, Target] = {}
        self.gateway = False
        self.on_change: Callable[[], None] = lambda: None  # a planned path changed: replan
        self.on_status: Callable[[], None] = lambda: None  # any result changed: the status file is stale
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answers: list[float] = []
        self._bind_failed = False
        self._bind_retry_at = 0.0
        self._wake: asyncio.Event | None = None
        self.answered = 0

    # ----- inputs and outputs ------------------------------------------------------------------------------------

    def update(self, snapshot: Snapshot | None) -> None:
        """A new snapshot: this node's role, and the remote gateways worth asking (call from the loop's thread)."""
        if snapshot is None:
            return
        self.gateway = any(e.hostname == self.node for e in snapshot.endpoints_of(snapshot.local_cluster))
        wanted = {
            e.hostname: (e.cluster, e.private_ip)
            for c in snapshot.remote_clusters
            for e in snapshot.endpoints_of(c.id)
            if self.gateway and e.public_ip is not None and e.public_ip != e.private_ip
        }
        changed = False
        for host in list(self.targets):
            t = self.targets[host]
            if wanted.get(host) != (t.cluster, t.private_ip):
                changed |= t.path == "private"
                del self.targets[host]
        for host, (cluster, ip) in wanted.items():
            if host not in self.targets:
                self.targets[host] = Target(cluster=cluster, private_ip=ip, due=self._clock())
        if changed:
            self.on_change()
        self._woken()

    def recheck(self) -> None:
        """Check every target again now (a path went down, or came back)."""
        now = self._clock()
        for t in self.targets.values():
            if t.nonce is None:
                t.due = min(t.due, now)
        self._woken()

    def _woken(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def planning_snapshot(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with ``private_path`` set on the remote gateways found at their private address."""
        if not any(t.path == "private" for t in self.targets.values()):
            return snapshot

        def mark(e: Endpoint) -> Endpoint:
            t = self.targets.get(e.hostname)
            found = t is not None and t.path == "private" and (t.cluster, t.private_ip) == (e.cluster, e.private_ip)
            return attrs.evolve(e, private_path=True) if found and e.cluster != snapshot.local_cluster else e

        return attrs.evolve(snapshot, endpoints=tuple(mark(e) for e in snapshot.endpoints))

    def status_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "peers": {h: self._peer_json(t) for h, t in sorted(self.targets.items())},
        }

    @staticmethod
    def _peer_json(t: Target) -> dict[str, Any]:
        return {"cluster": t.cluster, "private_ip": str(t.private_ip), "path": t.path, "seen": t.seen,
                "checked_at": t.checked_at}  # fmt: skip

    # ----- the socket ----------------------------------------------------------------------------------------------

    def _open(self) -> None:
        now = self._clock()
        if now < self._bind_retry_at:
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", self.port))
        except OSError as exc:
            sock.close()
            if not self._bind_failed:  # once, then a quiet retry every BIND_RETRY s (the port may come free)
                log.error("natdisc.bind_failed", node=self.node, port=self.port, error=str(exc), retry=BIND_RETRY)
            self._bind_failed, self._bind_retry_at = True, now + BIND_RETRY
            return
        self._bind_failed = False
        sock.setblocking(False)
        self._sock = sock
        assert self._loop is not None
        self._loop.add_reader(sock.fileno(), self._drain)
        log.info("natdisc.listening", node=self.node, port=self.port)

    def _close(self) -> None:
        if self._sock is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None

    def _drain(self) -> None:
        for _ in range(64):  # bounded per wake-up
            if self._sock is None:
                return
            try:
                data, peer = self._sock.recvfrom(MAX_DATAGRAM + 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ICMP errors from a target that refused
                continue
            got = parse(data)
            if got is None:
                continue
            kind, nonce, fields = got
            if kind == REQUEST:
                self._answer(nonce, peer)
            else:
                self._answered(nonce, peer, fields)

    def _answer(self, nonce: bytes, peer: tuple[str, int]) -> None:
        now = self._clock()
        self._answers = [t for t in self._answers if now - t < 1.0]
        if len(self._answers) >= RATE or self._sock is None:
            return
        self._answers.append(now)
        with contextlib.suppress(OSError):
            self._sock.sendto(answer_bytes(nonce, self.node, peer), peer)
            self.answered += 1

    def _answered(self, nonce: bytes, peer: tuple[str, int], fields: dict[str, Any]) -> None:
        for host, t in self.targets.items():
            if t.nonce == nonce and peer[0] == str(t.private_ip):
                seen = fields.get("seen")
                self._result(host, t, "private", seen if isinstance(seen, str) else None)
                return

    def _result(self, host: str, t: Target, path: str, seen: str | None) -> None:
        old = t.path
        t.path, t.seen, t.nonce, t.attempt = path, seen, None, 0
        t.checked_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        t.unanswered = 0 if path == "private" else t.unanswered + 1
        wait = self.interval if path == "private" else min(self.interval, RETRY * 2 ** (t.unanswered - 1))
        t.due = self._clock() + wait
        if path != old:
            log.info("natdisc.path", node=self.node, peer=host, cluster=t.cluster, path=path, old=old, seen=seen)
            if "private" in (path, old):
                self.on_change()
            self.on_status()

    # ----- the loop ------------------------------------------------------------------------------------------------

    def tick(self) -> None:
        """Open or close the socket with the role; send what is due; give up on what timed out."""
        if self.gateway and self._sock is None:
            self._open()
        elif not self.gateway and self._sock is not None:
            self._close()
        if self._sock is None:
            return
        now = self._clock()
        for host, t in self.targets.items():
            if t.nonce is not None and now - t.sent_at >= self.timeout:
                if t.attempt >= self.attempts:
                    self._result(host, t, "public", None)
                    continue
                t.nonce = None
            if t.nonce is None and now >= t.due:
                self._send(t, now)

    def _send(self, t: Target, now: float) -> None:
        assert self._sock is not None
        t.nonce, t.sent_at, t.attempt = os.urandom(NONCE), now, t.attempt + 1
        with contextlib.suppress(OSError):  # no route: the attempt times out
            self._sock.sendto(request_bytes(t.nonce, self.node), (str(t.private_ip), self.port))

    def next_wait(self) -> float:
        """Seconds until ``tick`` has something to do: a reply's timeout, a check that falls due, a bind to retry;
        ``IDLE`` at most (a worker has nothing to do until a snapshot makes it a gateway, which wakes the loop)."""
        if not self.gateway:
            return IDLE if self._sock is None else 0.0
        now = self._clock()
        if self._sock is None:
            return min(max(self._bind_retry_at - now, TICK), IDLE)
        ends = [t.sent_at + self.timeout if t.nonce is not None else t.due for t in self.targets.values()]
        return min(max(min(ends, default=now + IDLE) - now, TICK), IDLE)

    async def run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                self.tick()
                woken = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({stopped, woken}, timeout=self.next_wait(), return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                self._wake.clear()
        finally:
            stopped.cancel()
            self._close()
