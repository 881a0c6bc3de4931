"""``GET /api/v1/namespaces/<ns>/pods/<name>/log``: a container's log, from the files a lab kubelet writes.

A real API server asks the kubelet of the pod's node for the log. The emulator has no kubelet to ask: the lab's
(``magw.lab.kubelet``) writes each container's output to ``<dir>/<namespace>_<pod>_<uid>/<container>.log``, as a
kubelet keeps ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log``, and ``--pod-logs DIR`` tells the
emulator where that is. The uid keeps an earlier pod of the same name from answering for a new one.

What a real server answers, for what kubectl and clients use (``kubectl logs``): ``container`` (required when
the pod has several), ``tailLines``, ``limitBytes``, ``follow`` (the log as it grows, until the container ended
or the pod is gone, at most ``FOLLOW_LIMIT`` seconds). A pod that does not exist is 404; a container that has not
started yet is 400 ("is waiting to start"), as on a real cluster; ``previous`` is 400 (no restarts are kept).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from magw.kubeemu.errors import bad_request

FOLLOW_POLL = 0.2  # seconds between reads of a followed log
FOLLOW_LIMIT = 3600.0  # a followed log is served at most this long
TERMINAL = ("Succeeded", "Failed")


def log_path(root: Path, pod: dict[str, Any], container: str) -> Path:
    meta = pod["metadata"]
    return root / f"{meta['namespace']}_{meta['name']}_{meta.get('uid', '')}" / f"{container}.log"


def _container(pod: dict[str, Any], query: dict[str, str]) -> str:
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)]
    wanted = query.get("container")
    name = pod["metadata"]["name"]
    if wanted is None:
        if len(names) == 1:
            return names[0]
        raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]")
    if wanted not in names:
        raise bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def _int(query: dict[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{key}: {raw!r} is not an integer") from None
    if value < 0 or (key == "limitBytes" and value == 0):
        raise bad_request(f"{key}: must be {'greater than 0' if key == 'limitBytes' else 'non-negative'}")
    return value


def _shape(data: bytes, tail: int | None, limit: int | None) -> bytes:
    if tail is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[-tail:]) if tail else b""
    return data[:limit] if limit is not None else data


async def serve(request: web.Request, root: Path | None, pod: dict[str, Any], current: Any) -> web.StreamResponse:
    """The log of ``pod``'s container (``current()``: the pod as stored now, or None once deleted)."""
    query = dict(request.query)
    container = _container(pod, query)
    if query.get("previous", "").lower() in ("true", "1"):
        raise bad_request(f'previous terminated container "{container}" in pod "{pod["metadata"]["name"]}" not found')
    tail, limit = _int(query, "tailLines"), _int(query, "limitBytes")
    path = log_path(root, pod, container) if root is not None else None
    if path is None or not path.is_file():
        raise bad_request(
            f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to start: ContainerCreating'
        )
    raw = path.read_bytes()
    data = _shape(raw, tail, limit)
    if query.get("follow", "").lower() not in ("true", "1"):
        return web.Response(body=data, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(data)
    offset, sent = len(raw), len(data)  # what was read, not the size now: a write meanwhile comes next
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FOLLOW_LIMIT
    while loop.time() < deadline and (limit is None or sent < limit):
        await asyncio.sleep(FOLLOW_POLL)
        now = current()
        ended = now is None or ((now.get("status") or {}).get("phase") in TERMINAL)
        try:
            with path.open("rb") as f:
                f.seek(offset)
                more = f.read() if limit is None else f.read(limit - sent)
        except OSError:  # the pod was deleted and its log with it
            break
        if more:
            offset += len(more)
            sent += len(more)
            await response.write(more)
        if ended and not more:
            break
    await response.write_eof()
    return response
