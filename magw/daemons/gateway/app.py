"""The gateway daemon: publishes this gateway node's Endpoint document into the broker directory.

Level-driven like everything else: the document that should exist is computed
from the node's Node document (``ip`` -> private IP, optional ``public_ip``)
and the flags that override them, and the file is compared with it on every
broker change, every 100 ms (is it still there?) and every resync period
(is it still right?). A missing or different file is re-published atomically.
SIGTERM/SIGINT exit 0 and leave the file in place, so a restart (a rolling update,
``systemctl restart``) changes nothing anyone planned: the next start takes the file
over, as after a SIGKILL. A gateway that stays away is dropped by the route agents
when its file is older than their ``--endpoint-ttl``, and by health probing at once.
``--withdraw-on-exit`` removes the file on SIGTERM/SIGINT instead, to drain a
gateway before maintenance (every flow through it moves at once). Every ``heartbeat`` seconds the
file is touched: route agents treat a document older than their
``--endpoint-ttl`` as gone, so a dead gateway leaves every snapshot.

A clean stop that keeps the file also dates it ``exit_hold`` seconds ahead (``--exit-hold``, default 10, as the
route agent's ``--lease-exit-hold``): the next start may take longer than the route agents' TTL (5 s; a Python
start on a loaded node took 4-6 s in the lab's rolling upgrade, and the route agents dropped the Endpoint and
moved its flows). The next gateway's first heartbeat dates it now again; a gateway that stays away is dropped
``exit_hold`` + TTL after its stop (its route agent's liveness lease, held as long, ends its probes' answers).
A SIGKILL leaves the last heartbeat's date: a dead gateway is not held.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from ipaddress import IPv4Address

import attrs
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from magw.daemons.common.cable import CableKeys
from magw.daemons.common.flags import EXIT_FAILURE
from magw.daemons.route_agent.health_flags import DEFAULT_HEARTBEAT
from magw.desired.globalnet.plan import published_ips
from magw.drivers.wireguard.keys import KeyFileError
from magw.model import Endpoint
from magw.model.cable import Cable
from magw.sources.base import StateSource
from magw.sources.file.broker import FileBroker
from magw.sources.file.endpoint_files import endpoint_path, publish_endpoint, render_endpoint, withdraw_endpoint

log = structlog.get_logger(__name__)

DEFAULT_EXIT_HOLD = 10.0  # as the route agent's --lease-exit-hold

PRESENCE_CHECK = 0.1  # seconds between checks that our document still exists


def desired_endpoint(
    source: StateSource,
    node_name: str,
    private_ip: IPv4Address | None,
    public_ip: IPv4Address | None,
    cable_keys: CableKeys | None = None,
    public_port: int | None = None,
    nat_source_ip: IPv4Address | None = None,
) -> Endpoint | str:
    """The Endpoint ``node_name`` should publish, or why it should publish none yet (one line).

    Private IP: ``private_ip`` or the Node's ``ip``; public IP: ``public_ip``, or the Node's ``public_ip``
    (broker field or Kubernetes annotation), or none (the private IP is used); public port (where the cable is
    reached on the public IP: a load balancer's port for this gateway, docs/load-balancer.md): ``public_port``,
    or the Node document's ``public_port``, or none (the cable's own port); ``allocated_ips``: this
    gateway's Globalnet addresses (empty without Globalnet); with ``cable: wireguard``, ``backend`` and the
    public key of ``cable_keys`` (made now if the node has none). The same for the file and Kubernetes sources."""
    snapshot = source.snapshot
    if snapshot is None:
        return f"no snapshot of cluster {source.local_cluster} yet"
    node = next((n for n in snapshot.nodes if n.name == node_name), None)
    if node is None:
        return f"no Node document for {node_name} in cluster {snapshot.local_cluster}"
    if not node.gateway:
        return f"Node {node_name} is not a gateway (gateway: false)"
    doc = source.local_node_document(node_name) or {}
    public = public_ip
    if public is None and doc.get("public_ip") is not None:
        public = IPv4Address(doc["public_ip"])
    port = public_port
    if port is None and doc.get("public_port") is not None:
        port = int(doc["public_port"])
    backend, key = Cable.VXLAN, None
    if snapshot.config.cable is Cable.WIREGUARD:
        if cable_keys is None:
            return "cable wireguard, but this gateway has no key directory (--state-dir)"
        try:
            backend, key = Cable.WIREGUARD, cable_keys.public_key()
        except KeyFileError as exc:
            return f"cable wireguard: {exc}"
    return Endpoint(
        cluster=snapshot.local_cluster,
        hostname=node_name,
        private_ip=private_ip if private_ip is not None else node.ip,
        public_ip=public,
        allocated_ips=published_ips(snapshot.globalnet, node_name),  # Globalnet only: empty otherwise
        backend=backend,
        public_key=key,
        public_port=port,
        nat_source_ip=nat_source_ip,
    )


@attrs.define
class _Metrics:
    publications: Counter
    published: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None) -> _Metrics:
        return cls(
            publications=Counter(
                "magw_gateway_publications", "Endpoint documents written.", ["reason"], registry=registry
            ),
            published=Gauge(
                "magw_gateway_endpoint_published", "1 while our Endpoint document is in place.", registry=registry
            ),
        )


@attrs.define
class Gateway:
    """Publishes one node's Endpoint document while it runs."""

    source: FileBroker
    node: str
    resync_period: float
    private_ip: IPv4Address | None = None
    public_ip: IPv4Address | None = None
    public_port: int | None = None
    nat_source_ip: IPv4Address | None = None  # --nat-source-ip
    # Each instance its own registry unless given one (main() passes the global REGISTRY): a second instance
    # in one process must not collide with the first (prometheus refuses duplicate timeseries).
    registry: CollectorRegistry | None = attrs.field(factory=CollectorRegistry)
    heartbeat: float = DEFAULT_HEARTBEAT
    withdraw_on_exit: bool = False
    exit_hold: float = DEFAULT_EXIT_HOLD  # seconds a clean stop dates the kept document ahead (module docstring)
    cable_keys: CableKeys | None = None  # this node's WireGuard key pair (used with cable: wireguard)
    waiting: str | None = attrs.field(init=False, default=None)
    _metrics: _Metrics = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._metrics = _Metrics.create(self.registry)
        self.source.subscribe(lambda _snapshot: self.ensure("broker"))

    @property
    def path(self) -> str:
        return str(endpoint_path(self.source.directory, self.source.local_cluster, self.node))

    def _wait(self, reason: str) -> None:
        if reason != self.waiting:
            log.info("gateway.waiting", node=self.node, reason=reason)
        self.waiting = reason

    def desired(self) -> Endpoint | None:
        """The Endpoint we should publish, or None while our Node document does not make us a gateway."""
        want = desired_endpoint(
            self.source, self.node, self.private_ip, self.public_ip, self.cable_keys, self.public_port,
            self.nat_source_ip,
        )  # fmt: skip
        if isinstance(want, str):
            self._wait(want)
            return None
        self.waiting = None
        return want

    def ensure(self, reason: str) -> None:
        """Publish the document if it is missing or differs from what it should be."""
        want = self.desired()
        if want is None:
            return
        text = render_endpoint(want)
        try:
            with open(self.path, encoding="utf-8") as f:
                current: str | None = f.read()
        except FileNotFoundError:
            current = None
        if current == text:
            self._metrics.published.set(1)
            return
        why = "missing" if current is None else "changed"
        try:
            publish_endpoint(self.source.directory, want)
        except OSError as exc:  # e.g. a full or read-only disk: retried at the next check
            log.error("gateway.publish_failed", node=self.node, path=self.path, error=str(exc))
            return
        self._metrics.publications.labels(reason=why).inc()
        self._metrics.published.set(1)
        log.info(
            "gateway.published",
            node=self.node,
            path=self.path,
            reason=why,
            trigger=reason,
            private_ip=str(want.private_ip),
            public_ip=None if want.public_ip is None else str(want.public_ip),
            allocated_ips=[str(a) for a in want.allocated_ips],
            backend=want.backend.value,
            public_key=want.public_key,
        )

    def touch(self) -> None:
        """The heartbeat: renew our document's modification time (re-publish it if it is gone)."""
        if self.waiting is not None:
            return
        try:
            os.utime(self.path)
        except FileNotFoundError:
            self.ensure("presence")
        except OSError as exc:  # retried at the next heartbeat
            log.error("gateway.heartbeat_failed", node=self.node, path=self.path, error=str(exc))

    def hold(self) -> None:
        """Date our document ``exit_hold`` seconds ahead, so the route agents keep it while we restart."""
        if self.exit_hold <= 0 or self.waiting is not None:
            return
        ahead = time.time() + self.exit_hold
        try:
            os.utime(self.path, (ahead, ahead))
        except OSError as exc:  # gone or unwritable: the document ages from its last heartbeat, as before
            log.warning("gateway.hold_failed", node=self.node, path=self.path, error=str(exc))

    def withdraw(self) -> None:
        existed = withdraw_endpoint(self.source.directory, self.source.local_cluster, self.node)
        self._metrics.published.set(0)
        log.info("gateway.withdrawn", node=self.node, path=self.path, existed=existed)

    async def serve(self, stop: asyncio.Event) -> int:
        """Publish and keep publishing until ``stop``; then withdraw if ``withdraw_on_exit``."""
        self.source.scan()
        broker_task = asyncio.create_task(self.source.run(), name="broker")
        loop = asyncio.get_running_loop()
        next_resync = loop.time() + self.resync_period
        next_beat = loop.time() + self.heartbeat
        try:
            self.ensure("start")
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(PRESENCE_CHECK):
                        await stop.wait()
                if stop.is_set() or broker_task.done():
                    break
                if loop.time() >= next_resync:
                    next_resync = loop.time() + self.resync_period
                    self.ensure("resync")
                elif self.cable_keys is not None and self.cable_keys.changed():  # a key rotation: publish it now
                    self.ensure("key")
                elif self.waiting is None and not os.path.exists(self.path):
                    self.ensure("presence")
                if loop.time() >= next_beat:
                    next_beat = loop.time() + self.heartbeat
                    self.touch()
        finally:
            self.source.stop()
            await asyncio.gather(broker_task, return_exceptions=True)
            if self.withdraw_on_exit:
                self.withdraw()
            else:
                self.hold()
                log.info("gateway.kept", node=self.node, path=self.path, reason="a restart must change nothing",
                         hold=self.exit_hold)  # fmt: skip
        if broker_task.done() and not stop.is_set():
            log.error("gateway.crashed", task="broker", error=repr(broker_task.exception()))
            return EXIT_FAILURE
        log.info("gateway.stopped", node=self.node)
        return 0
