"""A request/response latency probe (stdlib only, starts fast), run inside a pod's namespace:

    ip netns exec POD python -m magw.ops.bench.rrprobe --target udp:IP:PORT [--count 200] [--timeout 1]
        [--interval 0] [--max-seconds 60]

One request at a time, the next once the answer is in (or its timeout passed), like netperf's UDP_RR and
TCP_RR: ``udp`` sends a datagram that the lab's echo server (``magw.lab.payload.traffic serve``) sends back
unchanged (the losswatch prefix, then the request's sequence number, so a late answer is never taken for the
current one); ``tcp`` opens one connection and sends a line per request, the server answering each line. Prints
one JSON object: ``{"target", "proto", "count", "sent", "received", "rtt_us": [...], "error"}``, the round trip
of every answered request in microseconds, in order. Every loop is bounded by ``--count`` and ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any

MAGIC = b"magw-lw1"  # the echo server sends such a datagram back unchanged (magw.lab.payload.traffic)
SEQ = struct.Struct("!Q")
MAX_COUNT = 100_000


def _udp(host: str, port: int, count: int, timeout: float, interval: float, deadline: float) -> dict[str, Any]:
    rtts: list[int] = []
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        for seq in range(count):
            if time.monotonic() >= deadline:
                break
            request = MAGIC + SEQ.pack(seq)
            t0 = time.perf_counter_ns()
            try:
                sock.send(request)
            except OSError:
                sent += 1
                continue
            sent += 1
            until = time.monotonic() + timeout
            while (left := until - time.monotonic()) > 0:
                sock.settimeout(left)
                try:
                    data = sock.recv(2048)
                except (TimeoutError, OSError):
                    break
                if data == request:
                    rtts.append((time.perf_counter_ns() - t0) // 1000)
                    break
            if interval:
                time.sleep(interval)
    return {"sent": sent, "rtt_us": rtts, "error": None}


def _tcp(host: str, port: int, count: int, timeout: float, interval: float, deadline: float) -> dict[str, Any]:
    rtts: list[int] = []
    sent = 0
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        return {"sent": 0, "rtt_us": [], "error": f"connect: {exc}"}
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        for seq in range(count):
            if time.monotonic() >= deadline:
                break
            t0 = time.perf_counter_ns()
            try:
                sock.sendall(f"rr {seq}\n".encode())
                sent += 1
                while b"\n" not in buf:
                    data = sock.recv(4096)
                    if not data:
                        return {"sent": sent, "rtt_us": rtts, "error": "the server closed the connection"}
                    buf += data
            except OSError as exc:  # a timeout too: the connection is then out of step, stop
                return {"sent": sent, "rtt_us": rtts, "error": f"request {seq}: {exc or 'timed out'}"}
            buf = buf.split(b"\n", 1)[1]
            rtts.append((time.perf_counter_ns() - t0) // 1000)
            if interval:
                time.sleep(interval)
    return {"sent": sent, "rtt_us": rtts, "error": None}


def run(target: str, count: int, timeout: float, interval: float, max_seconds: float) -> dict[str, Any]:
    proto, _, rest = target.partition(":")
    host, _, port = rest.rpartition(":")
    deadline = time.monotonic() + max_seconds
    probe = _udp if proto == "udp" else _tcp
    doc = probe(host, int(port), count, timeout, interval, deadline)
    return {"target": target, "proto": proto, "count": count, "received": len(doc["rtt_us"]), **doc}


def _target(text: str) -> str:
    proto, _, rest = text.partition(":")
    host, _, port = rest.rpartition(":")
    if proto not in ("udp", "tcp") or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r}: expected udp:IP:PORT or tcp:IP:PORT")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.ops.bench.rrprobe", description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=_target, required=True, help="udp:IP:PORT or tcp:IP:PORT")
    parser.add_argument("--count", type=int, default=200, help=f"requests (1..{MAX_COUNT})")
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds to wait for an answer (0.01..10)")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between requests (0..1)")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop after this long (1..600)")
    args = parser.parse_args(argv)
    if not 1 <= args.count <= MAX_COUNT or not 0.01 <= args.timeout <= 10 or not 0 <= args.interval <= 1:
        parser.error("--count, --timeout or --interval out of range")
    if not 1 <= args.max_seconds <= 600:
        parser.error("--max-seconds: 1..600")
    doc = run(args.target, args.count, args.timeout, args.interval, args.max_seconds)
    print(json.dumps(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
