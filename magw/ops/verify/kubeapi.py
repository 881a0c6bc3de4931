"""The few API calls ``magw verify --kubeconfig`` makes, over the daemons' client (``magw.sources.kube.client``):
raw REST paths, JSON in and out, every failure one ``KubeCallError`` line with the method, path and status.
``request`` is the raw call itself, also ``magw gather --kubeconfig``'s."""

from __future__ import annotations

import json
from typing import Any

TIMEOUT = 10.0


class KubeCallError(RuntimeError):
    """One API call failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


async def request(client: Any, method: str, path: str, body: Any = None, *, query: list[tuple[str, str]],
                  timeout: float) -> tuple[int, bytes]:  # fmt: skip
    """One raw call through a kubernetes-asyncio ``ApiClient`` (its kubeconfig's credentials): the status and the
    body, whatever the status; a failure to get an answer raises what the client raised."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    response = await client.call_api(
        path, method, query_params=query, header_params=headers, body=body, auth_settings=["BearerToken"],
        _preload_content=False, _request_timeout=timeout,
    )  # fmt: skip
    response = response[0] if isinstance(response, tuple) else response
    try:
        return int(response.status), bytes(await response.read())
    finally:
        response.release()


class Api:
    """One cluster's API server, through the kubeconfig ``path``."""

    def __init__(self, client: Any, path: str) -> None:
        self.client = client
        self.path = path

    @classmethod
    async def open(cls, path: str) -> Api:
        from magw.sources.kube.client import api_client  # kubernetes-asyncio: only for this mode

        return cls(await api_client(path), path)

    async def close(self) -> None:
        await self.client.close()

    async def call(self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None,
                   timeout: float = TIMEOUT) -> bytes:  # fmt: skip
        try:
            status, raw = await request(self.client, method, path, body, query=list((query or {}).items()),
                                        timeout=timeout)  # fmt: skip
        except Exception as exc:  # the client raises ApiException, aiohttp's and OS errors: one line each
            status = int(getattr(exc, "status", 0) or 0)
            reason = getattr(exc, "reason", None) or " ".join(str(exc).split()) or type(exc).__name__
            raise KubeCallError(f"{method} {path}: {status or ''} {reason}".replace("  ", " "), status) from None
        if status >= 400:
            raise KubeCallError(f"{method} {path}: {status} {_message(raw)}", status)
        return raw

    async def json(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        raw = await self.call(method, path, body)
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            raise KubeCallError(f"{method} {path}: the answer is not JSON") from None
        return doc if isinstance(doc, dict) else {}


def _message(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:200].strip()
    return str(doc.get("message", "")) if isinstance(doc, dict) else ""
