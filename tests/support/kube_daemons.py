"""A daemon with ``--source kube`` as a process of the test's event loop, against the API server emulator."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

from tests.support import kube_objects as ko
from tests.support.kubeemu_fixtures import KubeEnv


@contextlib.asynccontextmanager
async def daemon(env: KubeEnv, program: str, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """Daemon ``program`` (a module with ``main``) with ``--source kube`` against ``env``'s emulator, its output in
    a log file of ``env.directory`` (printed at the end with MAGW_SHOW_DAEMON_LOGS=1); SIGTERM, then SIGKILL."""
    log = env.directory / f"{program}-{len(list(env.directory.glob('*.log')))}.log"
    with open(log, "wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            f"import sys; from {program} import main; sys.exit(main())",
            "--source",
            "kube",
            "--kubeconfig",
            str(env.kubeconfig),
            "--namespace",
            ko.NS,
            *args,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if os.environ.get("MAGW_SHOW_DAEMON_LOGS"):
            print(log.read_text())
