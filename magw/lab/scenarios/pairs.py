"""Measure a failover over several pod pairs at once: the traffic that spreads UDP flows over OVN's gateway routers.

In Open vSwitch's userspace datapath, OVN's ECMP hash (``dp_hash`` over the symmetric L3/L4 fields) covers TCP
ports but not UDP ports: every UDP flow between one pair of pods takes the same gateway router. Flows between
several pairs of pods (client pods of one cluster, server pods of another) spread over the gateway routers by
their addresses; replies spread over the client cluster's gateways by the remote gateways' kernel nexthop groups,
flow by flow, as in a plain lab. So the same traffic serves both kinds of lab, side by side.

``measure_pairs``: a reflector in every server pod (``magw.lab.payload.losswatch``), one paced UDP stream per pair,
each pair's flows from their own range of client ports (the gateways' flowwatch sets are keyed by client port, so
every flow stays apart), the paths read just before the event and near the end (``magw.lab.observe.flowwatch``),
and the event ``event_at`` seconds in. The result is ``magw.lab.scenarios.failover``'s ``FailoverResult``. Used by
``benchmarks/ovn_failover.py`` and ``tests/lab/test_lab_ovn_failover.py``. Every process it starts is stopped by PID,
also on failure; every wait is bounded.

On an OVN lab, never send a UDP flow again with the client ports of an earlier measurement: every gateway router
commits each new connection with ``nat(src)`` in Open vSwitch's userspace conntrack, and Open vSwitch 3.1.0
(Debian 12) aborts (``assertion conn->conn_type == CT_CONN_TYPE_DEFAULT failed in conn_update_state()``) when a
5-tuple comes back some 30 s later, after its entries expired: reproduced here twice, the gateways' ovs-vswitchd
died and their traffic with them. Upstream fixed it in 3.1.3 and 3.2 (commit 6753b1086, "conntrack: Remove
nat_conn introducing key directionality"). So ``make_pairs`` takes the first client port.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence

import attrs

from magw.lab.build import procs
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.observe import flowwatch
from magw.lab.scenarios.failover import (
    BASE_PORT,
    REFLECT_PORT,
    FailoverResult,
    _start_reflectors,
    _stream,
    flow_outcome,
)
from magw.lab.spec.layout import LabLayout, PodLayout

MAX_PAIRS = 64
START_LIMIT = 3.0  # seconds the event may wait for streams that start late
MIN_AFTER = 2.0  # seconds the waiting for late streams leaves between the event and the last read
READ_BEFORE_END = 0.3  # seconds: the last read of the paths, before the streams end (the sets forget in 0.4 s)


@attrs.frozen(kw_only=True)
class Pair:
    """A client pod and a server pod; the pair's flows send from client ports ``base`` .. ``base + flows - 1``."""

    client: PodLayout
    server: PodLayout
    base: int
    flows: int

    @property
    def sports(self) -> range:
        return range(self.base, self.base + self.flows)


def make_pairs(
    clients: Sequence[PodLayout], servers: Sequence[PodLayout], flows: int, base: int = BASE_PORT
) -> tuple[Pair, ...]:
    """Every client with every server, ``flows`` split over the pairs as evenly as possible (at least one each), in
    consecutive client port ranges from ``base``. On an OVN lab give every measurement ports of its own (see the
    module docstring)."""
    combos = [(c, s) for c in clients for s in servers]
    if not 1 <= len(combos) <= MAX_PAIRS:
        raise ValueError(f"pairs: 1..{MAX_PAIRS} (clients x servers), got {len(combos)}")
    if flows < len(combos):
        raise ValueError(f"flows: at least one per pair ({len(combos)} pairs), got {flows}")
    if not 1024 <= base <= 65536 - flows:
        raise ValueError(f"base: {flows} client ports from {base} do not fit below 65536")
    pairs = []
    for i, (client, server) in enumerate(combos):
        size = flows // len(combos) + (1 if i < flows % len(combos) else 0)
        pairs.append(Pair(client=client, server=server, base=base, flows=size))
        base += size
    return tuple(pairs)


