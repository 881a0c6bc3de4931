"""``magw verify --kubeconfig A --kubeconfig B --failover``: cut one gateway's datapath under traffic, through the
API servers, and measure what moved (the same report as ``--lab`` mode's ``failover.FailoverReport``).

1. The victim: ``--victim NODE`` (a gateway of one of the clusters), else the first gateway of the first cluster
   with two or more (so its flows have somewhere to move), else the first gateway.
2. A tracer pod on every gateway of the victim's cluster and the next one (``nodetrace --keep 0.4 --every 0.1``:
   a port leaves a set 0.4 s after its last packet, so a set says where a flow runs now, with the node's clock).
3. A stream pod on a node of the victim's cluster other than the victim (a worker first): ``--failover-flows``
   paced UDP flows to the next cluster's server pod (its global IP with Globalnet) for ``--failover-duration``.
4. Once the victim's cluster's gateways see the flows, a fail pod on the victim (``nodefail``: magw's datapath
   devices drop everything) for the stream's length plus 2 s; it restores them by itself and says so.
5. Per flow: the gateways it crossed just before the failure and 0.3 s before the stream's end (each tracer's
   state at those wall-clock times), what it lost and its longest loss window (``losswatch``).

The nodes' clocks are compared with each other (the fail pod's, the stream pod's, the tracers'): on a real
cluster they are NTP-synchronised to well under the 0.1 s a tracer looks every. The route agents' own detection
times are not read (no node's files are entered): the loss windows are what the failure cost the flows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from magw.lab.observe.flowwatch import FlowPath
from magw.lab.scenarios.failover import FailoverResult, flow_outcome
from magw.ops.verify.failover import FailoverReport
from magw.ops.verify.kubepods import ECHO_PORT, Cluster, Run, Target, json_objects, why_not_running
from magw.ops.verify.kubetrace import (
    FAILOVER_PORTS,
    TraceError,
    all_of,
    ports_of_run,
    seen_lines,
    start_tracer,
    stream_argv,
    stream_result,
    tracer_log,
)

KEEP = 0.4
EVERY = 0.1
SEEN_LIMIT = 15.0  # seconds for the flows to show on the victim's cluster's gateways
HOLD_MARGIN = 2.0  # the datapath stays cut this long past the stream's end
AFTER = 0.3  # the "after" paths: this long before the stream's end


class FailoverInputError(ValueError):
    """A ``--victim`` that is no gateway of the clusters; ``str()`` is one line."""


@attrs.frozen(kw_only=True)
class Spec:
    victim: str | None
    flows: int = 32
    rate: int = 100
    duration: float = 6.0


@attrs.frozen(kw_only=True)
class Plan:
    victim: str
    local: Cluster
    remote: Cluster
    client_node: str


def choose(clusters: Sequence[Cluster], victim: str | None) -> Plan:
    """The victim, its cluster, the next cluster and the node the stream starts on; ``FailoverInputError``."""
    gateways = [(c, g) for c in clusters for g in c.gateways]
    if victim is None:
        pick = next(((c, c.gateways[0]) for c in clusters if len(c.gateways) >= 2), gateways[0] if gateways else None)
        if pick is None:
            raise FailoverInputError("verify --failover: no cluster has a gateway node (submariner.io/gateway=true)")
    else:
        pick = next(((c, g) for c, g in gateways if g == victim), None)
        if pick is None:
            known = ", ".join(f"{c.id}/{g}" for c, g in gateways) or "none"
            raise FailoverInputError(f"verify --failover: --victim {victim} is not a gateway of the clusters "
                                     f"(gateways: {known})")  # fmt: skip
    local, node = pick
    remote = clusters[(clusters.index(local) + 1) % len(clusters)]
    senders = [n for n in (*local.workers, *local.gateways) if n != node]
    if not senders:
        raise FailoverInputError(f"verify --failover: {local.id} has no node besides {node} to send from")
    return Plan(victim=node, local=local, remote=remote, client_node=senders[0])


def state_at(lines: Sequence[tuple[float, set[int], set[int]]], t: float) -> tuple[set[int], set[int]]:
    """A tracer's sets at wall-clock ``t``: its last ``seen`` line at or before ``t`` (lines come on change)."""
    state: tuple[set[int], set[int]] = (set(), set())
    for at, req, rep in lines:
        if at > t:
            break
        state = (req, rep)
    return state


def paths(sports: Sequence[int], tracers: Mapping[str, Sequence[tuple[float, set[int], set[int]]]], t: float
          ) -> list[FlowPath]:  # fmt: skip
    """Per client port, the gateways whose sets held its requests and its replies at ``t``."""
    states = {gw: state_at(lines, t) for gw, lines in tracers.items()}
    return [FlowPath(sport=p, forward=frozenset(g for g, (req, _) in states.items() if p in req),
                     back=frozenset(g for g, (_, rep) in states.items() if p in rep)) for p in sports]  # fmt: skip


