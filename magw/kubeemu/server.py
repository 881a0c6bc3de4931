"""``Emulator``: the API server emulator as an object tests and the lab start, fault, stop and start again.

It serves on a unix socket (tests: nothing listens on the host's network), on HOST:PORT (the lab runs it
inside a lab network namespace), or on both (the lab: the daemons use the socket, kubectl, which cannot speak to
a unix socket, uses 127.0.0.1 of the namespace: ``magw lab kubectl``). The state (the store: objects,
resourceVersion counter, history) lives in the object, not in the server, so ``stop()`` then ``start()`` is a
server restart that keeps etcd: open watches end, clients reconnect and continue from their resourceVersion.

Fault API (see docs/kubeemu.md): ``compact()``, ``drop_watches()``, ``delay(seconds)``,
``fail_requests(n, code)``, ``bookmark_interval``, ``stop()``/``start()``. ``stop()`` ends every watch (cleanly;
after a grace period abruptly), closes every connection and leaves no task behind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Network
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from magw.kubeemu.errors import status_object
from magw.kubeemu.faults import Faults
from magw.kubeemu.handlers import Api
from magw.kubeemu.rbac import RBAC, Authorizer, UserInfo, subject_access_review, token_review
from magw.kubeemu.resources import DEFAULT_TYPES, Registry, ResourceType, from_crd
from magw.kubeemu.store import Store
from magw.kubeemu.watch import WatchHub


class Emulator:
    def __init__(
        self,
        *,
        socket_path: str | os.PathLike[str] | None = None,
        host: str | None = None,
        port: int = 0,
        types: Iterable[ResourceType] = DEFAULT_TYPES,
        bookmark_interval: float = 60.0,
        history_limit: int = 100_000,
        tokens: Mapping[str, UserInfo] | None = None,
        pod_logs: str | os.PathLike[str] | None = None,
        service_ips: IPv4Network | None = None,
    ) -> None:
        if socket_path is None and host is None:
            raise ValueError("Emulator: give socket_path, host or both")
        self.socket_path = os.fspath(socket_path) if socket_path is not None else None
        self.host = host
        self.port = port
        self.store = Store(Registry(types), history_limit=history_limit)
        self.hub = WatchHub(self.store, bookmark_interval=bookmark_interval)
        self.faults = Faults()
        # TokenReview and SubjectAccessReview (magw.kubeemu.rbac): served, with the RBAC kinds, when given tokens.
        self.tokens: dict[str, UserInfo] | None = dict(tokens) if tokens is not None else None
        if self.tokens is not None:
            for rt in RBAC:
                if self.store.registry.find(rt.group, rt.version, rt.plural) is None:
                    self.store.registry.add(rt)
        # Pods' logs: the files a lab kubelet writes there (magw.kubeemu.podlogs); None: every log "waiting".
        self.pod_logs = Path(pod_logs) if pod_logs is not None else None
        self.service_ips = service_ips  # ClusterIPs for Services created without one; None: none given
        self._runner: web.AppRunner | None = None

    # --- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def url(self) -> str:
        """The ``server`` of a kubeconfig for this emulator (``unix:///abs.sock``, else ``http://host:port``)."""
        if self.socket_path is not None:
            return "unix://" + os.path.abspath(self.socket_path)
        return self.tcp_url

    @property
    def tcp_url(self) -> str:
        """``http://host:port`` (once started, with the port it bound for port 0); "" without a TCP listener."""
        return f"http://{self.host}:{self.port}" if self.host is not None else ""

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(middlewares=[self.faults.middleware], client_max_size=16 * 2**20)
        if self.tokens is not None:
            app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review)
            app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._access_review)
        api = Api(self.store, self.hub, pod_logs=self.pod_logs, service_ips=self.service_ips)
        app.router.add_route("*", "/{tail:.*}", api.handle)
        runner = web.AppRunner(
            app, handle_signals=False, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        try:
            if self.socket_path is not None:
                site: web.BaseSite = web.UnixSite(runner, self.socket_path)
                await site.start()
            if self.host is not None:
                tcp = web.TCPSite(runner, self.host, self.port, reuse_address=True)
                await tcp.start()
                sockets = getattr(tcp._server, "sockets", None) or ()
                if self.port == 0 and sockets:
                    self.port = int(sockets[0].getsockname()[1])
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def _review_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return web.json_response(status_object(400, "BadRequest", "the body is not a JSON object"), status=400)
        return body

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await self._review_body(request)
        if isinstance(body, web.Response):
            return body
        return web.json_response(token_review(self.tokens or {}, body), status=201)

    async def _access_review(self, request: web.Request) -> web.Response:
        body = await self._review_body(request)
        if isinstance(body, web.Response):
            return body
        return web.json_response(subject_access_review(Authorizer(self.store.objects), body), status=201)

    async def stop(self) -> None:
        """Stop serving, keeping the state: watches end, connections close, the socket file goes away."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        # As aiohttp's own cleanup does, but with the watches ended in between: no new connections, no new
        # requests on open ones (a client's re-watch fails to connect, as against a server that is down), then
        # every watch ends cleanly, and only a watch that does not end in time is cut.
        for site in list(runner.sites):
            await site.stop()
        if runner.server is not None:
            runner.server.pre_shutdown()
        self.hub.finish()
        if not await self.hub.wait_idle(1.0):
            self.hub.drop()
            await self.hub.wait_idle(1.0)
        await runner.cleanup()
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)

    async def __aenter__(self) -> Emulator:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # --- types and state ---------------------------------------------------------------------------------------

    def add_crd(self, doc: Mapping[str, Any]) -> tuple[ResourceType, ...]:
        """Serve the kinds of a CRD manifest (as a dict) from now on."""
        types = from_crd(doc)
        for rt in types:
            self.store.registry.add(rt)
        return types

    def load(self, objects: Iterable[Mapping[str, Any]]) -> int:
        """Put objects in as they are, status included (see ``Store.load``); watchers see them as ADDED."""
        return self.store.load(objects)

    # --- faults ------------------------------------------------------------------------------------------------

    @property
    def bookmark_interval(self) -> float:
        return self.hub.bookmark_interval

    @bookmark_interval.setter
    def bookmark_interval(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("bookmark_interval must be positive")
        self.hub.bookmark_interval = seconds

    def compact(self) -> int:
        """Forget the history before now: a watch or list from an older resourceVersion gets 410 Expired."""
        return self.store.compact()

    def drop_watches(self) -> int:
        """Close every open watch connection abruptly (no final chunk); returns how many were open."""
        return self.hub.drop()

    def delay(self, seconds: float) -> None:
        """Delay every response by ``seconds`` from now on (0 turns it off)."""
        if seconds < 0:
            raise ValueError("delay must be >= 0")
        self.faults.delay = seconds

    def fail_requests(self, n: int, code: int = 500) -> None:
        """Answer the next ``n`` requests with an error Status of ``code`` instead of serving them."""
        self.faults.fail(n, code)

    @property
    def watch_count(self) -> int:
        return len(self.hub.active)
