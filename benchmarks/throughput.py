"""Aggregate inter-cluster throughput with 1, 2 and 4 active gateways per cluster, each WAN link shaped by tbf.

For each gateway count N it builds a lab (east, west; N gateways and 2 workers
with 2 pods each per cluster; every gateway's WAN egress shaped to --rate),
runs iperf3 from every east worker pod to a west worker pod with --streams
parallel TCP streams for --duration seconds, prints the aggregate received
rate and its ratio to the one-gateway run (target: >= 0.95 * N), and removes
the lab. Every lab is removed, also on failure or Ctrl-C.

    sudo .venv/bin/python benchmarks/throughput.py [--rate 50mbit] [--gateways 1,2,4]
        [--duration 5] [--streams 8] [--name bench] [--log-level warning]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence

from magw.lab import build
from magw.lab.layout import LabLayout, PodLayout, layout
from magw.lab.topology import parse_topology
from magw.logsetup import configure_logging

IPERF_PORT = 5201


def _worker_pods(lab: LabLayout, cluster: int) -> list[PodLayout]:
    c = lab.clusters[cluster]
    return [p for n in c.nodes if not n.gateway for p in c.pods_of(n.name)]


def _start_servers(pods: Sequence[PodLayout]) -> list[subprocess.Popen[bytes]]:
    """One one-shot iperf3 server per pod (-1: exits after one test)."""
    return [
        subprocess.Popen(
            ["ip", "netns", "exec", p.namespace, "iperf3", "-s", "-1", "-p", str(IPERF_PORT)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in pods
    ]


def _client_argv(client: PodLayout, server: PodLayout, duration: int, streams: int) -> list[str]:
    iperf = ["iperf3", "-c", str(server.ip), "-p", str(IPERF_PORT), "-J", "-t", str(duration), "-P", str(streams)]
    return ["ip", "netns", "exec", client.namespace, *iperf, "--connect-timeout", "3000"]


def _run_clients(clients: Sequence[PodLayout], servers: Sequence[PodLayout], duration: int, streams: int) -> float:
    """Run the iperf3 clients in parallel; the sum of their received bits per second."""
    procs = [
        subprocess.Popen(_client_argv(c, s, duration, streams), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for c, s in zip(clients, servers, strict=False)
    ]
    total = 0.0
    for p in procs:
        out, _err = p.communicate(timeout=duration + 30)
        doc = json.loads(out or b"{}")
        if "error" in doc:
            raise RuntimeError(f"iperf3: {doc['error']}")
        total += float(doc["end"]["sum_received"]["bits_per_second"])
    return total


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


def measure(name: str, gateways: int, rate: str, duration: int, streams: int) -> float:
    """Aggregate received bit rate east -> west with ``gateways`` gateways per cluster."""
    topo = parse_topology(
        {
            "wan_rate": rate,
            "clusters": [
                {"id": "east", "gateways": gateways, "workers": 2, "pods_per_node": 2},
                {"id": "west", "gateways": gateways, "workers": 2, "pods_per_node": 2},
            ],
        }
    )
    lab_name = f"{name}{gateways}"
    lab = layout(lab_name, topo)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        build.up(topo, name=lab_name, daemons=True, wait_timeout=90, progress=lambda line: print(f"  {line}"))
        server_pods = _worker_pods(lab, 1)
        servers = _start_servers(server_pods)
        time.sleep(0.5)  # let the servers bind
        return _run_clients(_worker_pods(lab, 0), server_pods, duration, streams)
    finally:
        _stop(servers)
        build.down(lab_name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="50mbit", help="tbf rate on every gateway's WAN link (default 50mbit)")
    parser.add_argument("--gateways", default="1,2,4", help="comma-separated gateway counts (default 1,2,4)")
    parser.add_argument("--duration", type=int, choices=range(1, 61), default=5, metavar="1..60",
                        help="iperf3 seconds per run (default 5)")  # fmt: skip
    parser.add_argument("--streams", type=int, choices=range(1, 65), default=8, metavar="1..64",
                        help="parallel TCP streams per client pod (default 8)")  # fmt: skip
    parser.add_argument("--name", default="bench", help="lab name prefix (the gateway count is appended)")
    parser.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    args = parser.parse_args(argv)
    configure_logging("console", args.log_level)
    counts = [int(x) for x in args.gateways.split(",")]
    results: dict[int, float] = {}
    for n in counts:
        print(f"== {n} gateway(s) per cluster, WAN {args.rate} each")
        results[n] = measure(args.name, n, args.rate, args.duration, args.streams)
        print(f"  aggregate {results[n] / 1e6:.1f} Mbit/s")
    base = results[counts[0]] / counts[0]
    print(f"\n{'gateways':>8} {'Mbit/s':>8} {'ratio':>6} {'target':>7}  ok")
    ok = True
    for n in counts:
        ratio = results[n] / base
        good = ratio >= 0.95 * n
        ok &= good
        print(f"{n:>8} {results[n] / 1e6:>8.1f} {ratio:>6.2f} {0.95 * n:>7.2f}  {'yes' if good else 'NO'}")
    print("(ratio: aggregate / (one-gateway aggregate per gateway); target 0.95 * N)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
