"""``magw-gateway --source kube``: the gateway's Endpoint, lease, broker sync and Gateway status on Kubernetes.

- **Lease.** Multi-active mode (the Submariner object's ``multiActiveGatewayEnabled``): one Lease per gateway
  node, ``magw-gateway-<node>``; single-gateway mode: one Lease for the cluster, ``magw-gateway``, and the
  other gateways wait, as in the seed. The mode is read from the snapshot; a change of mode releases the old
  lease and takes the new one.
- **Endpoint.** Published (created, or replaced when it differs) only while the lease is held. Losing the lease
  stops writes; it does not delete anything.
- **Tidy-up.** A holder deletes the local Endpoints of gateways that can no longer publish: in single-gateway
  mode every other gateway's; in multi-active mode those whose ``magw-gateway-<host>`` Lease is absent, or
  released or expired for longer than ``tidy_grace``. Each delete carries the resourceVersion it judged, so
  an Endpoint renewed meanwhile stays. The data plane never waits for this: the route agents' probes move
  traffic away from a dead gateway in well under a second; the tidy-up only removes its configuration.
- **Broker sync** (``BrokerSync``, with ``--broker-kubeconfig``) runs while the lease is held.
- **Gateway status** through the status subresource: HA state (``active`` while the lease is held), the local
  Endpoint, each remote gateway's connection state and probe RTT from the route agent's status file
  (``--health-status-file``: the route agent's ``--status-file`` on this node), written only when it changes.
- **Public address from a Service** (``--public-service NAME``): the ``LoadBalancer`` Service's
  ``status.loadBalancer.ingress`` and this gateway's port on it (``magw.sources.kube.lbservice``), read at start and
  every ``SERVICE_EVERY`` s; ``--public-ip``/``--public-port`` still win. Until the Service has an address the
  gateway publishes nothing (it waits, and says why).
- **SIGTERM** releases the lease at once (not left to expire); the Endpoint stays, so a restart moves no flow,
  unless ``--withdraw-on-exit``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import REGISTRY

from magw.daemons.common.cable import CableKeys
from magw.daemons.common.flags import EXIT_FAILURE
from magw.daemons.common.runner import run_until_signalled, start_metrics
from magw.daemons.gateway.app import desired_endpoint
from magw.model import Endpoint
from magw.snapshot.load import endpoint_doc
from magw.sources.kube import lbservice
from magw.sources.kube.brokersync import BrokerSync
from magw.sources.kube.client import KubeConfigError, api_client
from magw.sources.kube.crd import Crd
from magw.sources.kube.lease import KubeLease, cluster_gateway_lease_name, gateway_lease_name, lease_expired
from magw.sources.kube.mapping import endpoint_docs, endpoint_object_name, endpoint_spec
from magw.sources.kube.reflector import API_ERRORS
from magw.sources.kube.source import KubeSource
from magw.sources.kube.status import GatewayStatusWriter, gateway_status
from magw.util.aio import wait_first

log = structlog.get_logger(__name__)

TICK = 0.1  # seconds between looks at the Endpoint (and on every source change)
TIDY_EVERY = 2.0
STATUS_EVERY = 1.0
REWRITE_AFTER = 2.0  # an Endpoint written this recently is not written again while the watch catches up
SERVICE_EVERY = 5.0  # seconds between reads of the --public-service Service (a cloud takes longer to change it)


@attrs.define
class KubeGateway:
    source: KubeSource
    api: ApiClient
    node: str
    namespace: str
    identity: str
    lease_duration: float = 10.0
    private_ip: IPv4Address | None = None
    public_ip: IPv4Address | None = None
    public_port: int | None = None
    public_service: str | None = None  # the LoadBalancer Service fronting this gateway (--public-service)
    nat_source_ip: IPv4Address | None = None  # --nat-source-ip
    cable_keys: CableKeys | None = None  # this node's WireGuard key pair (used with cable: wireguard)
    broker_sync: BrokerSync | None = None
    health_status_file: str | None = None
    tidy_grace: float = 30.0
    withdraw_on_exit: bool = False
    waiting: str | None = attrs.field(init=False, default=None)
    publications: int = attrs.field(init=False, default=0)
    tidied: int = attrs.field(init=False, default=0)
    _lease: KubeLease | None = attrs.field(init=False, default=None)
    _lease_task: asyncio.Task[None] | None = attrs.field(init=False, default=None)
    _lease_stop: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)
    _written: tuple[dict[str, Any], float] | None = attrs.field(init=False, default=None)
    _fronted: lbservice.Fronted | str | None = attrs.field(init=False, default=None)  # the Service's, or why not
    _wake: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)
    _failing: str | None = attrs.field(init=False, default=None)
    _status: GatewayStatusWriter = attrs.field(init=False)
    _endpoints: Crd = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._endpoints = Crd(self.api, "endpoints", "Endpoint", self.namespace)
        self._status = GatewayStatusWriter(self.api, self.namespace, self.node)
        self.source.subscribe(lambda _snapshot: self._wake.set())

    @property
    def holding(self) -> bool:
        return self._lease is not None and self._lease.holding

    @property
    def object_name(self) -> str:
        return endpoint_object_name(self.source.local_cluster, self.node)

    # ----- the lease -------------------------------------------------------------------------------------

    def _lease_name(self) -> str | None:
        snapshot = self.source.snapshot
        if snapshot is None:
            return None
        return gateway_lease_name(self.node) if snapshot.config.multi_active else cluster_gateway_lease_name()

    async def _follow_mode(self) -> None:
        """Hold the lease of the current mode (start it, or switch after a change of mode)."""
        name = self._lease_name()
        if name is None or (self._lease is not None and self._lease.name == name):
            return
        await self._drop_lease()
        self._lease = KubeLease(self.api, self.namespace, name, self.identity, self.lease_duration)
        self._lease_stop = asyncio.Event()
        self._lease_task = asyncio.create_task(self._lease.hold(self._lease_stop, self._on_lease), name="lease")
        log.info("gateway.lease_wanted", node=self.node, lease=name)

    async def _on_lease(self, holding: bool) -> None:
        if self.broker_sync is not None:
            self.broker_sync.enabled = holding
            if holding:
                self.broker_sync.mark_dirty("lease")
        self._wake.set()

    async def _drop_lease(self) -> None:
        task, self._lease_task = self._lease_task, None
        if task is not None:
            self._lease_stop.set()
            await asyncio.gather(task, return_exceptions=True)  # hold() releases the lease on its way out

    # ----- the Endpoint ----------------------------------------------------------------------------------

    def _wait(self, reason: str) -> None:
        if reason != self.waiting:
            log.info("gateway.waiting", node=self.node, reason=reason)
        self.waiting = reason

    async def read_service(self) -> None:
        """Read the --public-service Service; log when what it says changes."""
        if self.public_service is None:
            return
        try:
            obj = await CoreV1Api(self.api).read_namespaced_service(self.public_service, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            found: lbservice.Fronted | str = f"Service {self.public_service} not found in {self.namespace}"
        else:
            service = self.api.sanitize_for_serialization(obj)
            where = lbservice.ingress(service)
            resolved = None
            if isinstance(where, tuple) and where[0] == "hostname":
                resolved = await lbservice.resolve(where[1])
            found = lbservice.fronted(service, self.node, resolved)
        if found != self._fronted:
            if isinstance(found, str):
                log.warning("gateway.public_service_unusable", node=self.node, reason=found)
            else:
                log.info("gateway.public_from_service", node=self.node, service=self.public_service,
                         public_ip=str(found.ip), public_port=found.port)  # fmt: skip
            self._fronted = found
            self._wake.set()

    def _want(self) -> Endpoint | str:
        """The Endpoint this gateway should publish, or why it cannot yet (a string)."""
        public_ip, public_port = self.public_ip, self.public_port
        if self.public_service is not None:
            fronted = self._fronted
            if not isinstance(fronted, lbservice.Fronted):
                return fronted or f"Service {self.public_service}: not read yet"
            public_ip = public_ip or fronted.ip
            public_port = public_port or fronted.port
        return desired_endpoint(
            self.source, self.node, self.private_ip, public_ip, self.cable_keys, public_port, self.nat_source_ip
        )

    async def ensure(self) -> None:
        """Publish our Endpoint if we hold the lease and it is missing or differs."""
        want = self._want()
        if isinstance(want, str):
            self._wait(want)
            return
        if not self.holding:
            self._wait(f"lease {self._lease.name if self._lease else '-'} not held")
            return
        self.waiting = None
        spec = endpoint_spec(endpoint_doc(want))
        current = self.source.objects("Endpoint").get((self.namespace, self.object_name))
        if current is not None and dict(current.get("spec") or {}) == spec:
            return
        if (
            self._written is not None
            and self._written[0] == spec
            and time.monotonic() - self._written[1] < REWRITE_AFTER
        ):
            return  # just written: the watch has not shown it yet
        why = await self._endpoints.ensure_spec(self.object_name, spec, current)
        self._written = (spec, time.monotonic())
        self.publications += 1
        log.info("gateway.published", node=self.node, object=self.object_name, reason=why, **_summary(spec))

    async def tidy(self) -> None:
        """Delete the local Endpoints of gateways that cannot publish any more (see the module docstring)."""
        snapshot = self.source.snapshot
        if snapshot is None or not self.holding or not self.source.initial_sync_done:
            return
        now = time.time()
        for (ns, name), obj in list(self.source.objects("Endpoint").items()):
            spec = obj.get("spec") or {}
            if spec.get("cluster_id") != self.source.local_cluster or spec.get("hostname") == self.node:
                continue
            if snapshot.config.multi_active and not await self._lease_gone(str(spec.get("hostname")), now):
                continue
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            with contextlib.suppress(ApiException):  # 409: renewed meanwhile; 404: someone else tidied it
                if await self._endpoints.delete(name, rv):
                    self.tidied += 1
                    log.info("gateway.tidied", node=self.node, endpoint=name, namespace=ns)

    async def _lease_gone(self, host: str, now: float) -> bool:
        try:
            lease = await CoordinationV1Api(self.api).read_namespaced_lease(gateway_lease_name(host), self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return lease_expired(lease, now - self.tidy_grace)

    # ----- the Gateway status ----------------------------------------------------------------------------

    def _health(self) -> dict[str, Any] | None:
        if self.health_status_file is None:
            return None
        try:
            with open(self.health_status_file, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return None
        health = doc.get("health") if isinstance(doc, dict) else None
        return health if isinstance(health, dict) else None

    def submit_status(self) -> None:
        snapshot = self.source.snapshot
        want = self._want()
        if snapshot is None or isinstance(want, str):
            return
        self._status.submit(
            gateway_status(
                local=want,
                ha_status="active" if self.holding else "passive",
                remotes=[e for e in snapshot.endpoints if e.cluster != snapshot.local_cluster],
                health=self._health(),
                status_failure="" if self.holding else (self.waiting or ""),
            )
        )

    # ----- the loop --------------------------------------------------------------------------------------

    def _failed(self, what: str, exc: BaseException) -> None:
        state = f"{what}: {type(exc).__name__}: {exc}".splitlines()[0][:300]
        if state != self._failing:
            log.warning("gateway.api_error", node=self.node, error=state, retried_in=TICK)
        self._failing = state

    async def serve(self, stop: asyncio.Event) -> int:
        tasks = [asyncio.create_task(self.source.run(), name="source")]
        status_stop = asyncio.Event()
        tasks.append(asyncio.create_task(self._status.run(status_stop), name="gateway-status"))
        if self.broker_sync is not None:
            self.broker_sync.enabled = False
            tasks.append(asyncio.create_task(self.broker_sync.run(), name="brokersync"))
        loop = asyncio.get_running_loop()
        next_tidy = next_status = next_service = loop.time()
        try:
            while not stop.is_set():
                try:
                    if loop.time() >= next_service:
                        next_service = loop.time() + SERVICE_EVERY
                        await self.read_service()
                    await self._follow_mode()
                    await self.ensure()
                    if loop.time() >= next_tidy:
                        next_tidy = loop.time() + TIDY_EVERY
                        await self.tidy()
                    self._failing = None
                except API_ERRORS as exc:
                    self._failed("endpoint", exc)
                if loop.time() >= next_status:
                    next_status = loop.time() + STATUS_EVERY
                    self.submit_status()
                await wait_first(stop, self._wake, TICK)
                self._wake.clear()
        finally:
            await self._drop_lease()
            if self.withdraw_on_exit:
                with contextlib.suppress(*API_ERRORS):
                    existed = await self._endpoints.delete(self.object_name)
                    log.info("gateway.withdrawn", node=self.node, object=self.object_name, existed=existed)
            else:
                log.info(
                    "gateway.kept", node=self.node, object=self.object_name, reason="a restart must change nothing"
                )
            status_stop.set()
            self.source.stop()
            if self.broker_sync is not None:
                self.broker_sync.stop()
            await asyncio.gather(*tasks, return_exceptions=True)
        log.info("gateway.stopped", node=self.node, publications=self.publications)
        return 0


def _summary(spec: dict[str, Any]) -> dict[str, Any]:
    (doc,) = endpoint_docs({"metadata": {}, "spec": spec})
    return {k: doc.fields.get(k) for k in ("private_ip", "public_ip", "allocated_ips")}


async def run_kube(args: argparse.Namespace) -> int:
    async with contextlib.AsyncExitStack() as stack:
        try:
            api = await api_client(args.kubeconfig)
            stack.push_async_callback(api.close)
            broker_sync = None
            if args.broker_kubeconfig:
                broker_api = await api_client(args.broker_kubeconfig)
                stack.push_async_callback(broker_api.close)
                broker_sync = BrokerSync(
                    api,
                    broker_api,
                    local_cluster=args.cluster,
                    namespace=args.namespace,
                    broker_namespace=args.broker_namespace,
                    resync=args.resync_period,
                )
        except KubeConfigError as exc:
            log.error("gateway.failed", error=str(exc))
            return EXIT_FAILURE
        gateway = KubeGateway(
            # no workloads: the gateway publishes its Globalnet addresses from the egress kinds' statuses only
            source=KubeSource(api, local_cluster=args.cluster, namespace=args.namespace, workloads=False),
            api=api,
            node=args.node,
            namespace=args.namespace,
            identity=args.identity,
            lease_duration=args.lease_duration,
            private_ip=args.private_ip,
            public_ip=args.public_ip,
            public_port=args.public_port,
            public_service=args.public_service,
            nat_source_ip=args.nat_source_ip,
            broker_sync=broker_sync,
            health_status_file=args.health_status_file,
            tidy_grace=args.tidy_grace,
            withdraw_on_exit=args.withdraw_on_exit,
            cable_keys=CableKeys(args.state_dir),
        )
        log.info("gateway.started", node=args.node, cluster=args.cluster, source="kube", broker=broker_sync is not None)
        start_metrics(args.metrics_port, registry=REGISTRY, address=args.metrics_address)
        return await run_until_signalled("gateway", gateway.serve)
    return EXIT_FAILURE  # not reached: the stack does not swallow exceptions
