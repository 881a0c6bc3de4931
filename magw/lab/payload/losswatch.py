"""Continuous UDP flows with per-flow loss windows, for failover measurements (stdlib only, runs in pods).

Run as ``ip netns exec POD python -m magw.lab.payload.losswatch ...``:

- ``reflect --port 9000 [--max-seconds S]``: send every UDP datagram back to
  its sender, unchanged. ``SO_REUSEPORT``: start several to use several cores
  (the kernel spreads flows over them by hash).
- ``stream --target IP:PORT --flows 64 --rate 1000 --duration 6 --base-port 41000``:
  flow ``i`` sends from source port ``base-port + i`` (fixed, so the path of
  every flow can be computed beforehand with ``ip route get``), ``rate``
  datagrams per second each, for ``duration`` seconds, then waits ``--drain``
  seconds for the last replies. A sender that cannot keep up (a starved CPU)
  still stops after ``duration`` seconds: ``sent`` < ``scheduled`` in the
  output then. Prints one JSON object: per flow, what was
  sent and echoed back, and the runs of lost sequence numbers; the loss window
  of a run is the time from the send of its first lost datagram to the send of
  the next datagram that came back. ``lost_tail``: datagrams lost at the very
  end (a flow that never came back has ``lost_tail > 0``).

Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any

HEADER = struct.Struct("!I")
# Every datagram starts with MAGIC, then its sequence number: the lab's echo servers (magw.lab.payload.traffic) send
# such
# datagrams back unchanged, so a stream can target any pod's or the outside server's echo port too.
MAGIC = b"magw-lw1"
PAYLOAD = 32
RCVBUF = 8 * 1024 * 1024
MAX_RUNS = 8
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # <asm-generic/socket.h>; root may exceed net.core.[rw]mem_max
MAX_CATCH_UP = 20  # datagrams per flow per loop turn when the sender fell behind


def _bufs(sock: socket.socket) -> None:
    for opt, force in ((socket.SO_RCVBUF, SO_RCVBUFFORCE), (socket.SO_SNDBUF, SO_SNDBUFFORCE)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, RCVBUF)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, opt, RCVBUF)


def reflect(port: int, max_seconds: float) -> int:
    """Echo datagrams on ``port`` until killed or ``max_seconds`` have passed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    _bufs(sock)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.5)
    print(json.dumps({"event": "losswatch.reflecting", "port": port}), flush=True)
    deadline = time.monotonic() + max_seconds
    buf = bytearray(2048)
    view = memoryview(buf)
    while time.monotonic() < deadline:
        try:
            n, peer = sock.recvfrom_into(buf)
        except TimeoutError:
            continue
        try:
            sock.sendto(view[:n], peer)
        except OSError:
            continue
    return 0


