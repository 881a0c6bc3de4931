"""``magw benchmark throughput|latency --lab NAME``: iperf3 and the request/response probe between pods of two
clusters of a running lab, each measurement bounded in time, every process started here stopped by PID.

Two placements, as ``subctl benchmark`` has them: ``gateways`` (a pod on the client cluster's first gateway node
to a pod on the server cluster's first gateway node: the cable between two gateways, no hop inside a cluster)
and ``pods`` (a pod on a worker to a pod on a remote worker: what applications get, two more hops). The server
is addressed as any client of its cluster would: its pod IP, or with Globalnet its global IP.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from magw.lab.spec.layout import ECHO_PORT, PodLayout
from magw.ops.bench.stats import Latency, ParseError, Throughput, parse_iperf3, summarize_rr
from magw.ops.verify.labref import Address, Addressing, Lab

IPERF_PORT = 5201  # iperf3's own; the first free one from here is used (two benchmarks at once on one pod)
IPERF_PORTS = 100
PLACEMENTS = ("gateways", "pods")


@attrs.frozen(kw_only=True)
class Pair:
    placement: str
    client: PodLayout
    server: PodLayout | None
    address: Address | None
    problem: str | None = None  # why this pair cannot be measured (no pod, no global IP)
    absent: bool = False  # the topology has no such pair (no pod on a worker): skipped, not failed


@attrs.frozen(kw_only=True)
class Row:
    """One measurement: the pair, and either its figures or the one-line reason it has none."""

    kind: str  # "throughput" or "latency"
    pair: Pair
    throughput: Throughput | None = None
    latency: Latency | None = None
    error: str | None = None

    @property
    def skipped(self) -> bool:
        """The topology has no such pair: nothing to measure, and no failure."""
        return self.pair.absent

    @property
    def ok(self) -> bool:
        return self.error is None or self.skipped

    @property
    def placement(self) -> str:
        return self.pair.placement

    def who(self) -> tuple[str, str, str]:
        """client@node, server@node and the target address (with how it was found), for the table."""
        p = self.pair
        server = f"{p.server.name}@{p.server.node}" if p.server else "-"
        target = f"{p.address.ip} ({p.address.via})" if p.address else "-"
        return f"{p.client.name}@{p.client.node}", server, target

    def as_json(self) -> dict[str, Any]:
        p = self.pair
        doc: dict[str, Any] = {
            "kind": self.kind,
            "between": p.placement,
            "client": p.client.name,
            "client_node": p.client.node,
            "client_cluster": p.client.cluster,
            "server": p.server.name if p.server else None,
            "server_node": p.server.node if p.server else None,
            "server_cluster": p.server.cluster if p.server else None,
            "target": str(p.address.ip) if p.address else None,
            "via": p.address.via if p.address else None,
            "ok": self.ok,
            "skipped": self.skipped,
            "error": self.error,
        }
        if self.throughput is not None:
            doc["throughput"] = self.throughput.as_json()
        if self.latency is not None:
            doc["latency"] = self.latency.as_json()
        return doc


def plan_pairs(
    lab: Lab, addressing: Addressing, clusters: Sequence[tuple[str, str]], placements: Sequence[str]
) -> list[Pair]:
    """One pair per (client cluster, server cluster) and placement."""
    pairs = []
    for src, dst in clusters:
        for placement in placements:
            pairs.append(_pair(lab, addressing, src, dst, placement))
    return pairs


def _pair(lab: Lab, addressing: Addressing, src: str, dst: str, placement: str) -> Pair:
    if placement == "gateways":
        client = lab.on_gateway(src)
        servers = [p for g in lab.layout.cluster(dst).gateways for p in lab.layout.cluster(dst).pods_of(g.name)]
    else:
        workers = [p for p in lab.workers_first(src) if not _on_gateway(lab, p)]
        client = workers[0] if workers else None
        servers = [p for p in lab.workers_first(dst) if not _on_gateway(lab, p)]
    if client is None:
        any_pod = lab.layout.cluster(src).pods[0]
        return Pair(
            placement=placement,
            client=any_pod,
            server=None,
            address=None,
            problem=f"cluster {src} has no pod on a {'gateway' if placement == 'gateways' else 'worker'}",
            absent=True,
        )
    found = addressing.pod_target(servers)
    if found is None:
        why = (
            f"no pod of cluster {dst} on a {'gateway' if placement == 'gateways' else 'worker'} has a global IP "
            "(export a headless Service that selects one)"
            if lab.globalnet and servers
            else f"cluster {dst} has no pod on a {'gateway' if placement == 'gateways' else 'worker'}"
        )
        absent = not (lab.globalnet and servers)
        return Pair(placement=placement, client=client, server=None, address=None, problem=why, absent=absent)
    server, address = found
    return Pair(placement=placement, client=client, server=server, address=address)


def _on_gateway(lab: Lab, pod: PodLayout) -> bool:
    return lab.layout.node(pod.node).gateway


def _in(pod: PodLayout, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", pod.namespace, *argv]


def _wait_listening(pod: PodLayout, port: int, limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        out = subprocess.run(
            _in(pod, "ss", "-Hltn", f"sport = :{port}"), capture_output=True, text=True, timeout=10, check=False
        ).stdout
        if out.strip():
            return True
        time.sleep(0.1)
    return False


def _free_port(pod: PodLayout) -> int | None:
    """The first TCP port from IPERF_PORT nothing listens on in ``pod`` (None: all IPERF_PORTS taken)."""
    out = subprocess.run(_in(pod, "ss", "-Hltn"), capture_output=True, text=True, timeout=10, check=False).stdout
    used = {int(m) for m in re.findall(r":(\d+)\s", out)}
    return next((p for p in range(IPERF_PORT, IPERF_PORT + IPERF_PORTS) if p not in used), None)


def throughput(pair: Pair, *, duration: int, streams: int) -> Row:
    """iperf3 (TCP) from the client pod to the server pod for ``duration`` s with ``streams`` streams."""
    if pair.server is None or pair.address is None:
        return Row(kind="throughput", pair=pair, error=pair.problem)
    port = _free_port(pair.server)
    if port is None:
        return Row(kind="throughput", pair=pair, error=f"no free port from {IPERF_PORT} in {pair.server.name}")
    server = subprocess.Popen(
        _in(pair.server, "iperf3", "-s", "-1", "-p", str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if not _wait_listening(pair.server, port):
            return Row(kind="throughput", pair=pair, error=f"iperf3 -s in {pair.server.name} did not listen in 10 s")
        argv = _in(
            pair.client,
            "iperf3",
            "-c",
            str(pair.address.ip),
            "-p",
            str(port),
            "-J",
            "-t",
            str(duration),
            "-P",
            str(streams),
            "--connect-timeout",
            "3000",
        )
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30, check=False)
        except subprocess.TimeoutExpired:
            return Row(kind="throughput", pair=pair, error=f"iperf3 gave no result in {duration + 30} s")
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            return Row(kind="throughput", pair=pair, error=f"iperf3: {tail}")
        try:
            return Row(kind="throughput", pair=pair, throughput=parse_iperf3(doc))
        except ParseError as exc:
            return Row(kind="throughput", pair=pair, error=str(exc))
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=5)


def latency(pair: Pair, *, proto: str, count: int, timeout: float, max_seconds: float) -> Row:
    """``count`` requests, one at a time, to the server pod's echo server (``proto`` udp or tcp)."""
    if pair.server is None or pair.address is None:
        return Row(kind="latency", pair=pair, error=pair.problem)
    argv = _in(
        pair.client,
        sys.executable,
        "-m",
        "magw.ops.bench.rrprobe",
        "--target",
        f"{proto}:{pair.address.ip}:{ECHO_PORT}",
        "--count",
        str(count),
        "--timeout",
        f"{timeout:g}",
        "--max-seconds",
        f"{max_seconds:g}",
    )
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=max_seconds + 30, check=False)
    except subprocess.TimeoutExpired:
        return Row(kind="latency", pair=pair, error=f"the probe gave no result in {max_seconds + 30:g} s")
    try:
        doc = json.loads(proc.stdout)
        return Row(kind="latency", pair=pair, latency=summarize_rr(doc))
    except json.JSONDecodeError:
        tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Row(kind="latency", pair=pair, error=f"latency probe: {tail}")
    except ParseError as exc:
        return Row(kind="latency", pair=pair, error=str(exc))


def run_all(pairs: Sequence[Pair], measure: Callable[[Pair], Row]) -> list[Row]:
    """One pair after the other (never two measurements at once: they would share the CPU and the cables)."""
    return [measure(p) for p in pairs]
