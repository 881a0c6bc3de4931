"""Kernel test: ``python -m magw.ops.verify.nodetrace`` (the tracer ``magw verify --kubeconfig`` runs on every
node) in a fresh namespace: it loads its table, reports the client ports of the traced range it saw entering the
namespace (requests by source port, replies by destination port, nothing outside the range), and removes the table
at its deadline and on SIGTERM (a deleted pod)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from magw.drivers.netns import run_in_netns
from magw.lab.build import netns
from magw.ops.verify import hops
from tests.support.subproc import finish

pytestmark = pytest.mark.kernel
TABLE = "magw_verify_t1"


def _start(ns: str, *args: str) -> subprocess.Popen[str]:
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "magw.ops.verify.nodetrace", "--table", TABLE, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_table(ns: str, present: bool, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while (TABLE in netns.ns_exec(ns, "nft", "list", "tables")) != present:
        assert time.monotonic() < deadline, f"table {TABLE} {'never loaded' if present else 'left behind'}"
        time.sleep(0.05)


def _send(ns: str, sport: int, dport: int) -> None:
    def send() -> None:
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", sport))
            s.sendto(b"x", ("127.0.0.1", dport))

    run_in_netns(ns, send)


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_it_reports_the_traced_ports_and_removes_its_table_at_the_deadline(ns: str) -> None:
    netns.ns_exec(ns, "ip", "link", "set", "lo", "up")
    proc = _start(ns, "--seconds", "3", "--every", "0.1")
    try:
        _wait_table(ns, True)
        _send(ns, hops.PORT_LO + 5, 9)  # a request of flow LO+5
        _send(ns, 9, hops.PORT_LO + 7)  # a reply to flow LO+7
        _send(ns, 40000, 40001)  # outside the range: neither
    finally:
        out, err = finish(proc)
    assert proc.returncode == 0, err
    lines = _lines(out)
    assert lines[0] == {"event": "tracing", "table": TABLE} and lines[-1] == {"event": "done"}
    seen = [d for d in lines if d["event"] == "seen"]
    assert {k: v for k, v in seen[-1].items() if k != "at"} == {"event": "seen", "req": [hops.PORT_LO + 5],
                                                               "rep": [hops.PORT_LO + 7]}  # fmt: skip
    assert all(isinstance(d["at"], float) for d in seen)
    _wait_table(ns, False, limit=0.5)


def test_sigterm_removes_the_table(ns: str) -> None:
    proc = _start(ns, "--seconds", "60")
    try:
        _wait_table(ns, True)
        proc.send_signal(signal.SIGTERM)
    finally:
        out, err = finish(proc)
    assert proc.returncode == 0, err
    assert _lines(out)[-1] == {"event": "done"}
    _wait_table(ns, False, limit=0.5)
