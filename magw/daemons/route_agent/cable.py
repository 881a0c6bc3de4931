"""The route agent's WireGuard cable: its flags, and the device it keeps beside the node driver.

With ``cable: wireguard`` a gateway's plan carries its WireGuard device (``DesiredState.cable``,
magw.desired.cable). ``CableDriver`` wraps the node driver and, before the node's own changes, makes the device
hold that plan (magw.drivers.wireguard.device):

- on every full sync (``observe``), whatever changed: a device deleted or a peer removed behind our back is
  back within a resync period;
- on every other sync (after each plan, ``RouteAgent.plan``: a change of the cable alone changes no kernel
  object and the reconciler then applies nothing; and before each apply) when the plan or the key file (a
  rotation) is not the one last applied, so a failover, which changes neither, costs no ``wg`` call;
- at least every ``recheck`` seconds otherwise (the periodic resync observes on another driver).

A failure (no wireguard-go, a key file others can read, a device we did not make) is one log line
(``route_agent.cable_failed``) and is retried at the next sync; the rest of the plan is applied anyway, and the
status file's ``cable`` says what is wrong. Only the public key is ever logged.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import attrs
import structlog

from magw.daemons.common.cable import CableKeys
from magw.desired.cable.values import WgDevice
from magw.desired.state import DesiredState
from magw.drivers.wireguard.device import BACKENDS
from magw.reconcile.changeset import ChangeSet
from magw.reconcile.driver import ApplyResult, Driver

log = structlog.get_logger(__name__)



def add_cable_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wireguard-backend",
        choices=BACKENDS,
        default="auto",
        help="cable wireguard: the kernel module, the userspace wireguard-go, or auto (the kernel where "
        "the module loads, else wireguard-go; default)",
    )


@attrs.define
class CableDriver:
    """A node driver that keeps the WireGuard device of the last plan before the node's own changes."""

    inner: Driver
    wireguard: Any  # magw.drivers.wireguard.device.WireGuardDriver (built lazily in the driver thread)
    wanted: Callable[[], WgDevice | None]  # the last plan's device (None: a worker, or the VXLAN cable)
    keys: CableKeys
    recheck: float = 30.0
    error: str | None = attrs.field(init=False, default=None)
    public_key: str | None = attrs.field(init=False, default=None)
    backend: str | None = attrs.field(init=False, default=None)
    # peer public key -> (rx bytes, tx bytes) as of the last check (the metrics; a dict swapped whole, so the
    # scrape thread reads it without a lock)
    transfers: dict[str, tuple[int, int]] = attrs.field(init=False, factory=dict)
    _applied: tuple[WgDevice | None, tuple[int, int, int] | None] | None = attrs.field(init=False, default=None)
    _checked_at: float = attrs.field(init=False, default=0.0)

    def observe(self) -> DesiredState:
        self.ensure(force=True)
        return self.inner.observe()

    def apply(self, changes: ChangeSet) -> ApplyResult:
        self.ensure(force=False)
        return self.inner.apply(changes)

    def ensure(self, *, force: bool) -> None:
        from magw.drivers.wireguard.keys import KeyFileError
        from magw.drivers.wireguard.tool import WgError

        plan = self.wanted()
        token = (plan, self.keys.identity() if plan is not None else None)
        stale = time.monotonic() - self._checked_at >= self.recheck
        if not force and not stale and token == self._applied:
            return
        try:
            result = self.wireguard().ensure(plan)
        except (WgError, KeyFileError, OSError, ValueError) as exc:  # the node's own changes go on regardless
            if str(exc) != self.error:
                log.error("route_agent.cable_failed", error=str(exc))
            self.error = str(exc)
            self._applied = None
            return
        if self.error is not None:
            log.info("route_agent.cable_recovered", backend=result.backend)
        self.error = None
        self.public_key, self.backend = result.public_key, result.backend
        self._read_transfers(plan is not None)
        self._applied = (plan, self.keys.identity() if plan is not None else None)  # the key it may have made
        self._checked_at = time.monotonic()

    def _read_transfers(self, planned: bool) -> None:
        from magw.drivers.wireguard.tool import WgError

        try:
            seen = self.wireguard().observe() if planned else None
        except (WgError, OSError) as exc:
            log.warning("route_agent.cable_transfers_unreadable", error=str(exc))
            seen = None
        self.transfers = {} if seen is None else {p.public_key: (p.rx_bytes, p.tx_bytes) for p in seen.peers}

    def status_json(self) -> dict[str, Any] | None:
        """The status file's ``cable``: None while no plan asked for one."""
        plan = self.wanted()
        if plan is None and self.error is None:
            return None
        return {
            "type": "wireguard",
            "device": None if plan is None else plan.name,
            "backend": self.backend,
            "public_key": self.public_key,
            "peers": [] if plan is None else [p.owner for p in plan.peers],
            "error": self.error,
        }


def cable_driver(
    args: argparse.Namespace, inner: Driver, wanted: Callable[[], WgDevice | None]
) -> Driver | CableDriver:
    """``inner`` wrapped to keep the WireGuard cable (a no-op until a plan asks for one); ``inner`` with --fake."""
    if args.fake:
        return inner
    made: list[Any] = []

    def wireguard() -> Any:  # built on first use, in the reconciler's driver thread (the node's namespace)
        if not made:
            from magw.drivers.wireguard.device import WireGuardDriver

            made.append(WireGuardDriver(args.state_dir, backend=args.wireguard_backend))
        return made[0]

    return CableDriver(inner, wireguard, wanted, CableKeys(args.state_dir), recheck=args.resync_period)
