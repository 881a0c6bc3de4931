"""``magw.lab.payload.tcpkeep`` in two real namespaces: connections that survive a short outage (TCP retransmits; the
gap
shows it) and connections that do not (a reset, a stall)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.netns import VethPair, can_use_netns, run

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces")]

PORT = "9100"


@pytest.fixture
def pair(veth_pair: VethPair) -> Iterator[tuple[str, str]]:
    """(client, server) namespaces joined by a veth: 10.9.0.1 and 10.9.0.2, a tcpkeep server on the latter."""
    a, b = veth_pair.a, veth_pair.b
    run(a, "ip", "addr", "add", "10.9.0.1/24", "dev", veth_pair.a_dev)
    run(b, "ip", "addr", "add", "10.9.0.2/24", "dev", veth_pair.b_dev)
    server = subprocess.Popen(
        ["ip", "netns", "exec", b, sys.executable, "-m", "magw.lab.payload.tcpkeep", "serve", "--port", PORT,
         "--max-seconds", "60"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and "tcpkeep.serving" in server.stdout.readline()
        yield a, b
    finally:
        server.terminate()
        server.wait(timeout=10)


def _hold(ns: str, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "magw.lab.payload.tcpkeep", "hold", "--target", f"10.9.0.2:{PORT}", *args]
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=60)
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_every_connection_survives_and_sees_the_client_address(pair: tuple[str, str]) -> None:
    a, _ = pair
    doc = _result(_hold(a, "--conns", "4", "--duration", "0.5", "--interval", "0.02"))
    assert doc["established"] == 4 and doc["survived"] == 4
    assert {c["seen_ip"] for c in doc["connections"]} == {"10.9.0.1"}
    assert all(c["echoed"] == c["sent"] > 0 for c in doc["connections"])


def test_a_short_outage_is_a_gap_not_a_break(pair: tuple[str, str]) -> None:
    a, _ = pair
    proc = _hold(a, "--conns", "3", "--duration", "3", "--interval", "0.02", "--timeout", "5")
    time.sleep(1.0)
    run(a, "ip", "link", "set", "v0", "down")
    time.sleep(0.5)
    run(a, "ip", "link", "set", "v0", "up")
    doc = _result(proc)
    assert doc["survived"] == 3, doc
    assert doc["max_gap_ms"] >= 400  # the half-second outage shows as a gap in every connection's echoes


def test_a_longer_outage_than_the_timeout_breaks_the_connections(pair: tuple[str, str]) -> None:
    a, _ = pair
    proc = _hold(a, "--conns", "2", "--duration", "3", "--interval", "0.02", "--timeout", "0.5")
    time.sleep(0.8)
    run(a, "ip", "link", "set", "v0", "down")
    doc = _result(proc)
    assert doc["established"] == 2 and doc["survived"] == 0
    assert all("stalled" in c["error"] for c in doc["connections"])


def test_nothing_listening_is_a_connect_error(pair: tuple[str, str]) -> None:
    a, _ = pair
    argv = [sys.executable, "-m", "magw.lab.payload.tcpkeep", "hold", "--target", "10.9.0.2:9199", "--conns", "2",
            "--duration", "0.2"]  # fmt: skip
    doc = json.loads(run(a, *argv).stdout)
    assert doc["established"] == 0 and doc["survived"] == 0
    assert all(c["error"].startswith("connect:") for c in doc["connections"])


def test_hold_works_against_the_lab_echo_server_and_a_probe_still_gets_one_reply(pair: tuple[str, str]) -> None:
    a, b = pair
    echo = subprocess.Popen(
        ["ip", "netns", "exec", b, sys.executable, "-m", "magw.lab.payload.traffic", "serve", "--name", "b",
         "--port", "9200",
         "--max-seconds", "60"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert echo.stdout is not None and "traffic.serving" in echo.stdout.readline()
        argv = [sys.executable, "-m", "magw.lab.payload.tcpkeep", "hold", "--target", "10.9.0.2:9200", "--conns", "3",
                "--duration", "0.5"]  # fmt: skip
        doc = json.loads(run(a, *argv).stdout)
        assert doc["survived"] == 3 and {c["seen_ip"] for c in doc["connections"]} == {"10.9.0.1"}
        assert all(c["echoed"] == c["sent"] > 1 for c in doc["connections"])  # many lines on one connection
        probe = run(
            a, sys.executable, "-m", "magw.lab.payload.traffic", "probe", "--target", "tcp:10.9.0.2:9200"
        ).stdout
        assert json.loads(probe)["ok"] is True and json.loads(probe)["server"] == "b"
    finally:
        echo.terminate()
        echo.wait(timeout=10)


def test_push_mode_the_echo_server_speaks_unasked(pair: tuple[str, str]) -> None:
    """--push: the client asks once, the lab's echo server then sends a line every interval; a cut longer than
    the timeout shows as a stall of the reader, not of a sender."""
    a, b = pair
    echo = subprocess.Popen(
        ["ip", "netns", "exec", b, sys.executable, "-m", "magw.lab.payload.traffic", "serve", "--name", "b",
         "--port", "9201",
         "--max-seconds", "60"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert echo.stdout is not None and "traffic.serving" in echo.stdout.readline()
        base = [sys.executable, "-m", "magw.lab.payload.tcpkeep", "hold", "--target", "10.9.0.2:9201", "--push",
                "--interval", "0.02"]  # fmt: skip
        doc = json.loads(run(a, *base, "--conns", "2", "--duration", "1").stdout)
        assert doc["survived"] == 2
        assert all(c["sent"] == 1 and c["echoed"] >= 20 for c in doc["connections"]), doc  # ~50 in 1 s
        argv = ["ip", "netns", "exec", a, *base, "--conns", "2", "--duration", "3", "--timeout", "0.5"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        time.sleep(0.8)
        run(a, "ip", "link", "set", "v0", "down")
        cut = _result(proc)
        assert cut["survived"] == 0 and all("stalled" in c["error"] for c in cut["connections"])
        # Cut for less than the stall timeout but through the run's end: silent at the end is not surviving.
        run(a, "ip", "link", "set", "v0", "up")
        argv = ["ip", "netns", "exec", a, *base, "--conns", "2", "--duration", "2.5", "--timeout", "10"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        time.sleep(0.8)
        run(a, "ip", "link", "set", "v0", "down")
        late = _result(proc)
        assert late["survived"] == 0 and all("silent for the last" in c["error"] for c in late["connections"]), late
    finally:
        echo.terminate()
        echo.wait(timeout=10)