def _event(log: str, name: str) -> dict[str, Any] | None:
    return next((doc for doc in json_objects(log) if doc.get("event") == name), None)


async def _wait_event(r: Run, c: Cluster, pod: str, name: str, limit: float) -> dict[str, Any] | None:
    """Pod ``pod``'s first ``name`` event within ``limit`` seconds."""
    if await r.wait_log(c, pod, f'"event": "{name}"', limit):
        return _event(await r.log(c, pod), name)
    return None


async def _flows_shown(r: Run, c: Cluster, tracers: Sequence[str], sports: set[int]) -> bool:
    """Whether a tracer of ``c``'s gateways saw the stream's requests within ``SEEN_LIMIT`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SEEN_LIMIT
    while loop.time() < deadline:
        for name in tracers:
            if any(req & sports for _, req, _ in seen_lines(await r.log(c, name))):
                return True
        await asyncio.sleep(0.2)
    return False


async def run(r: Run, plan: Plan, spec: Spec, target: Target) -> FailoverReport:
    """Measure the failover of ``plan.victim`` with flows to ``target`` (the remote server pod, with an address);
    ``TraceError`` (one line) when it could not be measured."""
    if target.ip is None:
        raise TraceError(f"failover: {plan.remote.id}'s server pod has no address ({target.problem})")
    gws = [(c, g) for c in (plan.local, plan.remote) for g in c.gateways]
    tracers = {g: (c, f"magw-verify-{r.id}-fo{i}") for i, (c, g) in enumerate(gws)}
    await all_of(start_tracer(r, c, g, name, f"magw_verify_fo_{r.id}", "--keep", f"{KEEP:g}", "--every", f"{EVERY:g}")
                 for g, (c, name) in tracers.items())  # fmt: skip
    base = ports_of_run(spec.flows, FAILOVER_PORTS)[0]
    sports = list(range(base, base + spec.flows))
    stream = f"magw-verify-{r.id}-fo-stream"
    await r.create_pod(plan.local, stream, "stream", stream_argv(target.ip, ECHO_PORT, spec.flows, spec.rate,
                                                                spec.duration, base), plan.client_node)  # fmt: skip
    local_tracers = [name for g, (c, name) in tracers.items() if c is plan.local]
    if not await _flows_shown(r, plan.local, local_tracers, set(sports)):
        pod = await r.pod(plan.local, stream, terminal=False, limit=0)
        raise TraceError(f"failover: the stream's flows never showed on {plan.local.id}'s gateways within "
                         f"{SEEN_LIMIT:g} s ({why_not_running(pod)})")  # fmt: skip
    fail = f"magw-verify-{r.id}-fail"
    hold = spec.duration + HOLD_MARGIN
    argv = ["python", "-m", "magw.ops.verify.nodefail", "--table", f"magw_verify_fail_{r.id}", "--hold", f"{hold:g}",
            "--allow-init-netns"]  # fmt: skip
    await r.create_pod(plan.local, fail, "fail", argv, plan.victim, host_network=True)
    failed = await _wait_event(r, plan.local, fail, "failed", r.s.pod_timeout)
    if failed is None:
        pod = await r.pod(plan.local, fail, terminal=False, limit=0)
        raise TraceError(f"failover: {plan.victim}'s datapath was not cut ({why_not_running(pod)})")
    doc = await stream_result(r, plan.local, stream, f"failover stream from {plan.client_node}", spec.duration)
    failed_at, started = float(failed["at"]), float(doc.get("started_at") or 0.0)
    if not started < failed_at < started + spec.duration * 2 / 3:
        raise TraceError(f"failover: the datapath was cut {failed_at - started:.1f} s into the {spec.duration:g} s "
                         "stream, not within its first two thirds (give a longer --failover-duration)")  # fmt: skip
    recovered = await _wait_event(r, plan.local, fail, "recovered", hold + r.s.pod_timeout)
    if recovered is None:
        raise TraceError(f"failover: {plan.victim} did not say it restored its datapath; its pod is deleted now")
    lines = {g: seen_lines(await tracer_log(r, c, g, name)) for g, (c, name) in tracers.items()}
    before = paths(sports, lines, failed_at - 0.05)
    after = paths(sports, lines, started + spec.duration - AFTER)
    by_port = {int(f["sport"]): {"scheduled": doc.get("scheduled", 0), **f} for f in doc["flows"]}
    outcomes = tuple(flow_outcome(b, a, by_port[b.sport]) for b, a in zip(before, after, strict=True))
    result = FailoverResult(victim=plan.victim, rate=spec.rate, flows=outcomes, failed_at=failed_at)
    return FailoverReport(victim=plan.victim, client=f"{plan.local.id}/{stream} on {plan.client_node}",
                          server=target.server, target=f"{target.ip} ({target.via})", result=result,
                          detections=())  # fmt: skip
