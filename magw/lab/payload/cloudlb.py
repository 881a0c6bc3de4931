"""The lab cloud's health check: what a cloud network load balancer does to the targets of its listeners.

Run inside a cluster's ``cloud`` namespace (``magw.lab.build.cloud``)::

    python -m magw.lab.payload.cloudlb --table magw-lab-cloud --backend 45001=172.17.0.11:4500:9102 ... \\
        --interval 5 --unhealthy 2 --healthy 2

Every ``--interval`` seconds it sends ``GET /metrics`` to each backend's check port (HTTP, a 1 s timeout or the
interval's half, whichever is shorter). A backend whose check failed ``--unhealthy`` times in a row leaves its
listener: one ``nft -f`` transaction deletes its port from the set ``live`` (new flows to the port are dropped
before conntrack sees them) and from the map ``listeners`` (the DNAT). It comes back after ``--healthy``
successes in a row. Backends start registered and healthy (the lab needs no wait to come up). Every change is one
JSON line on stdout: ``{"event": "cloudlb.backend_down", "port": 45001, "backend": "172.17.0.11", "t": ...}``
(``t``: wall-clock seconds), so a test can set magw's failover beside the cloud's.

Stdlib only; every wait is bounded; it exits after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address

LIVE_SET = "live"
LISTENER_MAP = "listeners"


@dataclass
class Backend:
    port: int  # the listener's public port
    ip: IPv4Address
    target_port: int  # the cable's port on the backend
    check_port: int  # where the health check connects
    healthy: bool = True
    streak: int = 0  # results in a row that disagree with ``healthy``


def parse_backend(text: str) -> Backend:
    """``PORT=IP:TARGET_PORT:CHECK_PORT``."""
    try:
        port, rest = text.split("=", 1)
        ip, target, check = rest.split(":")
        return Backend(port=int(port), ip=IPv4Address(ip), target_port=int(target), check_port=int(check))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected PORT=IP:TARGET_PORT:CHECK_PORT") from None


def check(b: Backend, timeout: float) -> bool:
    """True when the backend answers ``GET /metrics`` with status 200 within ``timeout``."""
    try:
        with socket.create_connection((str(b.ip), b.check_port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: cloud\r\n\r\n")
            head = sock.recv(64)
    except OSError:
        return False
    return head.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200"))


def nft_change(table: str, b: Backend, up: bool) -> str:
    """The ``nft -f`` script that puts ``b`` in (``up``) or takes it out of its listener, as one transaction."""
    verb = "add" if up else "delete"
    value = f" : {b.ip} . {b.target_port}" if up else ""
    return (
        f"{verb} element ip {table} {LIVE_SET} {{ {b.port} }}\n"
        f"{verb} element ip {table} {LISTENER_MAP} {{ {b.port}{value} }}\n"
    )


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields, "t": round(time.time(), 3)}), flush=True)


def step(table: str, backends: Sequence[Backend], *, unhealthy: int, healthy: int, timeout: float) -> None:
    """One round of checks; a backend that crossed its threshold changes in nft and in its state."""
    for b in backends:
        ok = check(b, timeout)
        b.streak = 0 if ok == b.healthy else b.streak + 1
        if b.streak < (healthy if ok else unhealthy):
            continue
        done = subprocess.run(["nft", "-f", "-"], input=nft_change(table, b, ok), text=True, capture_output=True,
                              timeout=10, check=False)  # fmt: skip
        if done.returncode != 0:  # left as it was; the next round tries again
            emit("cloudlb.nft_failed", port=b.port, error=done.stderr.strip()[-200:])
            continue
        b.healthy, b.streak = ok, 0
        emit("cloudlb.backend_up" if ok else "cloudlb.backend_down", port=b.port, backend=str(b.ip))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.lab.payload.cloudlb", description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True, help="the cloud's nft table (family ip)")
    parser.add_argument("--backend", type=parse_backend, action="append", required=True,
                        metavar="PORT=IP:TARGET_PORT:CHECK_PORT")  # fmt: skip
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between checks (0.5..60)")
    parser.add_argument("--unhealthy", type=int, default=2, help="failures in a row that take a backend out")
    parser.add_argument("--healthy", type=int, default=2, help="successes in a row that bring it back")
    parser.add_argument("--max-seconds", type=float, default=86400.0, help="exit after this long (at most a day)")
    args = parser.parse_args(argv)
    if not 0.5 <= args.interval <= 60 or not 1 <= args.unhealthy <= 10 or not 1 <= args.healthy <= 10:
        parser.error("--interval: 0.5..60 s; --unhealthy, --healthy: 1..10")
    timeout = min(1.0, args.interval / 2)
    emit("cloudlb.started", backends=[b.port for b in args.backend], interval=args.interval,
         unhealthy=args.unhealthy, healthy=args.healthy)  # fmt: skip
    deadline = time.monotonic() + min(args.max_seconds, 86400.0)
    next_round = time.monotonic()
    while time.monotonic() < deadline:
        step(args.table, args.backend, unhealthy=args.unhealthy, healthy=args.healthy, timeout=timeout)
        next_round += args.interval
        time.sleep(max(next_round - time.monotonic(), 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
