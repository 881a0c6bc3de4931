"""``magw benchmark throughput|latency --kubeconfig CLIENT --kubeconfig SERVER ...``: the lab benchmark's
measurements with pods made through the clusters' API servers (``magw.ops.verify.kubepods``).

Per server cluster and placement (``gateways``: both pods on the first gateway node of their cluster, the cable
only; ``pods``: both on the first worker, what applications get), one after the other (never two at once):

- a server pod: ``iperf3 -s -1`` (throughput) or the echo server (latency), with Globalnet exported through a
  headless Service for its global IP; the client starts once the server's log says it listens;
- a client pod: ``iperf3 -c ... -J`` or ``python -m magw.ops.bench.rrprobe`` per protocol; its log is the tool's JSON,
  parsed as in lab mode (``magw.ops.bench.stats``): a table of figures, not the tools' raw output.

A cluster with no such node (no worker) gives a skipped row; everything made is deleted at the end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import attrs

from magw.ops.bench.stats import Latency, ParseError, Throughput, parse_iperf3, summarize_rr
from magw.ops.verify.kubeapi import KubeCallError
from magw.ops.verify.kubepods import Cluster, KubeRunError, Run, Settings, close_all, open_clusters, why_not_running

IPERF_PORT = 5201
ECHO_PORT = 8080
LISTEN_LIMIT = 15.0  # seconds for a server pod's log to say it listens
SERVING = {"throughput": "Server listening", "latency": '"traffic.serving"'}


@attrs.frozen(kw_only=True)
class KubeRow:
    kind: str  # "throughput" or "latency"
    placement: str
    client_cluster: str
    server_cluster: str
    client: str | None = None
    client_node: str | None = None
    server: str | None = None
    server_node: str | None = None
    target: str | None = None
    via: str | None = None
    throughput: Throughput | None = None
    latency: Latency | None = None
    error: str | None = None
    skipped: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None or self.skipped

    def who(self) -> tuple[str, str, str]:
        client = f"{self.client_cluster}/{self.client or '-'}@{self.client_node or '-'}"
        server = f"{self.server_cluster}/{self.server or '-'}@{self.server_node or '-'}"
        return client, server, f"{self.target} ({self.via})" if self.target else "-"

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "between": self.placement, "client": self.client,
                               "client_node": self.client_node, "client_cluster": self.client_cluster,
                               "server": self.server, "server_node": self.server_node,
                               "server_cluster": self.server_cluster, "target": self.target, "via": self.via,
                               "ok": self.ok, "skipped": self.skipped, "error": self.error}  # fmt: skip
        if self.throughput is not None:
            doc["throughput"] = self.throughput.as_json()
        if self.latency is not None:
            doc["latency"] = self.latency.as_json()
        return doc


@attrs.frozen(kw_only=True)
class Measure:
    kind: str
    duration: int = 5
    streams: int = 1
    protos: tuple[str, ...] = ("udp", "tcp")
    count: int = 200
    timeout: float = 1.0
    max_seconds: float = 30.0

    def server_argv(self) -> list[str]:
        if self.kind == "throughput":
            return ["iperf3", "-s", "-1", "-p", str(IPERF_PORT), "--forceflush"]
        return ["python", "-m", "magw.lab.payload.traffic", "serve", "--name", "bench", "--port", str(ECHO_PORT),
                "--max-seconds", "3600"]  # fmt: skip

    def ports(self) -> list[tuple[str, int]]:
        return [("tcp", IPERF_PORT)] if self.kind == "throughput" else [("tcp", ECHO_PORT), ("udp", ECHO_PORT)]

    def clients(self, ip: str) -> list[tuple[str, list[str]]]:
        """(protocol, argv) of each client pod to run against ``ip``."""
        if self.kind == "throughput":
            return [("tcp", ["iperf3", "-c", ip, "-p", str(IPERF_PORT), "-J", "-t", str(self.duration),
                             "-P", str(self.streams), "--connect-timeout", "3000"])]  # fmt: skip
        return [(p, ["python", "-m", "magw.ops.bench.rrprobe", "--target", f"{p}:{ip}:{ECHO_PORT}",
                     "--count", str(self.count), "--timeout", f"{self.timeout:g}",
                     "--max-seconds", f"{self.max_seconds:g}"]) for p in self.protos]  # fmt: skip

    def limit(self) -> float:
        return (self.duration if self.kind == "throughput" else self.max_seconds) + 60.0


def _node(c: Cluster, placement: str) -> str | None:
    nodes = c.gateways if placement == "gateways" else c.workers
    return nodes[0] if nodes else None


async def _one(r: Run, m: Measure, a: Cluster, b: Cluster, placement: str, k: int) -> list[KubeRow]:
    base = KubeRow(kind=m.kind, placement=placement, client_cluster=a.id, server_cluster=b.id,
                   client_node=_node(a, placement), server_node=_node(b, placement))  # fmt: skip
    if base.client_node is None or base.server_node is None:
        missing = a.id if base.client_node is None else b.id
        what = "gateway" if placement == "gateways" else "worker"
        return [attrs.evolve(base, error=f"cluster {missing} has no {what} node", skipped=True)]
    server = f"magw-bench-{r.id}-{k}-server"
    base = attrs.evolve(base, server=server)
    await r.create_pod(b, server, "server", m.server_argv(), node=base.server_node)
    if b.global_cidr is not None:
        await r.export(b, server, m.ports())
    ip, problem = await r.address(b, server, await r.pod(b, server, terminal=False))
    base = attrs.evolve(base, target=str(ip) if ip else None, via="global IP" if b.global_cidr else "pod IP")
    if ip is None:
        return [attrs.evolve(base, error=problem)]
    if not await r.wait_log(b, server, SERVING[m.kind], LISTEN_LIMIT):
        return [attrs.evolve(base, error=f"pod {server}: not listening after {LISTEN_LIMIT:g} s")]
    rows = []
    for j, (proto, argv) in enumerate(m.clients(str(ip))):
        client = f"magw-bench-{r.id}-{k}-client-{j}"
        await r.create_pod(a, client, "client", argv, node=base.client_node)
        pod = await r.pod(a, client, terminal=True, limit=m.limit())
        row = attrs.evolve(base, client=client)
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            rows.append(attrs.evolve(row, error=why_not_running(pod)))
            continue
        rows.append(_parse(row, m, proto, await r.log(a, client), why_not_running(pod)))
    return rows


def _parse(row: KubeRow, m: Measure, proto: str, text: str, state: str) -> KubeRow:
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        tail = (text.strip().splitlines() or [state])[-1]
        return attrs.evolve(row, error=f"{'iperf3' if m.kind == 'throughput' else 'latency probe'} ({proto}): {tail}")
    try:
        if m.kind == "throughput":
            return attrs.evolve(row, throughput=parse_iperf3(doc))
        return attrs.evolve(row, latency=summarize_rr(doc))
    except ParseError as exc:
        return attrs.evolve(row, error=str(exc))


async def _run(kubeconfigs: Sequence[str], s: Settings, m: Measure, src: str | None, dsts: Sequence[str] | None,
               placements: Sequence[str]) -> tuple[list[str], list[KubeRow]]:  # fmt: skip
    clusters = await open_clusters(kubeconfigs, s)
    try:
        by_id = {c.id: c for c in clusters}
        for wanted in (src, *(dsts or ())):
            if wanted is not None and wanted not in by_id:
                raise KubeRunError(f"{wanted!r} is not one of the kubeconfigs' clusters ({', '.join(by_id)})")
        a = by_id[src] if src else clusters[0]
        servers = [by_id[d] for d in dsts] if dsts else [c for c in clusters if c is not a]
        if a in servers:
            raise KubeRunError(f"--from {a.id} and --to {a.id}: the pairs must cross clusters")
        r = Run(s)
        rows: list[KubeRow] = []
        left: list[str] = []
        try:
            await r.namespace(a)
            k = 0
            for b in servers:
                await r.namespace(b)
                for placement in placements:
                    rows += await _one(r, m, a, b, placement, k)
                    k += 1
                    left += await r.cleanup()  # the next pair runs alone
        finally:
            left += await asyncio.shield(r.cleanup())
        if left:
            rows.append(KubeRow(kind=m.kind, placement="-", client_cluster=a.id, server_cluster="-",
                                error=f"left behind: {'; '.join(left)}"))  # fmt: skip
        return list(by_id), rows
    except KubeCallError as exc:
        raise KubeRunError(str(exc)) from None
    finally:
        await close_all(clusters)


def run(kubeconfigs: Sequence[str], settings: Settings, measure: Measure, *, src: str | None = None,
        dsts: Sequence[str] | None = None, placements: Sequence[str] = ("gateways", "pods"),
        ) -> tuple[list[str], list[KubeRow]]:  # fmt: skip
    """The clusters' ids and one row per measurement; ``KubeRunError`` when it could not run."""
    return asyncio.run(_run(kubeconfigs, settings, measure, src, dsts, placements))
