"""What both daemons do around their work: signals, the metrics endpoint, atomic status files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, start_http_server

log = structlog.get_logger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def start_metrics(port: int, *, registry: CollectorRegistry, address: str = "127.0.0.1") -> None:
    """Serve ``registry`` as ``/metrics`` on ADDRESS:PORT of the current network namespace (0: off).

    No default registry: the daemons' ``main()`` passes prometheus_client's global ``REGISTRY``, a library
    caller its own.
    """
    if port == 0:
        return
    start_http_server(port, addr=address, registry=registry)
    log.info("metrics.serving", address=address, port=port)


def write_json_atomic(path: str, doc: Any) -> None:
    """Replace ``path`` with ``doc`` as JSON: temp file in the same directory, then rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.write("\n")
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


async def run_until_signalled(daemon: str, work: Callable[[asyncio.Event], Awaitable[int]]) -> int:
    """Run ``work(stop)``; SIGTERM or SIGINT sets ``stop`` (logged as ``<daemon>.signal``). Returns work's code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(sig: signal.Signals) -> None:
        log.info(f"{daemon}.signal", signal=sig.name)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await work(stop)
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
