"""The route agent's failover shortcut: a gateway the probes just took down leaves the kernel's groups at once.

The health monitor calls ``FailoverShortcut.changed`` with every new probed Health, on the event loop. For the
peers that are down now and were not before, it asks the reconciler to apply their group replaces straight
from the known state (``magw.reconcile.shortcut``, ``Reconciler.apply_now``), before the urgent sync the same
change asks for: that sync plans, diffs and does the rest (nft, routes, statuses) and finds the groups done.
docs/health.md, "Timing", has the figures.
"""

from __future__ import annotations

import time
from ipaddress import IPv4Address

import structlog

from magw.health.monitor import HealthMonitor
from magw.model import Health
from magw.reconcile.driver import Driver
from magw.reconcile.loop import Reconciler
from magw.reconcile.shortcut import failover_ops
from magw.sources.base import StateSource

log = structlog.get_logger(__name__)


class FailoverShortcut:
    """Remembers which peers were down, and applies the group replaces of those that just went down."""

    def __init__(
        self,
        node: str,
        reconciler: Reconciler,
        monitor: HealthMonitor,
        source: StateSource,
        driver: Driver | None = None,
    ) -> None:
        self.node = node
        self._driver = driver  # the driver under the WireGuard cable's: its check may run wg on the event loop
        self._reconciler = reconciler
        self._monitor = monitor
        self._source = source
        self._down: frozenset[str] = frozenset()
        self.applied = 0  # group replaces applied this way, over the agent's life

    def _doubtful(self, health: Health) -> set[str]:
        """Peers down, or reaching only some of the remote clusters, by the probes or the source's Health document
        (a worker's probes list every local gateway's reach)."""
        snapshot = self._source.snapshot
        remote = frozenset(c.id for c in snapshot.remote_clusters) if snapshot is not None else frozenset()
        both = (health, snapshot.health) if snapshot is not None else (health,)
        names: set[str] = set()
        for h in both:
            names |= set(h.down) | {gw for gw, clusters in h.reach if not remote <= clusters}
        return names

    def changed(self, health: Health) -> None:
        newly, self._down = health.down - self._down, health.down
        if not newly:
            return
        addresses: dict[str, set[IPv4Address]] = {}
        for target in self._monitor.plan.targets:
            addresses.setdefault(target.hostname, set()).add(target.address)
        dead = {a for name in newly for a in addresses.get(name, ())}
        if not dead:
            return
        doubtful = {a for name in self._doubtful(health) for a in addresses.get(name, ())}
        started = time.perf_counter()
        result = self._reconciler.apply_now(lambda known: failover_ops(known, dead, doubtful), driver=self._driver)
        if result is None:
            return  # a sync is running or the known state is in doubt: the sync just asked for does it
        self.applied += len(result.applied)
        log.info(
            "route_agent.failover_shortcut",
            node=self.node,
            peers=",".join(sorted(newly)),
            groups=len(result.applied),
            failed=len(result.failed),
            took_ms=round((time.perf_counter() - started) * 1000, 3),
        )
