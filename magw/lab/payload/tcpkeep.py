"""Long-lived TCP connections that either survive a failover or do not (stdlib only, runs in lab namespaces).

Run as ``ip netns exec NS python -m magw.lab.payload.tcpkeep ...``:

- ``serve --port 9100 [--max-seconds S]``: a TCP server that echoes every line back on the same connection,
  prefixed with the source address it saw (``10.1.3.2 17\\n`` for the line ``17``), for as long as the client
  keeps the connection.
- ``hold`` works against that server and against the lab's echo servers (``magw.lab.payload.traffic serve``, which
  answer every line with one JSON object naming the address they saw).
- ``hold --target IP:PORT --conns N --interval 0.02 --duration 6 [--timeout 2]``: opens ``N`` connections,
  then on each sends a numbered line every ``interval`` seconds and reads the echoes, for ``duration`` seconds.
  Prints one JSON object: per connection whether it was established, whether it **survived** (still answering
  at the end, no reset, no error), the first error, the largest gap between two echoes (the connection's loss
  window: TCP retransmits, so a short outage shows as a gap, not as a loss), the address the server saw, and
  the totals. SIGTERM ends the run early: the same end checks, the same report (for runs of unknown length).

Every loop is bounded in count and time; a connection that stalls longer than ``timeout``, or that has not
answered in the last second of the run, counts as broken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

MAX_CONNS = 512
FRESH = 1.0  # seconds: a surviving connection has answered within this long of the run's end
MAX_LINE = 256


def _serve_conn(conn: socket.socket, peer: tuple[str, int], deadline: float) -> None:
    with conn:
        conn.settimeout(1.0)
        buf = b""
        while time.monotonic() < deadline:
            try:
                data = conn.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            try:
                conn.sendall(b"".join(peer[0].encode() + b" " + line[:MAX_LINE] + b"\n" for line in lines))
            except OSError:
                return


def serve(port: int, max_seconds: float) -> int:
    deadline = time.monotonic() + max_seconds
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(MAX_CONNS)
    srv.settimeout(0.5)
    print(json.dumps({"event": "tcpkeep.serving", "port": port}), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while time.monotonic() < deadline:
            try:
                conn, peer = srv.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_serve_conn, args=(conn, peer, deadline), daemon=True).start()
    return 0


class _Conn:
    def __init__(self, index: int, sock: socket.socket | None, error: str | None) -> None:
        self.index = index
        self.sock = sock
        self.error = error
        self.established = sock is not None
        self.sent = 0
        self.echoed = 0
        self.buf = b""
        self.last_echo = time.monotonic()
        self.max_gap = 0.0
        self.seen_ip: str | None = None
        self.sport = sock.getsockname()[1] if sock is not None else None  # to find the connection in conntrack

    def report(self) -> dict[str, Any]:
        return {
            "conn": self.index,
            "established": self.established,
            "survived": self.established and self.error is None,
            "sent": self.sent,
            "echoed": self.echoed,
            "max_gap_ms": round(self.max_gap * 1000, 1),
            "seen_ip": self.seen_ip,
            "sport": self.sport,
            "error": self.error,
        }


def _open(host: str, port: int, n: int, timeout: float) -> list[_Conn]:
    conns = []
    for i in range(n):
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            sock.setblocking(False)
            conns.append(_Conn(i, sock, None))
        except OSError as exc:
            conns.append(_Conn(i, None, f"connect: {exc}"))
    return conns


def _fail(c: _Conn, sel: selectors.BaseSelector, why: str) -> None:
    c.error = why
    if c.sock is not None:
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(c.sock)
        c.sock.close()
        c.sock = None


def _read(c: _Conn, sel: selectors.BaseSelector, now: float) -> None:
    assert c.sock is not None
    try:
        data = c.sock.recv(65536)
    except BlockingIOError:
        return
    except OSError as exc:
        _fail(c, sel, f"recv: {exc}")
        return
    if not data:
        _fail(c, sel, "closed by the peer")
        return
    c.buf += data
    *lines, c.buf = c.buf.split(b"\n")
    for line in lines:
        text = line.decode(errors="replace")
        if text.startswith("{"):  # the lab's echo server (magw.lab.payload.traffic): one JSON object per line
            try:
                c.seen_ip = str(json.loads(text).get("seen_ip"))
            except ValueError:
                c.seen_ip = None
        else:
            c.seen_ip = text.partition(" ")[0]
        c.echoed += 1
        c.max_gap = max(c.max_gap, now - c.last_echo)
        c.last_echo = now


def hold(target: str, n: int, interval: float, duration: float, timeout: float, push: bool = False) -> int:
    host, _, port = target.rpartition(":")
    conns = _open(host, int(port), n, timeout)
    if push:  # the server sends, every interval, unasked; we only read (and ask once)
        for c in conns:
            if c.sock is not None:
                c.sock.setblocking(True)
                try:
                    c.sock.sendall(f"push {interval}\n".encode())
                    c.sent = 1
                except OSError as exc:
                    c.error = f"send: {exc}"
                    c.sock.close()
                    c.sock = None
                    continue
                c.sock.setblocking(False)
    sel = selectors.DefaultSelector()
    for c in conns:
        if c.sock is not None:
            sel.register(c.sock, selectors.EVENT_READ, c)
            c.last_echo = time.monotonic()
    stopped = threading.Event()
    if threading.current_thread() is threading.main_thread():  # SIGTERM: end the run now, report as usual
        signal.signal(signal.SIGTERM, lambda _sig, _frame: stopped.set())
    start = time.monotonic()
    next_send = start
    end = start + duration
    while True:
        now = time.monotonic()
        if stopped.is_set() and end > now:
            end = now
        if push:
            next_send = now + interval  # nothing to send: wake up once per interval to check for stalls
        elif now >= next_send and now < end:
            for c in conns:
                if c.sock is not None:
                    try:
                        c.sock.send(f"{c.sent}\n".encode())
                        c.sent += 1
                    except BlockingIOError:
                        pass
                    except OSError as exc:
                        _fail(c, sel, f"send: {exc}")
            next_send += interval
        if now >= end + timeout:
            break
        if now >= end and (push or all(c.sock is None or c.echoed >= c.sent for c in conns)):
            break
        for key, _ in sel.select(timeout=max(0.0, min(next_send, end + timeout) - now)) if sel.get_map() else []:
            _read(key.data, sel, time.monotonic())
        now = time.monotonic()
        for c in conns:
            if c.sock is not None and now - c.last_echo > timeout and (push or c.sent > c.echoed):
                _fail(c, sel, f"stalled: no echo for {timeout:g} s")
        if not sel.get_map():
            time.sleep(min(interval, max(0.0, end - now)))
            if time.monotonic() >= end:
                break
    # Alive means answering at the end too: a connection reset on the far side only, or still in TCP's
    # retransmission backoff, is silent rather than failed, and would otherwise count as surviving.
    t_end = time.monotonic()
    fresh = max(FRESH, 3 * interval)
    for c in conns:
        if c.sock is not None and c.error is None and t_end - c.last_echo > fresh:
            c.error = f"silent for the last {t_end - c.last_echo:.1f} s of the run"
        if c.sock is not None:
            c.sock.close()
    reports = [c.report() for c in conns]
    print(
        json.dumps(
            {
                "target": target,
                "conns": n,
                "established": sum(r["established"] for r in reports),
                "survived": sum(r["survived"] for r in reports),
                "max_gap_ms": max((r["max_gap_ms"] for r in reports if r["survived"]), default=None),
                "connections": reports,
            }
        ),
        flush=True,
    )
    return 0


def _positive(high: float) -> Any:
    def check(text: str) -> float:
        value = float(text)
        if not 0 < value <= high:
            raise argparse.ArgumentTypeError(f"must be in (0, {high:g}]")
        return value

    return check


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.lab.payload.tcpkeep")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=9100)
    s.add_argument("--max-seconds", type=_positive(86400), default=3600.0)
    h = sub.add_parser("hold")
    h.add_argument("--target", required=True, help="IP:PORT")
    h.add_argument("--conns", type=int, choices=range(1, MAX_CONNS + 1), metavar=f"1..{MAX_CONNS}", default=16)
    h.add_argument("--interval", type=_positive(10), default=0.02)
    h.add_argument("--duration", type=_positive(600), default=6.0)
    h.add_argument("--timeout", type=_positive(60), default=2.0)
    h.add_argument("--push", action="store_true",
                   help="the server speaks: it sends a line every --interval, unasked (the lab's echo server "
                        "does, magw.lab.payload.traffic)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        return serve(args.port, args.max_seconds)
    return hold(args.target, args.conns, args.interval, args.duration, args.timeout, args.push)


if __name__ == "__main__":
    sys.exit(main())
