"""The route agent's health monitor: built in the node's namespace, wired to the reconciler (docs/health.md)."""

from __future__ import annotations

import structlog

from magw.daemons.route_agent.health_flags import HealthSettings
from magw.health.monitor import HealthMonitor
from magw.health.probe import PingSocketError, enable_ping_sockets

log = structlog.get_logger(__name__)


def build_monitor(node: str, settings: HealthSettings | None, *, allow_initial: bool) -> HealthMonitor | None:
    """A monitor for ``node`` in the current namespace; None when off or when ping sockets cannot be had."""
    if settings is None:
        log.info("route_agent.health_off", node=node)
        return None
    try:
        enable_ping_sockets(None, allow_initial=allow_initial)
    except (PingSocketError, OSError) as exc:
        log.error("route_agent.health_unavailable", node=node, error=str(exc))
        return None
    return HealthMonitor(node, probe=settings.probe, liveness=settings.liveness, require_sync=True)
