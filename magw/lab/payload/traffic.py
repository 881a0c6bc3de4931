"""Test traffic inside pod namespaces: an echo server and bounded clients (stdlib only, starts fast).

Run as ``ip netns exec POD python -m magw.lab.payload.traffic ...``:

- ``serve --name POD [--port 8080] [--max-seconds S]``: TCP and UDP echo on the
  port. Every reply is one JSON object naming the server and the source
  address it saw: ``{"server": "east-w1-p1", "seen_ip": "10.2.3.2", "seen_port": 40112}``.
- ``probe --target tcp:IP:PORT [--target udp:IP:PORT ...] [--timeout S] [--attempts N]``:
  one request per target (UDP retried up to N times), one JSON line per
  target: ``{"target": ..., "ok": true, "seen_ip": ..., "server": ..., "error": null}``.
- ``flows --target IP:PORT [--flows 64] [--packets 10] [--timeout S] [--proto udp|tcp]``: UDP (or TCP
  connections) from ``flows`` sockets (distinct source ports, so distinct 5-tuples),
  ``packets`` requests each; prints one JSON object with what was sent and
  received per flow, the source addresses each flow's server saw (with
  Globalnet: which gateway's egress address it left by) and the servers that answered.

Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

DEFAULT_PORT = 8080
LOSSWATCH_MAGIC = b"magw-lw1"  # magw.lab.payload.losswatch.MAGIC (this tool stays importable on its own)
MAX_CONN_SECONDS = 600.0  # a TCP connection is served at most this long
MAX_REQUEST = 2048
# Bursts of flows (64 requests at once) overflowed the default ~208 KiB UDP receive buffer of a busy server
# (UdpRcvbufErrors in the pod's nstat). Root may exceed net.core.rmem_max with SO_RCVBUFFORCE.
RCVBUF = 4 * 1024 * 1024


SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # 33 on Linux; typeshed does not declare it


def _big_rcvbuf(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)


def _reply(name: str, peer: tuple[str, int]) -> bytes:
    return (json.dumps({"server": name, "seen_ip": peer[0], "seen_port": peer[1]}) + "\n").encode()


def _serve_udp(sock: socket.socket, name: str, stop: threading.Event) -> None:
    sock.settimeout(0.5)
    while not stop.is_set():
        try:
            data, peer = sock.recvfrom(MAX_REQUEST)
        except TimeoutError:
            continue
        except OSError:
            return
        try:
            # A losswatch stream's datagram goes back unchanged (it counts its own sequence numbers).
            sock.sendto(data if data.startswith(LOSSWATCH_MAGIC) else _reply(name, peer), peer)
        except OSError:
            continue


def _serve_tcp_conn(conn: socket.socket, peer: tuple[str, int], name: str) -> None:
    """One reply per request line, for as long as the client keeps the connection (a probe sends one line and
    closes; ``magw.lab.payload.tcpkeep hold`` keeps sending): bounded by ``MAX_CONN_SECONDS`` and a 5 s silence."""
    deadline = time.monotonic() + MAX_CONN_SECONDS
    with conn:
        conn.settimeout(5.0)
        buf = b""
        first = True
        try:
            while time.monotonic() < deadline:
                data = conn.recv(MAX_REQUEST)
                if not data:
                    return
                if first and data.startswith(b"push "):  # magw.lab.payload.tcpkeep hold --push: the server speaks
                    _push(conn, peer, name, data, deadline)
                    return
                if first:  # the first request is answered whatever it holds, as a probe expects
                    first = False
                    lines = max(data.count(b"\n"), 1)
                    buf = data.rpartition(b"\n")[2] if b"\n" in data else b""
                else:
                    buf += data
                    lines = buf.count(b"\n")
                    buf = buf.rpartition(b"\n")[2]
                    if len(buf) >= MAX_REQUEST:  # an endless line: answer it and start over
                        lines, buf = lines + 1, b""
                if lines:
                    conn.sendall(_reply(name, peer) * lines)
        except OSError:
            return


def _push(conn: socket.socket, peer: tuple[str, int], name: str, request: bytes, deadline: float) -> None:
    """``push SECONDS``: send a reply line every SECONDS (0.005 to 10) until the client closes, unasked, so the
    far end of the connection is the one that speaks after a failover (``magw.lab.payload.tcpkeep``)."""
    try:
        interval = min(max(float(request.split()[1]), 0.005), 10.0)
    except (IndexError, ValueError):
        interval = 0.02
    line = _reply(name, peer)
    next_send = time.monotonic()
    while time.monotonic() < deadline:
        conn.sendall(line)
        next_send += interval
        readable, _, _ = select.select([conn], [], [], max(0.0, next_send - time.monotonic()))
        if readable and not conn.recv(MAX_REQUEST):
            return  # the client closed


def _serve_tcp(sock: socket.socket, name: str, stop: threading.Event) -> None:
    sock.settimeout(0.5)
    while not stop.is_set():
        try:
            conn, peer = sock.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        threading.Thread(target=_serve_tcp_conn, args=(conn, peer, name), daemon=True).start()


def serve(name: str, port: int, max_seconds: float) -> int:
    """Echo on TCP and UDP ``port`` until killed or ``max_seconds`` have passed."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _big_rcvbuf(udp)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    udp.bind(("0.0.0.0", port))
    tcp.bind(("0.0.0.0", port))
    tcp.listen(128)
    stop = threading.Event()
    threads = [
        threading.Thread(target=_serve_udp, args=(udp, name, stop), daemon=True),
        threading.Thread(target=_serve_tcp, args=(tcp, name, stop), daemon=True),
    ]
    for t in threads:
        t.start()
    print(json.dumps({"event": "traffic.serving", "server": name, "port": port}), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait(max_seconds)
    stop.set()
    return 0


def _parse_target(text: str) -> tuple[str, str, int]:
    proto, _, rest = text.partition(":")
    host, _, port = rest.rpartition(":")
    if proto not in ("tcp", "udp") or not host or not port.isdigit():
        raise ValueError(f"--target: {text!r} is not tcp:IP:PORT or udp:IP:PORT")
    return proto, host, int(port)


def _decode(data: bytes) -> dict[str, Any]:
    doc = json.loads(data.decode().strip().splitlines()[0])
    if not isinstance(doc, dict):
        raise ValueError("reply is not a JSON object")
    return doc


def probe_tcp(host: str, port: int, timeout: float) -> dict[str, Any]:
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(b"magw-probe\n")
        data = b""
        deadline = time.monotonic() + timeout
        while not data.endswith(b"\n") and time.monotonic() < deadline:
            chunk = conn.recv(MAX_REQUEST)
            if not chunk:
                break
            data += chunk
    return _decode(data)


def probe_udp(host: str, port: int, timeout: float, attempts: int) -> dict[str, Any]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        for _ in range(attempts):
            sock.send(b"magw-probe\n")
            ready, _w, _x = select.select([sock], [], [], timeout / attempts)
            if ready:
                return _decode(sock.recv(MAX_REQUEST))
    raise TimeoutError(f"no UDP reply in {timeout:g}s ({attempts} attempts)")


def probe(targets: Sequence[str], timeout: float, attempts: int) -> int:
    """One request per target; print one JSON line each. Exit 0 if every target answered."""
    failed = 0
    for text in targets:
        proto, host, port = _parse_target(text)
        result: dict[str, Any] = {"target": text, "ok": False, "seen_ip": None, "server": None, "error": None}
        try:
            reply = probe_tcp(host, port, timeout) if proto == "tcp" else probe_udp(host, port, timeout, attempts)
            result.update(ok=True, seen_ip=reply.get("seen_ip"), server=reply.get("server"))
        except (OSError, ValueError) as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"
            failed += 1
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


def _send_rounds(socks: list[socket.socket], packets: int) -> int:
    sent = 0
    for seq in range(packets):
        for sock in socks:
            sock.send(f"magw-flow {seq}\n".encode())
            sent += 1
        time.sleep(0.005)
    return sent


def _collect(
    socks: list[socket.socket], expected: int, timeout: float, *, stream: bool = False
) -> tuple[list[int], dict[str, int], list[list[str]]]:
    """Replies per flow, per server, and the source addresses each flow's server saw (Globalnet: per gateway).
    ``stream``: TCP connections, where a read may hold several reply lines, or part of one."""
    received = [0] * len(socks)
    servers: dict[str, int] = {}
    seen: list[set[str]] = [set() for _ in socks]
    bufs = [b""] * len(socks)
    index = {s.fileno(): i for i, s in enumerate(socks)}
    open_socks = list(socks)
    deadline = time.monotonic() + timeout
    while sum(received) < expected and open_socks and (left := deadline - time.monotonic()) > 0:
        ready, _w, _x = select.select(open_socks, [], [], left)
        for sock in ready:
            i = index[sock.fileno()]
            try:
                data = sock.recv(64 * 1024 if stream else MAX_REQUEST)
            except OSError:
                data = b""
            if stream and not data:  # the server closed the connection
                open_socks.remove(sock)
                continue
            if stream:
                *messages, bufs[i] = (bufs[i] + data).split(b"\n")
            else:
                messages = [data]
            for message in messages:
                try:
                    doc = _decode(message)
                except (ValueError, IndexError):
                    continue
                received[i] += 1
                server = str(doc.get("server"))
                servers[server] = servers.get(server, 0) + 1
                seen[i].add(str(doc.get("seen_ip")))
    return received, servers, [sorted(s) for s in seen]


def flows(target: str, n_flows: int, packets: int, timeout: float, proto: str = "udp") -> int:
    """Requests over ``n_flows`` distinct source ports (UDP sockets or TCP connections); print a JSON summary.
    Exit 0 if all were answered."""
    host, _, port = target.rpartition(":")
    socks = []
    try:
        for _ in range(n_flows):
            if proto == "tcp":
                sock = socket.create_connection((host, int(port)), timeout=timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one segment per request
            else:
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                _big_rcvbuf(sock)
                sock.connect((host, int(port)))
            socks.append(sock)
        sports = [s.getsockname()[1] for s in socks]
        sent = _send_rounds(socks, packets)
        received, servers, seen = _collect(socks, sent, timeout, stream=proto == "tcp")
    finally:
        for sock in socks:
            sock.close()
    per_flow = [{"sport": p, "received": r, "seen_ips": s} for p, r, s in zip(sports, received, seen, strict=True)]
    doc = {"target": target, "proto": proto, "flows": n_flows, "sent": sent, "received": sum(received),
           "per_flow": per_flow, "servers": servers}  # fmt: skip
    print(json.dumps(doc), flush=True)
    return 0 if sum(received) == sent else 1


def _bounded(low: float, high: float) -> Any:
    def check(text: str) -> float:
        value = float(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}")
        return value

    return check


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.lab.payload.traffic", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("serve", help="TCP+UDP echo server reporting the source IP it saw")
    s.add_argument("--name", required=True, help="the name put in every reply (the pod's name)")
    s.add_argument("--port", type=int, default=DEFAULT_PORT)
    s.add_argument("--max-seconds", type=_bounded(1, 7 * 86400), default=86400.0, help="exit after this long")
    p = sub.add_parser("probe", help="one request per target, one JSON line each")
    p.add_argument("--target", action="append", required=True, help="tcp:IP:PORT or udp:IP:PORT (repeatable)")
    p.add_argument("--timeout", type=_bounded(0.1, 60), default=2.0, help="seconds per target")
    p.add_argument("--attempts", type=int, choices=range(1, 11), default=3, help="UDP sends per target")
    f = sub.add_parser("flows", help="many UDP (or TCP) flows to one target, JSON summary")
    f.add_argument("--target", required=True, help="IP:PORT")
    f.add_argument("--flows", type=int, choices=range(1, 1025), default=64, metavar="1..1024")
    f.add_argument("--packets", type=int, choices=range(1, 1001), default=10, metavar="1..1000")
    f.add_argument("--timeout", type=_bounded(0.1, 60), default=5.0, help="seconds to wait for replies")
    f.add_argument("--proto", choices=("udp", "tcp"), default="udp", help="UDP sockets or TCP connections")
    args = parser.parse_args(argv)
    if args.verb == "serve":
        return serve(args.name, args.port, args.max_seconds)
    if args.verb == "probe":
        try:
            return probe(args.target, args.timeout, args.attempts)
        except ValueError as exc:
            print(f"traffic: error: {exc}", file=sys.stderr)
            return 2
    try:
        return flows(args.target, args.flows, args.packets, args.timeout, args.proto)
    except OSError as exc:  # a TCP connection refused or timed out
        print(f"traffic: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
