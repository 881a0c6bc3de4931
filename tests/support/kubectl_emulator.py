"""The real kubectl (``.venv/bin/kubectl``) against an API server emulator on a thread, for unit tests.

kubectl cannot speak to a unix socket, and nothing may listen on the host's network: the emulator's event loop
runs on a thread moved into a throwaway network namespace (``setns`` of that thread only), where it serves on
127.0.0.1; kubectl runs there with ``ip netns exec``. The emulator serves the kinds of ``deploy/crds`` from the
manifests (printer columns, schemas). ``read(fn)`` runs ``fn(emulator)`` on the emulator's loop, so a test reads
the state the server holds, not what kubectl printed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from magw.kubeemu import Emulator
from tests.support.netns import netns

CLONE_NEWNET = 0x40000000
KUBECTL = Path(sys.executable).parent / "kubectl"
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
_T = TypeVar("_T")


def crd_docs() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(CRDS.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    return docs


class KubectlEmulator:
    def __init__(self, ns: str, emulator: Emulator, loop: asyncio.AbstractEventLoop, directory: Path) -> None:
        self.ns, self.emulator, self.loop, self.directory = ns, emulator, loop, directory
        self.kubeconfig = directory / "kubeconfig"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "emu", "cluster": {"server": emulator.url}}],
                    "users": [{"name": "u", "user": {}}],
                    "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "u", "namespace": "default"}}],
                    "current-context": "emu",
                }
            ),
            encoding="utf-8",
        )

    def argv(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, str(KUBECTL), "--kubeconfig", str(self.kubeconfig),
                "--cache-dir", str(self.directory / "cache"), *args]  # fmt: skip

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """kubectl ARGS; with ``check``, a failure is an AssertionError with kubectl's stderr."""
        proc = subprocess.run(self.argv(*args), input=stdin, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: rc {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def start(self, *args: str) -> subprocess.Popen[str]:
        """kubectl ARGS in the background (``wait``, ``get -w``); the caller ends it (``finish``)."""
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read(self, fn: Callable[[Emulator], _T]) -> _T:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(fn(self.emulator))
            except BaseException as err:  # handed to the test thread
                future.set_exception(err)

        self.loop.call_soon_threadsafe(call)
        return future.result(10)


def finish(proc: subprocess.Popen[str], timeout: float = 30.0) -> tuple[int, str, str]:
    """Wait for a background kubectl (killing it, by its PID, after ``timeout``): (rc, stdout, stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
    return proc.returncode, out, err


def _enter(ns: str) -> None:
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)


@contextlib.contextmanager
def kubectl_emulator(crds: Sequence[dict[str, Any]] | None = None) -> Iterator[KubectlEmulator]:
    """A namespace, the emulator serving on 127.0.0.1 inside it (with ``crds``, default deploy/crds), kubectl."""
    with netns("magwt-kctl") as ns:
        loop = asyncio.new_event_loop()
        entered: concurrent.futures.Future[None] = concurrent.futures.Future()

        def thread() -> None:
            try:
                _enter(ns)
            except OSError as err:
                entered.set_exception(err)
                return
            entered.set_result(None)
            loop.run_forever()

        worker = threading.Thread(target=thread, name=f"kubeemu-{ns}", daemon=True)
        worker.start()
        entered.result(10)
        directory = Path(tempfile.mkdtemp(prefix="kctl-"))
        emulator = Emulator(host="127.0.0.1", port=0)
        for doc in crd_docs() if crds is None else crds:
            emulator.add_crd(doc)
        try:
            asyncio.run_coroutine_threadsafe(emulator.start(), loop).result(10)
            yield KubectlEmulator(ns, emulator, loop, directory)
        finally:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(emulator.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            worker.join(5)
            loop.close()
            shutil.rmtree(directory, ignore_errors=True)
