"""Traced UDP streams for ``magw verify --kubeconfig``, with pods made through the API servers: the every-gateway
check and the hop where a failing check died (the same tables and verdicts as ``--lab`` mode: ``hops``, ``trace``,
``gateways``).

1. A tracer pod on every node of every cluster (``python -m magw.ops.verify.nodetrace``: privileged,
   ``hostNetwork``, ``nodeName`` set, tolerating every taint), its table named after the run; the streams wait
   until each tracer says it traces. A node whose tracer does not is named, and nothing is traced (a missing
   node would read as a hop where flows die).
2. A stream pod per request (``python -m magw.lab.payload.losswatch stream``) on the chosen node, from its own
   range of client ports; its log is the per-flow counts once it ended.
3. ``SETTLE`` seconds later (a tracer looks every 0.5 s), each tracer's last ``seen`` line: which nodes saw each
   flow's requests and replies.

Every pod is the run's and goes with its cleanup (a deleted tracer removes its table); a tracer also ends by
itself at ``--seconds``, whatever happens to verify.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine, Iterable, Sequence
from ipaddress import IPv4Address
from typing import Any, TypeVar

import attrs

from magw.ops.verify import hops
from magw.ops.verify.kubeapi import KubeCallError
from magw.ops.verify.kubepods import Cluster, Run, json_objects, why_not_running
from magw.ops.verify.trace import Flow, flows_of, port_bases

T = TypeVar("T")
PYTHON = ("python", "-m")
TRACING = '"event": "tracing"'
TRACER_LIMIT = 15.0  # seconds for a running tracer to load its table
TRACER_SECONDS = 600  # a tracer's own bound
_HALF = hops.PORT_LO + (hops.PORT_HI - hops.PORT_LO + 1) // 2
TRACE_PORTS = (hops.PORT_LO, _HALF - 1)  # the suite's traced streams; --failover's: the other half
FAILOVER_PORTS = (_HALF, hops.PORT_HI)
SETTLE = 1.2
RATE = 20
DURATION = 2.0


class TraceError(Exception):
    """The streams could not be traced; ``str()`` is one line naming what failed."""


@attrs.frozen(kw_only=True)
class Stream:
    """``flows`` UDP flows from a pod of cluster ``client`` on ``node`` to ``ip``:``port`` (an echo server)."""

    client: str  # the cluster's id
    node: str
    ip: IPv4Address
    port: int
    flows: int


def ports_of_run(total: int, span: tuple[int, int], pick: Callable[[int], int] = secrets.randbelow
                 ) -> tuple[int, int]:  # fmt: skip
    """Where in ``span`` (lo, hi) this run's ``total`` client ports start, at random, and ``span``'s end.

    Each run's stream pods are new pods with new IPs. With Globalnet a gateway SNATs them to the same egress IP,
    and a port an earlier run's flow (a conntrack entry lives 30-120 s) holds for that IP would be rewritten:
    the remote nodes would not see the flow under its port. Runs starting at random places rarely share one."""
    lo, hi = span
    if total > hi - lo + 1:
        return lo, hi  # port_bases says it does not fit
    return lo + pick(hi - lo + 2 - total), hi


def seen_lines(log: str) -> list[tuple[float, set[int], set[int]]]:
    """A tracer's ``seen`` lines, in order: when (its node's wall clock; 0 when not said), the client ports of
    requests and of replies."""
    out = []
    for doc in json_objects(log):
        if doc.get("event") == "seen":
            at = doc.get("at")
            out.append((float(at) if isinstance(at, (int, float)) else 0.0, {int(p) for p in doc.get("req") or ()},
                        {int(p) for p in doc.get("rep") or ()}))  # fmt: skip
    return out


def _seen(log: str) -> tuple[set[int], set[int]] | None:
    """A tracer's last ``seen`` line (None before the first)."""
    lines = seen_lines(log)
    return (lines[-1][1], lines[-1][2]) if lines else None


def stream_doc(log: str) -> dict[str, Any] | None:
    """The stream's result: the last JSON object of its log with ``flows``."""
    found = None
    for doc in json_objects(log):
        if isinstance(doc.get("flows"), list):
            found = doc
    return found


