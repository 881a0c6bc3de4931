"""The failover benchmark's flow tool: loss windows from sequence numbers (pure), and real streams in a namespace."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from magw.lab.payload.losswatch import flow_report, runs_of
from tests.support.paths import REPO

ROOT = str(REPO)


def test_runs_of_groups_consecutive_lost_numbers() -> None:
    assert runs_of([]) == []
    assert runs_of([3, 4, 5, 9, 11, 12]) == [(3, 5), (9, 9), (11, 12)]


def test_window_runs_from_the_first_lost_send_to_the_next_answered_send() -> None:
    """Datagrams every 1 ms; 100-149 lost: the window is 50 ms (send of 100 to send of 150); the tail is 0."""
    ticks = [i / 1000 for i in range(1000)]
    got = bytearray([1]) * 1000
    for seq in range(100, 150):
        got[seq] = 0
    got[500] = 0
    report = flow_report(41000, got, 1000, ticks)
    assert (report["sent"], report["received"], report["lost"], report["lost_tail"]) == (1000, 949, 51, 0)
    assert report["windows_ms"] == [50.0, 1.0]
    assert report["window_starts_s"] == [0.1, 0.5]


def test_a_flow_that_never_came_back_has_a_tail() -> None:
    """The last 300 of 1,000 lost: lost_tail 300, and the window reaches one tick past the last send."""
    ticks = [i / 1000 for i in range(1000)]
    got = bytearray([1]) * 700 + bytearray(300)
    report = flow_report(41000, got, 1000, ticks)
    assert (report["lost"], report["lost_tail"]) == (300, 300)
    assert report["windows_ms"] == [pytest.approx(300.0)]


def test_only_the_datagrams_sent_are_judged() -> None:
    """A starved sender sent 600 of 1,000: the 400 never sent are not losses."""
    ticks = [i / 1000 for i in range(600)]
    report = flow_report(41000, bytearray([1]) * 600 + bytearray(400), 600, ticks)
    assert (report["sent"], report["lost"], report["windows_ms"]) == (600, 0, [])


def _python(ns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", ns, sys.executable, "-m", "magw.lab.payload.losswatch", *args]


@pytest.mark.kernel
def test_stream_through_a_reflector_loses_nothing_and_a_starved_one_stops_on_time(ns: str) -> None:
    """In one namespace (loopback): 4 flows x 200/s for 0.5 s are all echoed. Then 1,024 flows x 20,000/s
    (20 million datagrams/s, far more than any CPU sends) still stop after their 1 s: fewer sent than
    scheduled, and the process ends within seconds, not after the minutes that sending all 20 million takes."""
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    reflector = subprocess.Popen(_python(ns, "reflect", "--port", "9000", "--max-seconds", "60"),
                                 cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert reflector.stdout is not None
        assert json.loads(reflector.stdout.readline())["event"] == "losswatch.reflecting"
        args = ("stream", "--target", "127.0.0.1:9000", "--drain", "0.5")
        ok = subprocess.run(_python(ns, *args, "--flows", "4", "--rate", "200", "--duration", "0.5"),
                            cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        doc = json.loads(ok.stdout)
        assert (doc["scheduled"], doc["sent"]) == (100, 100)
        assert [(f["sport"], f["sent"], f["received"], f["lost"]) for f in doc["flows"]] == [
            (41000 + i, 100, 100, 0) for i in range(4)
        ]
        started = time.monotonic()
        starved = subprocess.run(_python(ns, *args, "--flows", "1024", "--rate", "20000", "--duration", "1",
                                         "--base-port", "42000"),
                                 cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        took = time.monotonic() - started
        doc = json.loads(starved.stdout)
        assert doc["scheduled"] == 20000
        assert 0 < doc["sent"] < doc["scheduled"]
        assert {f["sent"] for f in doc["flows"]} == {doc["sent"]}
        assert took < 20  # generous for a loaded machine (1 s + 0.5 s drain + start-up)
    finally:
        reflector.kill()
        reflector.wait(timeout=10)


@pytest.mark.kernel
def test_the_lab_echo_server_reflects_stream_datagrams_and_still_answers_probes(ns: str) -> None:
    """A losswatch stream against ``magw.lab.payload.traffic serve``: every datagram comes back; a probe to the same
    port still gets its JSON reply naming the server."""
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "magw.lab.payload.traffic", "serve", "--name", "echo",
            "--port", "9300", "--max-seconds", "60"]  # fmt: skip
    server = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "traffic.serving" in server.stdout.readline()
        out = subprocess.run(_python(ns, "stream", "--target", "127.0.0.1:9300", "--flows", "2", "--rate", "100",
                                     "--duration", "0.3", "--drain", "0.5"),
                             cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        doc = json.loads(out.stdout)
        assert [(f["sent"], f["received"], f["lost"]) for f in doc["flows"]] == [(30, 30, 0), (30, 30, 0)]
        probe = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "magw.lab.payload.traffic", "probe",
                                "--target", "udp:127.0.0.1:9300"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        assert json.loads(probe.stdout)["server"] == "echo"
    finally:
        server.kill()
        server.wait(timeout=10)