def _collect(running: Sequence[tuple[Pair, subprocess.Popen[str]]], duration: float) -> list[dict[str, object]]:
    reports: list[dict[str, object]] = []
    deadline = time.monotonic() + duration + 60
    for pair, proc in running:
        out, err = proc.communicate(timeout=max(deadline - time.monotonic(), 1.0))
        if proc.returncode != 0:
            raise LabError(f"losswatch stream {pair.client.name} -> {pair.server.name}: exit {proc.returncode}: "
                           f"{err.strip()[-300:]}")  # fmt: skip
        doc = json.loads(out)
        reports.extend({**flow, "scheduled": doc["scheduled"]} for flow in doc["flows"])
    return reports


def _wait_all_seen(lab: LabLayout, sports: Sequence[int], at: float, limit: float) -> list[flowwatch.FlowPath]:
    """The paths at ``at`` (monotonic), or later, once every flow has crossed a gateway both ways: on a loaded
    machine the stream processes can take seconds to start. Bounded: no later than ``limit`` (then as they are)."""
    while True:
        time.sleep(max(at - time.monotonic(), 0.0))
        paths = flowwatch.read_paths(lab, sports)
        if all(p.forward and p.back for p in paths) or time.monotonic() >= limit:
            return paths
        at = time.monotonic() + 0.2


def measure_pairs(
    lab: LabLayout,
    st: LabState,
    *,
    pairs: Sequence[Pair],
    event: Callable[[], object],
    victim: str,
    rate: int = 100,
    duration: float = 6.0,
    event_at: float = 2.0,
) -> FailoverResult:
    """Stream over every pair; at ``event_at`` s (later, by up to ``START_LIMIT`` s but leaving ``MIN_AFTER`` s
    before the last read, until every flow runs both ways) read the paths and call ``event()``; read the paths
    again just before the streams end. ``failed_at`` of the result is the wall-clock time right before
    ``event()``."""
    if not 0 < event_at < duration - READ_BEFORE_END:
        raise ValueError(f"event_at: must be within the stream's duration {duration}, got {event_at}")
    sports = [s for p in pairs for s in p.sports]
    if len(set(sports)) != len(sports):
        raise ValueError("pairs: their client port ranges overlap")
    servers = {p.server.name: p.server for p in pairs}
    reflectors: list[procs.ProcRecord] = []
    paths: dict[str, list[flowwatch.FlowPath]] = {}
    try:
        for server in servers.values():
            reflectors += _start_reflectors(st, server, 1)
        flowwatch.install(lab.gateways, REFLECT_PORT)
        time.sleep(0.3)
        running = [
            (p, _stream(p.client, p.server.ip, flows=p.flows, rate=rate, duration=duration, base=p.base))
            for p in pairs
        ]
        try:
            started = time.monotonic()
            latest = min(started + event_at + START_LIMIT, started + duration - READ_BEFORE_END - MIN_AFTER)
            paths["before"] = _wait_all_seen(lab, sports, started + event_at, max(latest, started + event_at))
            failed_at = time.time()
            event()
            # Read while the flows still run (the sets forget a flow 400 ms after its last datagram).
            read_at = started + duration - READ_BEFORE_END
            late = time.monotonic() - read_at
            if late > 0:
                raise LabError(f"the event took too long ({late:.1f} s past the last read) to see the flows' paths")
            time.sleep(read_at - time.monotonic())
            paths["after"] = flowwatch.read_paths(lab, sports)
            reports = _collect(running, duration)
        finally:
            for _pair, proc in running:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=5)
    finally:
        procs.stop(reflectors, grace=1.0)
        flowwatch.remove(lab.gateways)
    by_port = {int(str(r["sport"])): r for r in reports}
    outcomes = tuple(flow_outcome(b, a, by_port[b.sport]) for b, a in zip(paths["before"], paths["after"], strict=True))
    return FailoverResult(victim=victim, rate=rate, flows=outcomes, failed_at=failed_at)