def _nodes(clusters: Sequence[Cluster]) -> list[tuple[Cluster, str]]:
    nodes = [(c, n) for c in clusters for n in (*c.gateways, *c.workers)]
    names = [n for _, n in nodes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TraceError(f"node names repeat across the clusters ({', '.join(twice)}): a trace cannot tell them apart")
    return nodes


async def start_tracer(r: Run, c: Cluster, node: str, name: str, table: str, *extra: str) -> None:
    """Tracer pod ``name`` on ``node`` (``nodetrace --table TABLE EXTRA...``), once it traces; else ``TraceError``."""
    argv = [*PYTHON, "magw.ops.verify.nodetrace", "--table", table, "--seconds", str(TRACER_SECONDS),
            "--allow-init-netns", *extra]  # fmt: skip
    await r.create_pod(c, name, "tracer", argv, node, host_network=True)
    pod = await r.pod(c, name, terminal=False)
    if (pod.get("status") or {}).get("phase") != "Running":
        raise TraceError(f"node {c.id}/{node}: its tracer did not run ({why_not_running(pod)})")
    if not await r.wait_log(c, name, TRACING, TRACER_LIMIT):
        tail = (await r.log(c, name)).strip().splitlines()
        why = tail[-1] if tail else "nothing in its log"
        raise TraceError(f"node {c.id}/{node}: its tracer did not load its table within {TRACER_LIMIT:g} s ({why})")


async def tracer_log(r: Run, c: Cluster, node: str, name: str) -> str:
    """Tracer pod ``name``'s log, once it is known to trace still (a tracer that ended saw nothing since)."""
    try:
        pod = await r.pod(c, name, terminal=False, limit=0)
        if (pod.get("status") or {}).get("phase") != "Running":
            raise TraceError(f"node {c.id}/{node}: its tracer stopped ({why_not_running(pod)})")
        return await r.log(c, name)
    except KubeCallError as exc:
        raise TraceError(f"node {c.id}/{node}: its tracer's log: {exc}") from None


def stream_argv(ip: IPv4Address, port: int, flows: int, rate: int, duration: float, base: int) -> list[str]:
    return [*PYTHON, "magw.lab.payload.losswatch", "stream", "--target", f"{ip}:{port}", "--flows", str(flows),
            "--rate", str(rate), "--duration", f"{duration:g}", "--base-port", str(base), "--drain", "1"]  # fmt: skip


async def stream_result(r: Run, c: Cluster, name: str, what: str, duration: float) -> dict[str, Any]:
    """Stream pod ``name``'s result once it ended; ``TraceError`` (starting with ``what``) when it has none."""
    pod = await r.pod(c, name, terminal=True, limit=r.s.pod_timeout + duration + 30)
    if (pod.get("status") or {}).get("phase") != "Succeeded":
        raise TraceError(f"{what}: {why_not_running(pod)}")
    doc = stream_doc(await r.log(c, name))
    if doc is None:
        raise TraceError(f"{what}: no result in its log")
    return doc


async def _stream(r: Run, c: Cluster, s: Stream, base: int, name: str) -> dict[str, Any]:
    await r.create_pod(c, name, "stream", stream_argv(s.ip, s.port, s.flows, RATE, DURATION, base), s.node)
    return await stream_result(r, c, name, f"traced stream from {c.id}/{s.node} to {s.ip}", DURATION)


async def all_of(coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Every one's result, once all ended (none left creating pods behind the cleanup); the first error raised."""
    done = await asyncio.gather(*coros, return_exceptions=True)
    for d in done:
        if isinstance(d, BaseException):
            raise d
    return done  # type: ignore[return-value]


async def run(r: Run, clusters: Sequence[Cluster], streams: Sequence[Stream]) -> list[list[Flow]]:
    """Trace every stream (at once); per stream, its flows in client port order. ``TraceError`` when it could not
    (a tracer or a stream that did not run); ``KubeCallError`` from the API passes through."""
    by_id = {c.id: c for c in clusters}
    nodes = _nodes(clusters)
    try:
        bases = port_bases([s.flows for s in streams], *ports_of_run(sum(s.flows for s in streams), TRACE_PORTS))
    except ValueError as exc:
        raise TraceError(str(exc)) from None
    tracers = [(c, n, f"magw-verify-{r.id}-nt{i}") for i, (c, n) in enumerate(nodes)]
    await all_of(start_tracer(r, c, n, name, f"magw_verify_{r.id}") for c, n, name in tracers)
    docs = await all_of(_stream(r, by_id[s.client], s, b, f"magw-verify-{r.id}-st{i}")
                      for i, (s, b) in enumerate(zip(streams, bases, strict=True)))  # fmt: skip
    await asyncio.sleep(SETTLE)
    seen: dict[str, tuple[set[int], set[int]]] = {}
    for c, node, name in tracers:
        got = _seen(await tracer_log(r, c, node, name))
        seen[node] = got if got is not None else (set(), set())
    return [flows_of(doc, seen) for doc in docs]
