"""``python -m magw.kubeemu --listen HOST:PORT``, as the lab runs it: inside a network namespace of its own.

TCP servers of the tests listen only inside throwaway namespaces (never on the host's network), so this is a
kernel test: the emulator and a real kubernetes-asyncio client both run in a fresh namespace.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.netns import run
from tests.support.paths import REPO

pytestmark = pytest.mark.kernel


CLIENT = textwrap.dedent(
    """
    import asyncio, sys
    from kubernetes_asyncio import watch
    from kubernetes_asyncio.client import CoordinationV1Api
    from magw.sources.kube.client import api_client, write_kubeconfig

    async def main():
        kubeconfig = write_kubeconfig(sys.argv[1], "http://127.0.0.1:16443", "submariner-operator")
        async with await api_client(kubeconfig) as client:
            leases = CoordinationV1Api(client)
            lease = await leases.create_namespaced_lease("submariner-operator", {"metadata": {"name": "magw-gateway"}})
            stream = watch.Watch()
            async for ev in stream.stream(leases.list_namespaced_lease, "submariner-operator", timeout_seconds=2):
                meta = ev["object"].metadata
                print(ev["type"], meta.name, meta.resource_version == lease.metadata.resource_version)
                break
            await stream.close()

    asyncio.run(main())
    """
)


def test_listen_on_host_port_inside_a_namespace(ns: str, tmp_path: Path) -> None:
    """The emulator serves HTTP on HOST:PORT; a client with an http:// kubeconfig creates and watches a Lease."""
    pidfile = tmp_path / "emu.pid"
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "magw.kubeemu", "--listen", "127.0.0.1:16443"]
    proc = subprocess.Popen([*cmd, "--pidfile", str(pidfile)], cwd=REPO, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not pidfile.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the emulator did not come up"
            time.sleep(0.05)
        out = run(ns, sys.executable, "-c", CLIENT, str(tmp_path / "kubeconfig"))
        assert out.stdout.split() == ["ADDED", "magw-gateway", "True"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert proc.stderr is not None and b"serving on http://127.0.0.1:16443" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
