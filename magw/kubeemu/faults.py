"""Request-level faults for fault tests: slow responses, failing requests, and a log of what clients asked.

One aiohttp middleware in front of every handler. ``delay`` holds each request that long before it is served
(a slow or overloaded API server; a watch's stream starts late too). ``fail(n, code)`` answers the next ``n``
requests with an error Status of that code instead of serving them (429 comes with ``Retry-After: 1``, as API
Priority and Fairness sends it). ``log`` keeps the last requests as (method, path with query), bounded, so a
test can tell that a client re-listed after a 410 or did not hammer the server.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from aiohttp import web

from magw.kubeemu.errors import status_object

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class Faults:
    def __init__(self, log_size: int = 10_000) -> None:
        self.delay = 0.0
        self.failures = 0
        self.failure_code = 500
        self.log: deque[tuple[str, str]] = deque(maxlen=log_size)

    def fail(self, n: int, code: int = 500) -> None:
        if n < 0 or not 400 <= code <= 599:
            raise ValueError(f"fail({n}, {code}): n must be >= 0 and code an HTTP error status")
        self.failures, self.failure_code = n, code

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.log.append((request.method, request.path_qs))
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        if self.failures > 0:
            self.failures -= 1
            code = self.failure_code
            reason = REASONS.get(code, "InternalError")
            body = status_object(code, reason, f"injected fault: {code} {reason}")
            headers = {"Retry-After": "1"} if code == 429 else None
            return web.json_response(body, status=code, headers=headers)
        return await handler(request)
