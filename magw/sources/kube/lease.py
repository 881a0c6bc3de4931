"""Our own elector on ``coordination.k8s.io/v1`` Leases, which gives the lease back the moment it stops.

Why not ``kubernetes_asyncio.leaderelection``: its ``run()`` only returns after a renewal fails, and nothing
in it ever clears ``holderIdentity``. A cancelled leader (SIGTERM, a rolling update) leaves its lease to
expire, so the next gateway or Globalnet controller waits a full lease duration for a peer that said it
was leaving. It also judges expiry by when *it* first saw a record, so a fresh process (or another
component, such as a gateway tidying up the Endpoints of dead peers) cannot ask "has this lease expired?"
of an object it just read; it offers no non-blocking "may I act now?" view; it logs and returns False on
every API error with no backoff; and it writes times with ``isoformat()``, which drops the fraction when
it is zero, and the API server's MicroTime needs exactly six digits. Each of those is a line or two here.

The rules (those of client-go's resource lock, with the API server's optimistic concurrency as the lock):

- ``try_acquire()`` reads the Lease; creates it when absent (409 AlreadyExists: someone else just did, read
  it again); takes it when it is released (no ``holderIdentity``), expired (``renewTime +
  leaseDurationSeconds`` in the past) or ours (a renewal). The write is a replace carrying the
  resourceVersion that was read, so of two electors racing for one lease exactly one write lands; the
  other gets 409 and answers False. A change of holder bumps ``leaseTransitions`` and sets ``acquireTime``.
- ``holding`` is true only while the last successful write is younger than 0.8 x the duration, counted
  from when that write was *sent*: a holder never acts on a lease that others may already see expired.
- ``release()`` clears ``holderIdentity`` (and stamps ``renewTime``) if the lease is still ours.
- ``hold()`` acquires (polling every renew interval), renews, reports acquired/lost, retries API errors
  with capped backoff (0.2 s doubling to 5 s, never longer than the renew interval), and on stop or
  cancellation releases at once; also when cancelled mid-request, because the release reads the lease and
  gives it back if the server holds us as holder whatever the cancelled request did.

Expiry compares the API server's stored ``renewTime`` with the local wall clock, so nodes must keep their
clocks in step (NTP), as for any Kubernetes node. The data plane never waits for a lease (docs/kubernetes.md): the
probes move traffic; a lease only decides who publishes an Endpoint, runs Globalnet, or tidies up.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
import structlog
from kubernetes_asyncio.client import CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from magw.sources.kube.reflector import API_ERRORS

log = structlog.get_logger(__name__)

HOLDING_FRACTION = 0.8  # act on a lease only within this fraction of its duration after the last renewal
BACKOFF_FIRST = 0.2
BACKOFF_CAP = 5.0
RELEASE_TIMEOUT = 5.0  # the release on exit gives up after this long (the lease then expires by itself)

OnChange = Callable[[bool], Awaitable[None] | None]

_MAX_NAME = 253


def _lease_name(name: str) -> str:
    if len(name) > _MAX_NAME:
        raise ValueError(f"lease name: {name!r} is longer than {_MAX_NAME} characters")
    return name


def gateway_lease_name(node: str) -> str:
    """Multi-active mode: one lease per gateway node; its holder publishes that node's Endpoint."""
    return _lease_name(f"magw-gateway-{node}")


def cluster_gateway_lease_name() -> str:
    """Single-gateway mode: one lease for the cluster; the other gateways wait, as in the seed."""
    return "magw-gateway"


def globalnet_lease_name() -> str:
    """The Globalnet controller (one replica at a time)."""
    return "magw-globalnet"


def micro_time(when: datetime) -> str:
    """metav1.MicroTime's wire form: UTC with exactly six fractional digits (the API server rejects fewer)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_EXTRA_DIGITS = re.compile(r"(\.\d{6})\d+")


def _as_datetime(value: Any) -> datetime | None:
    """A time from a model (datetime) or from raw JSON (RFC 3339 string); naive means UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(_EXTRA_DIGITS.sub(r"\1", value))
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@attrs.frozen
class LeaseView:
    """What the elector reads from a Lease, whether a kubernetes_asyncio model or raw JSON."""

    holder: str | None
    renew: datetime | None
    acquire: datetime | None
    duration: int | None
    transitions: int
    resource_version: str | None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None

    @classmethod
    def of(cls, lease: Any) -> LeaseView:
        if isinstance(lease, Mapping):
            meta = lease.get("metadata") or {}
            spec = lease.get("spec") or {}
            return cls(
                holder=spec.get("holderIdentity") or None,
                renew=_as_datetime(spec.get("renewTime")),
                acquire=_as_datetime(spec.get("acquireTime")),
                duration=spec.get("leaseDurationSeconds"),
                transitions=spec.get("leaseTransitions") or 0,
                resource_version=meta.get("resourceVersion"),
                labels=meta.get("labels"),
                annotations=meta.get("annotations"),
            )
        meta, spec = lease.metadata, lease.spec
        return cls(
            holder=(spec.holder_identity if spec else None) or None,
            renew=_as_datetime(spec.renew_time) if spec else None,
            acquire=_as_datetime(spec.acquire_time) if spec else None,
            duration=spec.lease_duration_seconds if spec else None,
            transitions=(spec.lease_transitions if spec else None) or 0,
            resource_version=meta.resource_version if meta else None,
            labels=meta.labels if meta else None,
            annotations=meta.annotations if meta else None,
        )

    def expired(self, now: float) -> bool:
        if not self.holder or self.renew is None or self.duration is None:
            return True
        return now >= self.renew.timestamp() + self.duration


