"""The real ``magw-globalnet`` process: SIGKILLed at random moments during a burst of changes and restarted,
the invariants hold once it converges; a second replica waits on the lease and takes over after the first
is killed and its lease expires. Bounded in time and count; every process is ours and ended by PID."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.globalnet_broker import check_files, gateway, make_broker, put, remove, statuses

LEASE = "1.0"


def start(directory: Path, identity: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "magw.daemons.globalnet.main",
            "--broker-dir",
            str(directory),
            "--cluster",
            "east",
            "--identity",
            identity,
            "--lease-duration",
            LEASE,
            "--poll-interval",
            "0.02",
            "--resync",
            "0.5",
            "--log-format",
            "json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> bytes:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    return err


def wait_for(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (AssertionError, OSError, KeyError) as exc:
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"not reached in {timeout} s (last error: {last})")


def converged(directory: Path, wanted: set[str]) -> bool:
    """Every wanted GlobalEgressIP has a Success status and the files hold the invariants."""
    check_files(directory)
    st = statuses(directory)
    names = {k[2] for k in st if k[0] == "GlobalEgressIP"}
    if names != wanted:
        return False
    return all(
        any(c["type"] == "Allocated" and c["reason"] in ("Success", "IPPoolAllocationFailed") for c in d["conditions"])
        for k, d in st.items()
        if k[0] == "GlobalEgressIP"
    )


def test_sigkill_during_a_burst_then_restart(tmp_path: Path) -> None:
    rng = random.Random(11)
    d = make_broker(tmp_path / "broker")
    gateway(d, "gw1", 6)
    gateway(d, "gw2", 7)
    wanted: set[str] = set()
    proc = start(d, "a")
    procs = [proc]
    try:
        for round_ in range(6):
            for _ in range(12):  # a burst of changes
                name = f"e{rng.randrange(10)}"
                if name in wanted and rng.random() < 0.4:
                    remove(d, name)
                    wanted.discard(name)
                else:
                    put(
                        d, name, "GlobalEgressIP", {"namespace": "ns", "name": name, "numberOfIPs": rng.randrange(1, 4)}
                    )
                    wanted.add(name)
                time.sleep(rng.uniform(0, 0.03))
            time.sleep(rng.uniform(0.05, 0.4))
            os.kill(proc.pid, signal.SIGKILL)  # at a random moment of the burst's processing
            proc.wait(timeout=10)
            before = {k: v.get("allocatedIPs") or v.get("allocatedIP") for k, v in statuses(d).items()}
            proc = start(d, f"a{round_}")  # its lease: same file, new identity; waits for expiry
            procs.append(proc)
            wait_for(lambda: converged(d, set(wanted)), timeout=30)
            after = {k: v.get("allocatedIPs") or v.get("allocatedIP") for k, v in statuses(d).items()}
            for key, ips in before.items():
                if key in after and ips and after[key] and key[0] != "GlobalEgressIP":
                    assert after[key] == ips, f"{key} changed across the restart"
    finally:
        for p in procs:
            stop(p, signal.SIGKILL)
    check_files(d)


def test_second_replica_waits_then_takes_over(tmp_path: Path) -> None:
    d = make_broker(tmp_path / "broker")
    gateway(d, "gw1", 6)
    first = start(d, "first")
    second = None
    try:
        wait_for(lambda: ("ClusterGlobalEgressIP", "", "gw1-cluster-egress.submariner.io") in statuses(d))
        second = start(d, "second")
        time.sleep(1.5)
        put(d, "late", "GlobalEgressIP", {"namespace": "ns", "name": "late"})
        wait_for(lambda: ("GlobalEgressIP", "ns", "late") in statuses(d))
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        put(d, "after", "GlobalEgressIP", {"namespace": "ns", "name": "after"})
        wait_for(lambda: ("GlobalEgressIP", "ns", "after") in statuses(d), timeout=20)
        err = stop(second).decode()
        assert "globalnet.lease_waiting" in err and "globalnet.lease_acquired" in err, err[-2000:]
        assert "globalnet.lease_released" in err
        second = None
        check_files(d)
    finally:
        stop(first, signal.SIGKILL)
        if second is not None:
            stop(second, signal.SIGKILL)
