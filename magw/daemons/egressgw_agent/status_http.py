"""The node's egress status endpoint (the seed's keepalived pods serve one): is this node master, per VIP.

    GET /status          {"node": "n1", "vips": [{"name": "web", "master": true, "state": "MASTER",
                                                  "since": "2026-01-01T00:00:00Z"}, ...]}
    GET /status/{vip}    one VIP's entry, 404 {"error": ...} if keepalived has not reported it
    GET /healthz         200 "ok"

Served on TCP (host, port) in the node's namespace, or on a UNIX socket (tests, or behind a proxy).
Read-only: it answers from the agent's memory, never asks keepalived.
"""

from __future__ import annotations

from aiohttp import web

from magw.daemons.egressgw_agent.ha import EgressHA

AGENT_KEY: web.AppKey[EgressHA] = web.AppKey("egress_ha", EgressHA)


async def _status(request: web.Request) -> web.Response:
    return web.json_response(request.app[AGENT_KEY].status())


async def _one(request: web.Request) -> web.Response:
    agent = request.app[AGENT_KEY]
    name = request.match_info["vip"]
    v = agent.vip(name)
    if v is None:
        return web.json_response({"error": f"no VRRP state for VIP {name} on node {agent.node}"}, status=404)
    return web.json_response({"name": v.name, "node": agent.node, "master": v.master, "state": v.state,
                              "since": v.since})  # fmt: skip


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def app(agent: EgressHA) -> web.Application:
    application = web.Application()
    application[AGENT_KEY] = agent
    application.router.add_get("/status", _status)
    application.router.add_get("/status/{vip}", _one)
    application.router.add_get("/healthz", _healthz)
    return application


async def serve(agent: EgressHA, *, host: str = "", port: int = 0, path: str = "") -> web.AppRunner:
    """Start serving (TCP ``host:port``, or the UNIX socket ``path``); the caller ``await runner.cleanup()``."""
    runner = web.AppRunner(app(agent), access_log=None)
    await runner.setup()
    site: web.BaseSite = web.UnixSite(runner, path) if path else web.TCPSite(runner, host or None, port)
    await site.start()
    return runner
