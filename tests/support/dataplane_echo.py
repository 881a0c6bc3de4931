"""A tiny UDP/TCP echo used by tests/kernel/test_dataplane.py, run inside a namespace with ``ip netns exec``.

Servers answer each datagram/connection with the source address they saw
(``ip:port``), also printed as a ``seen ip:port`` line, and stop after ``--seconds`` or ``--max`` answers. Clients send
``--count`` requests, each from its own socket (its own source port: one flow
each), and print one JSON object: the answers and how many got none. Every wait
is bounded. Standard library only.

    python dataplane_echo.py udp-server IP PORT [--seconds S] [--max N]
    python dataplane_echo.py tcp-server IP PORT [--seconds S] [--max N]
    python dataplane_echo.py udp-client IP PORT [--count N] [--timeout T] [--tries K]
    python dataplane_echo.py tcp-client IP PORT [--count N] [--timeout T] [--tries K]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time


def udp_server(ip: str, port: int, seconds: float, most: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((ip, port))
        print("ready", flush=True)
        deadline = time.monotonic() + seconds
        answered = 0
        while answered < most and time.monotonic() < deadline:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                _, peer = sock.recvfrom(2048)
            except TimeoutError:
                break
            print(f"seen {peer[0]}:{peer[1]}", flush=True)
            sock.sendto(f"{peer[0]}:{peer[1]}".encode(), peer)
            answered += 1


def tcp_server(ip: str, port: int, seconds: float, most: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((ip, port))
        sock.listen(64)
        print("ready", flush=True)
        deadline = time.monotonic() + seconds
        answered = 0
        while answered < most and time.monotonic() < deadline:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                conn, peer = sock.accept()
            except TimeoutError:
                break
            print(f"seen {peer[0]}:{peer[1]}", flush=True)
            with conn:
                conn.settimeout(5)
                conn.sendall(f"{peer[0]}:{peer[1]}".encode())
            answered += 1


def _udp_once(ip: str, port: int, timeout: float) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(b"hello", (ip, port))
        try:
            data, _ = sock.recvfrom(2048)
        except TimeoutError:
            return None
        return data.decode()


def _tcp_once(ip: str, port: int, timeout: float) -> str | None:
    try:
        with socket.create_connection((ip, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(2048).decode() or None
    except OSError:
        return None


def client(proto: str, ip: str, port: int, count: int, timeout: float, tries: int) -> None:
    once = _udp_once if proto == "udp" else _tcp_once
    answers: list[str] = []
    lost = 0
    for _ in range(count):
        for _attempt in range(tries):
            answer = once(ip, port, timeout)
            if answer is not None:
                answers.append(answer)
                break
        else:
            lost += 1
    print(json.dumps({"answers": answers, "lost": lost}), flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["udp-server", "tcp-server", "udp-client", "tcp-client"])
    parser.add_argument("ip")
    parser.add_argument("port", type=int)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max", type=int, default=1000)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args(argv)
    proto, role = args.mode.split("-")
    if role == "server":
        (udp_server if proto == "udp" else tcp_server)(args.ip, args.port, args.seconds, args.max)
    else:
        client(proto, args.ip, args.port, args.count, args.timeout, args.tries)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