def runs_of(lost: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive runs in a sorted list of lost sequence numbers: [(first, last), ...]."""
    out: list[tuple[int, int]] = []
    for seq in lost:
        if out and out[-1][1] == seq - 1:
            out[-1] = (out[-1][0], seq)
        else:
            out.append((seq, seq))
    return out


def flow_report(sport: int, got: bytearray, sent: int, ticks: Sequence[float]) -> dict[str, Any]:
    """What one flow saw: counts, its longest loss windows (ms) and when they started (s from the start)."""
    lost = [seq for seq in range(sent) if not got[seq]]
    runs = runs_of(lost)

    def window(run: tuple[int, int]) -> float:
        end = ticks[run[1] + 1] if run[1] + 1 < sent else ticks[sent - 1] + (ticks[1] - ticks[0] if sent > 1 else 0)
        return (end - ticks[run[0]]) * 1000.0

    windows = sorted(((window(r), r) for r in runs), reverse=True)[:MAX_RUNS]
    tail = runs[-1][1] - runs[-1][0] + 1 if runs and runs[-1][1] == sent - 1 else 0
    return {
        "sport": sport,
        "sent": sent,
        "received": sent - len(lost),
        "lost": len(lost),
        "lost_tail": tail,
        "windows_ms": [round(w, 2) for w, _r in windows],
        "window_starts_s": [round(ticks[r[0]] - ticks[0], 4) for _w, r in windows],
    }


def _open(host: str, port: int, sport: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _bufs(sock)
    sock.bind(("0.0.0.0", sport))
    sock.connect((host, port))
    sock.setblocking(False)
    return sock


def _drain(sock: socket.socket, got: bytearray, limit: int) -> None:
    for _ in range(limit):
        try:
            data = sock.recv(256)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # e.g. ICMP port unreachable reported on the socket
            continue
        if len(data) >= len(MAGIC) + HEADER.size and data.startswith(MAGIC):
            seq = HEADER.unpack_from(data, len(MAGIC))[0]
            if seq < len(got):
                got[seq] = 1


def stream(target: str, n_flows: int, rate: int, duration: float, base_port: int, drain: float) -> int:
    host, _, port_text = target.rpartition(":")
    total = int(rate * duration)
    socks = [_open(host, int(port_text), base_port + i) for i in range(n_flows)]
    got = [bytearray(total) for _ in socks]
    by_fd = {s.fileno(): i for i, s in enumerate(socks)}
    poller = select.epoll()
    for sock in socks:
        poller.register(sock.fileno(), select.EPOLLIN)
    ticks: list[float] = []
    pad = b"\0" * (PAYLOAD - len(MAGIC) - HEADER.size)
    started_at = time.time()  # wall clock, for a caller on another host (verify --kubeconfig --failover)
    start = time.monotonic()
    stop = start + duration  # a starved sender stops on time with fewer datagrams, it does not run late
    try:
        while len(ticks) < total and time.monotonic() < stop:
            now = time.monotonic()
            due = min(int((now - start) * rate) + 1, total)
            for _ in range(min(due - len(ticks), MAX_CATCH_UP)):
                seq = len(ticks)
                ticks.append(time.monotonic())
                data = MAGIC + HEADER.pack(seq) + pad
                for sock in socks:
                    try:  # noqa: SIM105  # the hot loop: contextlib.suppress costs a context manager per datagram
                        sock.send(data)
                    except OSError:  # no route or buffer full: counted as lost
                        pass
            wait = max(start + len(ticks) / rate - time.monotonic(), 0.0)
            for fd, _ev in poller.poll(wait):
                _drain(socks[by_fd[fd]], got[by_fd[fd]], 64)
        end = time.monotonic() + drain
        while (left := end - time.monotonic()) > 0:
            for fd, _ev in poller.poll(left):
                _drain(socks[by_fd[fd]], got[by_fd[fd]], 256)
    finally:
        poller.close()
        for sock in socks:
            sock.close()
    doc = {
        "target": target,
        "rate": rate,
        "duration": duration,
        "scheduled": total,
        "sent": len(ticks),
        "started_at": started_at,
        "flows": [flow_report(base_port + i, got[i], len(ticks), ticks) for i in range(n_flows)],
    }
    print(json.dumps(doc), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.lab.payload.losswatch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("reflect", help="echo UDP datagrams back unchanged")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--max-seconds", type=float, default=600.0)
    s = sub.add_parser("stream", help="paced UDP flows with per-flow loss windows")
    s.add_argument("--target", required=True, help="IP:PORT of a reflector")
    s.add_argument("--flows", type=int, choices=range(1, 1025), default=64, metavar="1..1024")
    s.add_argument("--rate", type=int, choices=range(1, 20001), default=1000, metavar="PKT/S (1..20000)")
    s.add_argument("--duration", type=float, default=6.0, help="seconds of sending (at most 120)")
    s.add_argument("--base-port", type=int, default=41000, help="flow i sends from port BASE + i")
    s.add_argument("--drain", type=float, default=1.0, help="seconds to wait for replies after the last send")
    args = parser.parse_args(argv)
    if args.verb == "reflect":
        return reflect(args.port, min(args.max_seconds, 3600.0))
    if not 0 < args.duration <= 120 or not 0 <= args.drain <= 10:
        parser.error("--duration: must be in (0, 120] seconds; --drain: in [0, 10]")
    if not 1024 <= args.base_port <= 65535 - args.flows:
        parser.error(f"--base-port: must leave room for {args.flows} ports below 65536")
    return stream(args.target, args.flows, args.rate, args.duration, args.base_port, args.drain)


if __name__ == "__main__":
    sys.exit(main())
