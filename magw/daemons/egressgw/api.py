"""The seed's controller HTTP API as a thin layer over EgressVIP objects (docs/egress-gateway.md, "API").

Endpoints (JSON in, JSON out):

- ``POST /vip`` ``{"action": "bind"|"unbind"|"notify", "vip": NAME-or-ADDRESS, "namespace": NS, "service": SVC}``
  (``service`` optional; ``notify`` needs only ``vip``): the seed's ``vip`` API. Answers ``{"vip": ...,
  "status": ...}`` with the VIP's spec and status as written.
- ``POST /master_notify`` ``{"vip": ..., "node": NAME}`` or ``{"vip": ..., "node_ip": ADDRESS}``, optional
  ``"state"`` (``MASTER`` by default, ``BACKUP``, ``FAULT``, ``STOP``) and ``"mac"`` (accepted for the seed's
  callers and not used: steering does not depend on the holder's MAC here): a holder report.
- ``GET /vip`` (every VIP) and ``GET /vip/NAME``: spec and status.
- ``GET /openapi.json``: the OpenAPI 3 document of all this (magw.daemons.egressgw.openapi), without authentication.

Errors are ``{"error": "one line"}``: 400 (the request cannot mean anything: bad JSON, a missing or unknown
field), 404 (an unknown VIP, namespace, Service or node; an address outside the configured ranges), 409 (it
contradicts the bindings: bound twice, not bound, Services still bound; a VIP outside ranges narrowed since; or
the VIP's file holds other documents), 503 (no snapshot of the cluster yet, or the lease is not held), 500 (an
I/O error). Nothing is written when a request is refused. A schema-valid request is never 400 (schemathesis
checks it): what the document cannot express (a VIP's range) is a 404 or a 409.

With ``auth`` (``magw.daemons.egressgw.auth``, the TCP API of ``--source kube``) every request first needs a
bearer token the API server accepts (401) and then the action's SubjectAccessReview (403); 503 when the API
server cannot be asked. On the unix socket there is no ``auth``: the socket's permissions are the access control.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from ipaddress import AddressValueError, IPv4Address
from typing import Any

from aiohttp import web

from magw.controllers.egressgw import ops
from magw.controllers.egressgw.controller import Answer, EgressController, NotReady
from magw.daemons.egressgw import openapi
from magw.daemons.egressgw.auth import Access, KubeAuth, Refused, User
from magw.model.egressgw import EgressVIPStatus
from magw.snapshot.egressgw import status_to_doc, vip_to_doc
from magw.sources.file.egressgw_store import StoreRefused

_USER = web.RequestKey("user", User)
_STATUS = {ops.ErrorKind.INVALID: 400, ops.ErrorKind.NOT_FOUND: 404, ops.ErrorKind.CONFLICT: 409}
_VIP_FIELDS = ("action", "vip", "namespace", "service")
_NOTIFY_FIELDS = ("vip", "node", "node_ip", "mac", "state")


class _RequestRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": " ".join(message.split())}, status=status)


def _doc(answer: Answer) -> dict[str, Any]:
    status = status_to_doc(answer.vip.name, answer.status)
    del status["name"]
    return {"vip": vip_to_doc(answer.vip), "status": status}


async def _body(request: web.Request, allowed: tuple[str, ...]) -> dict[str, str]:
    try:
        raw = await request.json()
    except ValueError:
        raise _RequestRefused(400, "the body is not JSON") from None
    if not isinstance(raw, dict):
        raise _RequestRefused(400, f"the body must be a JSON object, got {type(raw).__name__}")
    for key, value in raw.items():
        if key not in allowed:
            raise _RequestRefused(400, f"{key}: unknown field (known: {', '.join(allowed)})")
        if not isinstance(value, str):
            raise _RequestRefused(400, f"{key}: expected a string, got {type(value).__name__}")
    return raw


class EgressApi:
    """The handlers; every request runs under the controller's lock, on a fresh read of the source."""

    def __init__(self, controller: EgressController, auth: KubeAuth | None = None, vip_namespace: str = "") -> None:
        self.controller = controller
        self.auth = auth
        self.vip_namespace = vip_namespace  # where the EgressVIP objects live: the SAR namespace of get/list/notify

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024, middlewares=[self._authenticate])
        app.router.add_post("/vip", self.vip)
        app.router.add_post("/master_notify", self.master_notify)
        app.router.add_get("/vip", self.list_vips)
        app.router.add_get("/vip/{name}", self.show_vip)
        app.router.add_get("/openapi.json", self.openapi)
        return app

    @web.middleware
    async def _authenticate(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        if self.auth is not None and request.path != "/openapi.json":  # the document is public (openapi.py)
            try:
                request[_USER] = await self.auth.authenticate(request.headers.get("Authorization"))
            except Refused as exc:
                return _error(exc.status, str(exc))
        response: web.StreamResponse = await handler(request)
        return response

    async def _authorize(self, request: web.Request, access: Access, *, agent_only: bool = False) -> None:
        if self.auth is None:
            return
        await self.auth.authorize(request[_USER], access, agent_only=agent_only)

    async def openapi(self, _: web.Request) -> web.Response:
        return web.json_response(openapi.document(bearer=self.auth is not None))

    def _vip_name(self, ref: str) -> str:
        """The EgressVIP's name for a request naming it by name or address (the SAR's name); ``ref`` if unknown."""
        try:
            return ops.find_vip(self.controller.fresh().egressgw, ref).name
        except (ops.EgressOpError, NotReady):
            return ref

    def _access(self, path: str, body: dict[str, str]) -> tuple[Access, bool]:
        name = self._vip_name(body.get("vip", ""))
        if path == "/master_notify":
            return Access("report", self.vip_namespace, name), True
        action = body.get("action", "")
        if action in ("bind", "unbind"):
            return Access(action, body.get("namespace", ""), name), False
        return Access("notify", self.vip_namespace, name), False

    async def _guarded(
        self, request: web.Request, allowed: tuple[str, ...], act: Callable[[dict[str, str]], dict[str, Any]]
    ) -> web.Response:
        try:
            body = await _body(request, allowed)
            if self.auth is not None:
                async with self.controller.lock:
                    access, agent_only = self._access(request.path, body)
                await self._authorize(request, access, agent_only=agent_only)
            async with self.controller.lock:
                result = act(body)
        except (_RequestRefused, Refused) as exc:
            return _error(exc.status, str(exc))
        except ops.EgressOpError as exc:
            return _error(_STATUS[exc.kind], exc.message)
        except StoreRefused as exc:
            return _error(409, str(exc))
        except NotReady as exc:
            return _error(503, str(exc))
        except OSError as exc:
            return _error(500, f"cannot write the broker: {exc}")
        self.controller.mark_dirty("api")
        return web.json_response(result)

    async def vip(self, request: web.Request) -> web.Response:
        def act(body: dict[str, str]) -> dict[str, Any]:
            action = body.get("action", "")
            vip = body.get("vip", "")
            if action == "notify":
                if "namespace" in body or "service" in body:
                    raise _RequestRefused(400, "notify takes only vip")
                return _doc(self.controller.notify(vip))
            if not action:
                raise _RequestRefused(400, "action: required (bind, unbind or notify)")
            if action not in ("bind", "unbind"):
                raise _RequestRefused(400, f"action: {action!r} is not bind, unbind or notify")
            return _doc(self.controller.change_binding(action, vip, body.get("namespace", ""), body.get("service", "")))

        return await self._guarded(request, _VIP_FIELDS, act)

    async def master_notify(self, request: web.Request) -> web.Response:
        def act(body: dict[str, str]) -> dict[str, Any]:
            node = self._node(body)
            try:
                state = ops.VrrpState(body.get("state", "MASTER"))
            except ValueError:
                raise _RequestRefused(400, f"state: {body['state']!r} is not MASTER, BACKUP, FAULT or STOP") from None
            report = ops.HolderReport(vip=body.get("vip", ""), node=node, state=state)
            return _doc(self.controller.report(report))

        return await self._guarded(request, _NOTIFY_FIELDS, act)

    def _node(self, body: dict[str, str]) -> str:
        if ("node" in body) == ("node_ip" in body):
            raise _RequestRefused(400, "give exactly one of node and node_ip")
        if "node" in body:
            return body["node"]
        try:
            address = IPv4Address(body["node_ip"])
        except (AddressValueError, ValueError):
            raise _RequestRefused(400, f"node_ip: {body['node_ip']!r} is not an IPv4 address") from None
        for node in self.controller.fresh().nodes:
            if node.ip == address:
                return node.name
        raise _RequestRefused(404, f"no node of cluster {self.controller.cluster} has address {address}")

    async def list_vips(self, request: web.Request) -> web.Response:
        try:
            await self._authorize(request, Access("list", self.vip_namespace))
            async with self.controller.lock:
                egress = self.controller.fresh().egressgw
        except Refused as exc:
            return _error(exc.status, str(exc))
        except NotReady as exc:
            return _error(503, str(exc))
        out = [_doc(Answer(vip=v, status=egress.status_of(v.name) or EgressVIPStatus())) for v in egress.vips]
        return web.json_response({"vips": out})

    async def show_vip(self, request: web.Request) -> web.Response:
        try:
            await self._authorize(request, Access("get", self.vip_namespace, request.match_info["name"]))
            async with self.controller.lock:
                egress = self.controller.fresh().egressgw
            vip = ops.find_vip(egress, request.match_info["name"])
        except Refused as exc:
            return _error(exc.status, str(exc))
        except NotReady as exc:
            return _error(503, str(exc))
        except ops.EgressOpError as exc:
            return _error(_STATUS[exc.kind], exc.message)
        return web.json_response(_doc(Answer(vip=vip, status=egress.status_of(vip.name) or EgressVIPStatus())))


async def serve(
    controller: EgressController,
    *,
    socket_path: str | os.PathLike[str] | None = None,
    host: str = "",
    port: int = 0,
    auth: KubeAuth | None = None,
    vip_namespace: str = "",
    ssl_context: ssl.SSLContext | None = None,
    socket_mode: int = 0o600,
    socket_group: int | None = None,
) -> tuple[web.AppRunner, str]:
    """Start the API on a unix socket (made ``socket_mode``, group ``socket_group``) or on HOST:PORT (port 0: any;
    TLS with ``ssl_context``); returns the runner (``cleanup()`` it) and the URL it serves (``unix:PATH``,
    ``http://HOST:PORT`` or ``https://HOST:PORT``)."""
    api = EgressApi(controller, auth, vip_namespace)
    runner = web.AppRunner(api.app(), handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        if socket_path is not None:
            path = os.fspath(socket_path)
            old = os.umask(0o177)  # no moment where the socket is wider than asked
            try:
                await web.UnixSite(runner, path).start()
            finally:
                os.umask(old)
            if socket_group is not None:
                os.chown(path, -1, socket_group)
            os.chmod(path, socket_mode)
            return runner, f"unix:{path}"
        site = web.TCPSite(runner, host or "127.0.0.1", port, ssl_context=ssl_context)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or ()
        bound = sockets[0].getsockname()[1] if sockets else port
        scheme = "https" if ssl_context is not None else "http"
        return runner, f"{scheme}://{host or '127.0.0.1'}:{bound}"
    except BaseException:
        await runner.cleanup()
        raise
