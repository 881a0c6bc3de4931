"""``magw diagnose``'s clock check over a real HTTP exchange: a server in a throwaway namespace (its loopback, never
the host's) answers with a ``Date`` header of our clock, or of our clock shifted by a minute; the check measures
the skew the way the CLI's ``--clock-url`` does (``sample_clock``)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest

from magw.drivers.netns import run_in_netns
from magw.ops.diagnose.clock import clock_checks, skew_of
from magw.ops.diagnose.node import sample_clock
from magw.ops.diagnose.verdict import Verdict

pytestmark = pytest.mark.kernel


def _handler(shift: list[float]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response_only(200)
            self.send_header("Date", formatdate(time.time() + shift[0], usegmt=True))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def server(ns: str) -> Iterator[tuple[str, list[float]]]:
    """A Date server on ``ns``'s loopback; the test sets ``shift[0]`` (seconds added to the header's time)."""
    shift = [0.0]

    def listen() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        return s

    sock = run_in_netns(ns, listen)
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _handler(shift), bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = sock  # listening inside the namespace: only its loopback reaches it
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/version", shift
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_a_server_on_our_clock_passes_and_a_minute_off_fails(ns: str, server: tuple[str, list[float]]) -> None:
    url, shift = server
    same = run_in_netns(ns, lambda: sample_clock(url))
    assert same.date_header is not None and same.error == ""
    assert clock_checks([same])[0].verdict is Verdict.PASS
    shift[0] = 60.0
    ahead = run_in_netns(ns, lambda: sample_clock(url))
    skew, _ = skew_of(ahead) or (0.0, 0.0)
    assert 58.0 <= skew <= 61.0  # whole seconds in the header, a loaded machine's round trip in the bound
    check = clock_checks([ahead])[0]
    assert check.verdict is Verdict.FAIL and "NTP" in check.fix


def test_nothing_listening_is_a_warning_not_a_measurement(ns: str) -> None:
    sample = run_in_netns(ns, lambda: sample_clock("http://127.0.0.1:9/version"))
    check = clock_checks([sample])[0]
    assert check.verdict is Verdict.WARN and "not measured" in check.detail