def lease_expired(lease_obj: Any, now: float | datetime) -> bool:
    """True when nobody holds ``lease_obj`` (a V1Lease or its JSON) at ``now`` (epoch seconds or a datetime):
    released, never renewed, or ``renewTime + leaseDurationSeconds`` has passed. A gateway uses it to tidy up
    the Endpoints of peers whose lease lapsed."""
    when = now.timestamp() if isinstance(now, datetime) else now
    return LeaseView.of(lease_obj).expired(when)


class KubeLease:
    """One elector for one Lease; see the module docstring for the rules."""

    def __init__(
        self,
        api: Any,
        namespace: str,
        name: str,
        identity: str,
        duration: float,
        renew_every: float | None = None,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not duration > 0:
            raise ValueError(f"lease duration: must be > 0 seconds, got {duration}")
        renew = duration / 3 if renew_every is None else renew_every
        if not 0 < renew < duration * HOLDING_FRACTION:
            raise ValueError(
                f"lease renew interval: must be > 0 and < {HOLDING_FRACTION} x duration ({duration}), got {renew}"
            )
        if not identity:
            raise ValueError("lease identity: must not be empty")
        self.namespace = namespace
        self.name = _lease_name(name)
        self.identity = identity
        self.duration = duration
        self.renew_every = renew
        self.seconds = max(1, math.ceil(duration))  # leaseDurationSeconds is an integer; others wait >= ours
        self._coord = CoordinationV1Api(api)
        self._clock = clock
        self._monotonic = monotonic
        self._renewed_at: float | None = None  # monotonic time the last successful write was sent
        self._wrote = False  # a write went out since the last release: the server may hold us as holder
        self._releasing: asyncio.Task[None] | None = None

    @property
    def holding(self) -> bool:
        """True while the last successful acquire/renewal was sent less than 0.8 x duration ago."""
        at = self._renewed_at
        return at is not None and self._monotonic() - at < self.duration * HOLDING_FRACTION

    def _holding_left(self) -> float:
        at = self._renewed_at
        return 0.0 if at is None else max(0.0, at + self.duration * HOLDING_FRACTION - self._monotonic())

    async def _read(self) -> LeaseView | None:
        try:
            lease = await self._coord.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return LeaseView.of(lease)

    def _body(self, seen: LeaseView | None, holder: str | None, acquire: datetime | None, transitions: int) -> Any:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if seen is not None:
            metadata["resourceVersion"] = seen.resource_version
            if seen.labels:
                metadata["labels"] = dict(seen.labels)
            if seen.annotations:
                metadata["annotations"] = dict(seen.annotations)
        spec: dict[str, Any] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": self.seconds,
            "renewTime": micro_time(datetime.fromtimestamp(self._clock(), UTC)),
            "leaseTransitions": transitions,
        }
        if acquire is not None:
            spec["acquireTime"] = micro_time(acquire)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    async def try_acquire(self) -> bool:
        """Create, take over or renew the lease; False when another holder has it or won a race (409).

        API errors other than 404/409 are raised (``hold`` retries them)."""
        sent = self._monotonic()
        seen = await self._read()
        if seen is None:
            now = datetime.fromtimestamp(self._clock(), UTC)
            self._wrote = True
            try:
                await self._coord.create_namespaced_lease(self.namespace, self._body(None, self.identity, now, 0))
            except ApiException as e:
                if e.status != 409:
                    raise
                seen = await self._read()  # AlreadyExists: another elector created it first
                if seen is None:
                    return self._not_holding()
            else:
                self._renewed_at = sent
                log.info("kube_lease.created", lease=self.name, identity=self.identity)
                return True
        if seen.holder == self.identity:
            acquire, transitions = seen.acquire, seen.transitions
        elif seen.expired(self._clock()):
            acquire, transitions = datetime.fromtimestamp(self._clock(), UTC), seen.transitions + 1
        else:
            return self._not_holding()
        self._wrote = True
        try:
            await self._coord.replace_namespaced_lease(
                self.name, self.namespace, self._body(seen, self.identity, acquire, transitions)
            )
        except ApiException as e:
            if e.status == 409:  # someone else wrote it since our read: they won
                return self._not_holding()
            raise
        if seen.holder != self.identity:
            log.info("kube_lease.acquired", lease=self.name, identity=self.identity, previous=seen.holder)
        self._renewed_at = sent
        return True

    def _not_holding(self) -> bool:
        self._renewed_at = None
        return False

    async def release(self) -> bool:
        """Give the lease up if the server still has us as holder; True when this call released it.

        ``holding`` turns False first, whatever the outcome. A 409 (a concurrent write) re-reads, up to 3
        times. API errors are raised."""
        self._renewed_at = None
        for _ in range(3):
            seen = await self._read()
            if seen is None or seen.holder != self.identity:
                self._wrote = False
                return False
            try:
                await self._coord.replace_namespaced_lease(
                    self.name, self.namespace, self._body(seen, None, seen.acquire, seen.transitions)
                )
            except ApiException as e:
                if e.status == 409:
                    continue
                raise
            self._wrote = False
            log.info("kube_lease.released", lease=self.name, identity=self.identity)
            return True
        return False

    async def hold(self, stop: asyncio.Event, on_change: OnChange | None = None) -> None:
        """Acquire and keep the lease until ``stop`` is set or the task is cancelled, then release it.

        ``on_change(True)`` when the lease is acquired, ``on_change(False)`` when ``holding`` turns False
        (lost to another holder, renewals failing for 0.8 x duration, or on exit: before the release, so
        the holder has stopped acting when the next one can take over). Keep callbacks short. API errors
        are logged and retried with capped backoff; nothing is raised past the loop but cancellation."""
        told = False
        backoff = BACKOFF_FIRST
        try:
            while not stop.is_set():
                try:
                    # a hung request must not outlive what we told the caller: bounded by the holding time
                    async with asyncio.timeout(max(self.renew_every, self._holding_left())):
                        await self.try_acquire()
                    delay, backoff = self.renew_every, BACKOFF_FIRST
                except API_ERRORS as e:
                    delay = min(backoff, self.renew_every)
                    backoff = min(backoff * 2, BACKOFF_CAP)
                    log.warning(
                        "kube_lease.api_error",
                        lease=self.name,
                        error=_describe(e),
                        retry_in=delay,
                        holding=self.holding,
                    )
                told = await self._tell(told, on_change)
                if self.holding:
                    delay = min(delay, self._holding_left())  # wake to report a lapse on time
                await _wait(stop, delay)
                told = await self._tell(told, on_change)
        finally:
            # stop acting first (holding is False from here), then give the lease to the next holder at once
            self._renewed_at = None
            if told:
                await _notify(on_change, False, self.name)
            await self._release_on_exit()

    async def _tell(self, told: bool, on_change: OnChange | None) -> bool:
        now = self.holding
        if now != told:
            log.info("kube_lease.holding" if now else "kube_lease.lost", lease=self.name, identity=self.identity)
            await _notify(on_change, now, self.name)
        return now

    async def _release_on_exit(self) -> None:
        """Release at once, shielded: a second cancel leaves the release running rather than half done."""
        self._renewed_at = None
        if not self._wrote:
            return
        self._releasing = asyncio.create_task(self._release_quietly(), name=f"release-{self.name}")
        await asyncio.shield(self._releasing)

    async def _release_quietly(self) -> None:
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT):
                await self.release()
        except API_ERRORS as e:
            log.warning("kube_lease.release_failed", lease=self.name, error=_describe(e))


async def _notify(on_change: OnChange | None, holding: bool, name: str) -> None:
    if on_change is None:
        return
    try:
        result = on_change(holding)
        if inspect.isawaitable(result):
            await result
    except Exception as e:  # a failing callback must not stop renewals
        log.error("kube_lease.callback_failed", lease=name, holding=holding, error=repr(e))


async def _wait(stop: asyncio.Event, delay: float) -> None:
    if delay <= 0:
        return
    try:
        async with asyncio.timeout(delay):
            await stop.wait()
    except TimeoutError:
        pass


def _describe(e: BaseException) -> str:
    if isinstance(e, ApiException):
        return f"{e.status} {e.reason}"
    return repr(e)
