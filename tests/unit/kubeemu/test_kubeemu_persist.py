"""``python -m magw.kubeemu --persist FILE`` and its signals (magw.kubeemu.persist, docs/kubeemu.md): the state
survives a SIGKILL, a client's old version gets 410 after the restart, SIGUSR1 is a 410 storm, SIGUSR2 drops the
watches, a bad file is one line and exit 1."""

from __future__ import annotations

import asyncio
import json
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiException, CoreV1Api

from magw.sources.kube.client import api_client, write_kubeconfig
from tests.support.paths import REPO


@contextmanager
def _emulator(tmp_path: Path, persist: Path) -> Iterator[subprocess.Popen[bytes]]:
    sock, pidfile = tmp_path / "k.sock", tmp_path / "k.pid"
    pidfile.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "magw.kubeemu", "--socket", str(sock), "--pidfile", str(pidfile)]
    proc = subprocess.Popen([*cmd, "--persist", str(persist)], cwd=REPO, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while not pidfile.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the emulator did not come up"
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _core(tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", "unix://" + str(tmp_path / "k.sock"))


async def _create(kubeconfig: Path, names: list[str]) -> tuple[str, dict[str, str]]:
    """Create namespaces; (the list's resourceVersion, name -> uid)."""
    async with await api_client(kubeconfig) as client:
        api = CoreV1Api(client)
        for name in names:
            await api.create_namespace({"metadata": {"name": name, "labels": {"k": name}}})
        listed = await api.list_namespace()
        return listed.metadata.resource_version, {n.metadata.name: n.metadata.uid for n in listed.items}


async def _state(kubeconfig: Path) -> dict[str, tuple[str, dict[str, str]]]:
    async with await api_client(kubeconfig) as client:
        listed = await CoreV1Api(client).list_namespace()
        return {n.metadata.name: (n.metadata.uid, n.metadata.labels) for n in listed.items}


async def _watch_status(kubeconfig: Path, version: str) -> int:
    """What a watch from ``version`` meets: the code of an ERROR event (as an API server sends 410 Expired), or
    200 when the watch runs (events, or none until its 1 s timeout)."""
    async with await api_client(kubeconfig) as client:
        try:
            resp = await CoreV1Api(client).list_namespace(
                watch=True, resource_version=version, timeout_seconds=1, _preload_content=False
            )
        except ApiException as exc:
            return int(exc.status)
        line = await asyncio.wait_for(resp.content.readline(), timeout=10)
        resp.release()
        event = json.loads(line) if line.strip() else {}
        return int(event["object"]["code"]) if event.get("type") == "ERROR" else 200


def test_the_state_survives_a_sigkill_and_old_versions_get_410(tmp_path: Path) -> None:
    persist = tmp_path / "state.json"
    kubeconfig = _core(tmp_path)
    with _emulator(tmp_path, persist) as proc:
        version, uids = asyncio.run(_create(kubeconfig, ["ns-a", "ns-b"]))
        assert asyncio.run(_watch_status(kubeconfig, version)) == 200
        assert stat.S_IMODE(persist.stat().st_mode) == 0o600
        proc.kill()  # no clean shutdown: what was acknowledged must already be in the file
        proc.wait(10)
    with _emulator(tmp_path, persist) as proc:
        state = asyncio.run(_state(kubeconfig))
        assert {name: state[name][0] for name in ("ns-a", "ns-b")} == {n: uids[n] for n in ("ns-a", "ns-b")}
        assert state["ns-b"][1] == {"k": "ns-b"}
        assert asyncio.run(_watch_status(kubeconfig, version)) == 410  # the history did not survive: list again
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert proc.stderr is not None and b"2 objects restored" in proc.stderr.read()


def test_sigusr1_is_a_410_storm_and_sigusr2_drops_the_watches(tmp_path: Path) -> None:
    kubeconfig = _core(tmp_path)

    async def scenario(proc: subprocess.Popen[bytes]) -> tuple[str, int]:
        version, _ = await _create(kubeconfig, ["ns-a"])
        async with await api_client(kubeconfig) as client:
            api = CoreV1Api(client)
            resp = await api.list_namespace(watch=True, resource_version=version, _preload_content=False)
            proc.send_signal(signal.SIGUSR2)
            ended = "clean"
            try:
                await asyncio.wait_for(resp.content.read(), timeout=10)
            except Exception as exc:  # aiohttp's payload error: the connection was cut, not ended
                ended = type(exc).__name__
            await _create(kubeconfig, ["ns-b"])
            proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(0.5)
        return ended, await _watch_status(kubeconfig, version)

    with _emulator(tmp_path, tmp_path / "state.json") as proc:
        ended, status = asyncio.run(scenario(proc))
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
    assert ended != "TimeoutError", "SIGUSR2 left the watch open"
    assert status == 410
    assert "SIGUSR2: 1 watches dropped" in err and "SIGUSR1: history compacted at" in err


@pytest.mark.parametrize(
    ("content", "says"),
    [("{not json", "not a saved state"), (json.dumps({"items": []}), "format"),
     (json.dumps({"format": "magw.kubeemu/v1", "items": [], "resourceVersion": "7"}), "resourceVersion")],
)  # fmt: skip
def test_a_bad_state_file_is_one_line_and_exit_1(tmp_path: Path, content: str, says: str) -> None:
    persist = tmp_path / "state.json"
    persist.write_text(content)
    cmd = [sys.executable, "-m", "magw.kubeemu", "--socket", str(tmp_path / "k.sock"), "--persist", str(persist)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and str(persist) in proc.stderr
