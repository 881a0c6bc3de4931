"""Benchmark: gateway failover in a lab, per spreading strategy, with real paced UDP flows.

For each strategy (default: resilient, then multipath) a lab is built (two clusters,
``--gateways`` gateways and one worker each), ``--flows`` UDP flows of ``--rate``
datagrams/s run from east's worker pod to west's worker pod through a reflector, and
east-gw1 loses power (links down, daemons SIGKILLed) ``--fail-at`` seconds in. Then the
gateway comes back mid-stream (recovery row). ``--single`` adds single-gateway mode:
the active gateway dies and the standby takes over.

Per run it prints: the loss window of the flows that lost anything (p50, max, and p50
over the 300 ms target), the share of flows with any loss, of flows that crossed the
failed gateway in either direction, of flows that moved gateway in either direction
(from nft sets in every gateway, not from a model) and that over the crossed share
(1.00: only the flows that had to move did), the share that moved in the forward
direction alone and that times N (1.00: exactly 1/N moved), the datagrams lost by
flows that never crossed the failed gateway (target: 0), and the share of the scheduled
datagrams the senders sent (below 100%: their CPU was starved, e.g. by other work on the
machine, and they stopped on time with fewer datagrams; the figures are less sure). Flows hash independently in
each direction, so about 1 - (1 - 1/N)^2 of them cross a given gateway at all.
Targets: window <= 300 ms, about 1/N of the flows moved per direction with resilient
groups, 0 loss on untouched flows.

``--cable wireguard`` builds the labs with the WireGuard cable (the inter-cluster VXLAN through one
wireguard-go device per gateway; the header line and the JSON name the cable, absent: vxlan). A gateway that
loses power loses its wireguard-go too (it runs in the node's namespace, a child of the route agent, and dies
with it); on recovery the route agent starts a new one, with the node's key, and the remote gateways, whose
sessions with the old process are useless, answer its handshake. So for a returning gateway what matters is
how long until it carries traffic again, handshake included: ``--carry`` (on by default with wireguard,
``--no-carry`` skips it; with vxlan it gives the baseline) measures it in the recovery run (JSON:
``<strategy>_carry``). From the recovery on, a prober in the
client pod opens a fresh UDP flow every 20 ms (a new source port: a new socket hash, so a new bucket of the
groups; established flows do not move back to a returning gateway with resilient groups, by design) and
records when each was answered; the victim's nft sets (polled every 0.1 s) say which fresh flows it
forwarded toward the server and which it received back from the remote cluster. Printed: the first
answered fresh flow that crossed the victim toward the server (it left through the victim's tunnel and was
answered: the tunnel carries traffic, handshake included) and the first that came back through it, in ms
after the recovery began (its links up and its daemons restarted), with the time the flow was sent beside:
a datagram queued by WireGuard while the handshake runs is answered late. With ``--carry`` the recovery run's
traffic lasts ``--fail-at`` + ``--carry-seconds`` (default 12) + 0.5 s, and the fresh flows run from the
recovery to its end ("never": not within it). Beside it, from the daemons' logs, where the time went: when
the victim's gateway daemon and route agent started (Python processes: slow to start on a loaded machine),
when the route agent made its WireGuard device, and when every remote gateway and a local worker declared
it up. Every datagram of the flows crosses wireguard-go twice, at a high CPU cost per packet on the 2-vCPU
machine of docs/performance.md: use fewer flows there (``--flows 16`` or less); with 16 the victim's
route agent took 8-12 s to start on recovery (2 s with VXLAN), which the carry time then mostly is.

After each failure row, ``split`` lines say where the window went (``benchmarks/failover_split.py``): per side
(the victim's cluster's workers, whose groups carry the flows toward the remote cluster; the remote gateways, whose
groups carry them back), the medians of the first missed probe of the victim, the down verdict and the end of
the sync that replaced the nexthop groups, in ms after the fault. ``--probe-interval``, ``--probe-fast-interval``,
``--probe-timeout`` and ``--down-after`` set the route agents' probe tunables (the topology's ``probe:``) to
measure another set side by side with the defaults.

``--cni ovn`` measures the plain lab and an OVN lab side by side instead, with the same topology and traffic, and
the OVN steps (NB, SB, OpenFlow) apart: see ``benchmarks/ovn_failover.py``.

Run as root: ``.venv/bin/python benchmarks/failover.py [--flows 64 --rate 100 --gateways 4] [--cable wireguard]
[--carry] [--cni ovn [--repeat N]] [--json FILE] [--keep DIR]`` (``--keep``: each lab's logs and status files are
copied there).
The default rate, 100 datagrams/s per flow (a 10 ms resolution of the loss window), is what
a 2-CPU machine carries through the lab's namespaces and tunnels both ways: at 1,000/s per
flow the senders managed only 12-24% of their schedule there. The ``sent`` column tells.
Every lab has a unique name and is removed in ``finally``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import failover_split  # after sys.path
from magw.lab.build import lifecycle as build
from magw.lab.build import netns  # after sys.path
from magw.lab.build.state import LabState  # after sys.path
from magw.lab.errors import LabError  # after sys.path
from magw.lab.observe import flowwatch  # after sys.path
from magw.lab.planes.daemons import agent_status  # after sys.path
from magw.lab.scenarios import failure  # after sys.path
from magw.lab.scenarios.failover import (  # after sys.path
    REFLECT_PORT,
    FailoverResult,
    measure_event,
    measure_failover,
    measure_recovery,
)
from magw.lab.spec.layout import LabLayout, NodeLayout, PodLayout, layout  # after sys.path
from magw.lab.spec.topology import Topology, parse_topology  # after sys.path
from magw.model.cable import Cable  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

TARGET_WINDOW_MS = 300.0
VICTIM = "east-gw1"


def topology(
    strategy: str,
    gateways: int,
    *,
    multi_active: bool = True,
    cable: Cable = Cable.VXLAN,
    probe: dict[str, Any] | None = None,
) -> Topology:
    spec = {"gateways": gateways, "workers": 1, "pods_per_node": 1}
    extra: dict[str, Any] = {"cable": cable.value} if cable is not Cable.VXLAN else {}
    if probe:
        extra["probe"] = probe
    return parse_topology({"strategy": strategy, "multi_active": multi_active, **extra,
                           "clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})  # fmt: skip


def wait_all_up(lab: LabLayout, st: LabState, limit: float = 60.0) -> None:
    """Until every route agent's status says no peer is down (bounded)."""
    deadline = time.monotonic() + limit
    while True:
        downs = {n.name: ((agent_status(st, n) or {}).get("health") or {}).get("down") for n in lab.nodes}
        if all(d == [] for d in downs.values()):
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"gateways not all up after {limit:g} s: {downs}")
        time.sleep(0.2)


def row(label: str, result: FailoverResult, gateways: int) -> str:
    s = result.summary()
    crossed = s["crossed_victim"] / s["flows"] if s["flows"] else 0.0
    moved_per_crossed = f"{s['share_moved'] / crossed:>8.2f}" if crossed else f"{'-':>8}"
    return (
        f"{label:<24} {s['flows']:>5} {s['window_p50_ms']:>7.1f} {s['window_max_ms']:>7.1f} "
        f"{s['window_p50_ms'] / TARGET_WINDOW_MS:>7.2f} {s['share_with_loss']:>6.0%} {crossed:>8.0%} "
        f"{s['share_moved']:>6.0%} {moved_per_crossed} {s['share_moved_forward']:>6.0%} "
        f"{s['share_moved_forward'] * gateways:>7.2f} {s['lost_on_untouched']:>9} {s['sent_share']:>5.0%}"
    )


HEADER = (
    f"{'run':<24} {'flows':>5} {'p50 ms':>7} {'max ms':>7} {'p50/300':>7} {'lossy':>6} {'crossed':>8} "
    f"{'moved':>6} {'mv/cross':>8} {'fwd mv':>6} {'fwd x N':>7} {'untouched':>9} {'sent':>5}"
)


PROBE_BASE = 44000  # the fresh flows' source ports, clear of the stream's (41000 + flows)
PROBE_EVERY = 0.02  # seconds between fresh flows
PROBE_MAX = 500  # fresh flows at most (each an open socket until the prober ends)
WATCH_EVERY = 0.1  # seconds between reads of the victim's sets (they keep a flow for 400 ms)

# The prober, in the client pod: a fresh UDP flow (a new source port, a new socket) every EVERY s until UNTIL (wall
# clock), one datagram each to the reflector; prints [[port, sent, answered or null], ...] in wall-clock seconds.
PROBER = """
import json, select, socket, sys, time
host, port, base, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
every, until = float(sys.argv[5]), float(sys.argv[6])
poll, socks, out, start = select.epoll(), {}, [], time.monotonic()
def drain(wait):
    for fd, _ev in poll.poll(wait):
        sock, i = socks[fd]
        try:
            sock.recv(256)
        except OSError:
            continue
        if out[i][2] is None:
            out[i][2] = time.time()
for i in range(count):
    if time.time() >= until:
        break
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind(("0.0.0.0", base + i))
        sock.connect((host, port))
    except OSError:
        sock.close()
        continue
    sock.setblocking(False)
    socks[sock.fileno()] = (sock, len(out))
    poll.register(sock.fileno(), select.EPOLLIN)
    out.append([base + i, time.time(), None])
    try:
        sock.send(b"magw-carry" + i.to_bytes(4, "big"))
    except OSError:
        pass
    while (left := start + (i + 1) * every - time.monotonic()) > 0:
        drain(left)
end = time.monotonic() + 1.0
while (left := end - time.monotonic()) > 0:
    drain(left)
print(json.dumps(out))
"""


def _set_ports(namespace: str) -> dict[str, set[int]]:
    """The ports in the flowwatch sets of a gateway (``toward``, ``back``), one ``nft -j list table``."""
    doc = json.loads(netns.ns_exec(namespace, "nft", "-j", "list", "table", "ip", flowwatch.TABLE))
    out: dict[str, set[int]] = {"toward": set(), "back": set()}
    for item in doc["nftables"]:
        if "set" in item and item["set"]["name"] in out:
            for elem in item["set"].get("elem", []):
                val = elem["elem"]["val"] if isinstance(elem, dict) and "elem" in elem else elem
                out[item["set"]["name"]].add(int(val))
    return out


def _first_after(log: Path, t0: float, event: str, *must: str) -> float | None:
    """Wall-clock seconds of the first ``event`` line after ``t0`` in a daemon's JSON log that has every ``must``
    (raw text of the line, e.g. ``'"new": "up"'``)."""
    return next(
        (at for at, doc, line in failover_split.log_lines(log, t0)
         if doc.get("event") == event and all(m in line for m in must)),
        None,
    )  # fmt: skip


def recovery_steps(lab: LabLayout, st: LabState, t0: float) -> dict[str, float | None]:
    """When (ms after ``t0``) the victim's daemons logged their start, its route agent its WireGuard device, the
    remote gateways (all of them) and the local worker declared it up: where a long carry time went."""
    logs, victim = st.logs_dir, lab.node(VICTIM)
    up = ('"new": "up"', f'"peer": "{VICTIM}"')
    remotes = [g for g in lab.gateways if g.cluster != victim.cluster]
    workers = [n for n in lab.cluster(victim.cluster).nodes if not n.gateway]
    remote_ups = [_first_after(logs / f"route-agent-{g.name}.log", t0, "health.state_changed", *up) for g in remotes]
    reach = (*up, f'"what": "{remotes[0].cluster}"')  # a worker's verdict on the gateway's reach of that cluster
    worker_ups = [_first_after(logs / f"route-agent-{w.name}.log", t0, "health.state_changed", *reach) for w in workers]
    steps = {
        "gateway_started_ms": _first_after(logs / f"gateway-{VICTIM}.log", t0, "gateway.started"),
        "agent_started_ms": _first_after(logs / f"route-agent-{VICTIM}.log", t0, "route_agent.started"),
        "device_created_ms": _first_after(logs / f"route-agent-{VICTIM}.log", t0, "wireguard.device_created"),
        "remotes_up_ms": None if not remote_ups or None in remote_ups else max(u for u in remote_ups if u is not None),
        "worker_up_ms": min((u for u in worker_ups if u is not None), default=None),
    }
    return {k: None if v is None else round((v - t0) * 1000, 1) for k, v in steps.items()}


class CarryProbe:
    """Fresh flows from ``client`` from the recovery on, and the victim's sets polled meanwhile (see the docstring)."""

    def __init__(self, client: PodLayout, server: PodLayout, victim: NodeLayout) -> None:
        self.client, self.server, self.victim = client, server, victim
        self.t0 = 0.0
        self.seen: dict[str, set[int]] = {"toward": set(), "back": set()}
        self.error: str | None = None  # the first read of the victim's sets that failed
        self.errors = 0
        self._proc: subprocess.Popen[str] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._until = 0.0

    def start(self, t0: float, until: float) -> None:
        """Start at ``t0`` (wall clock, the recovery's start), end at ``until`` (wall clock, before the stream
        ends: its reflectors and the gateways' sets go then)."""
        self.t0, self._until = t0, until
        count = min(PROBE_MAX, max(int((until - time.time()) / PROBE_EVERY) + 1, 1))
        argv = ["ip", "netns", "exec", self.client.namespace, sys.executable, "-c", PROBER, str(self.server.ip),
                str(REFLECT_PORT), str(PROBE_BASE), str(count), f"{PROBE_EVERY:g}", f"{self._until:.3f}"]  # fmt: skip
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._thread.start()

    def _watch(self) -> None:
        end = self._until + 0.5  # the last fresh flow's datagrams are in the sets for 400 ms
        for _ in range(int((end - time.time()) / WATCH_EVERY) + 2):  # bounded; the reads take time too
            if self._stop.is_set() or time.time() >= end:
                return
            try:
                for name, ports in _set_ports(self.victim.namespace).items():
                    self.seen[name] |= ports
            except (LabError, ValueError, KeyError) as exc:
                self.errors += 1
                self.error = self.error or str(exc)
            self._stop.wait(WATCH_EVERY)

    def finish(self) -> dict[str, Any]:
        """Wait for the prober and the watcher (bounded); what they saw, in ms after ``t0``."""
        assert self._proc is not None
        try:
            out, err = self._proc.communicate(timeout=max(self._until - time.time(), 0) + 15)
        finally:
            self.stop()
        if self._proc.returncode != 0:
            raise LabError(f"carry prober in {self.client.name}: exit {self._proc.returncode}: {err.strip()[-300:]}")
        probes = json.loads(out)
        answered = [(port, sent, got) for port, sent, got in probes if got is not None]
        result: dict[str, Any] = {"fresh_flows": len(probes), "answered": len(answered), "watch_error": self.error,
                                  "watch_errors": self.errors}  # fmt: skip
        for name in ("toward", "back"):
            through = sorted((got, sent, port) for port, sent, got in answered if port in self.seen[name])
            result[f"crossed_{name}"] = sum(1 for port, _s, _g in probes if port in self.seen[name])
            result[f"{name}_ms"] = round((through[0][0] - self.t0) * 1000, 1) if through else None
            result[f"{name}_sent_ms"] = round((through[0][1] - self.t0) * 1000, 1) if through else None
        return result

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=5)
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def carry_line(label: str, carry: dict[str, Any]) -> str:
    def ms(name: str) -> str:
        if carry[f"{name}_ms"] is None:
            return "never"
        return f"after {carry[f'{name}_ms']:.0f} ms (the flow sent at {carry[f'{name}_sent_ms']:.0f})"

    def step(name: str) -> str:
        return "-" if carry.get(name) is None else f"{carry[name]:.0f}"

    return (
        f"{label:<24} {VICTIM} carries traffic again: toward the server {ms('toward')}, back from it {ms('back')};"
        f" fresh flows: {carry['fresh_flows']} sent, {carry['answered']} answered, through {VICTIM}"
        f" {carry['crossed_toward']} toward / {carry['crossed_back']} back"
        + (
            f"; {carry['watch_errors']} reads of its sets failed, first: {carry['watch_error']}"
            if carry["watch_error"]
            else ""
        )
        + f"\n{'':<24} steps (ms after the recovery began, from the daemons' logs): gateway daemon started"
        f" {step('gateway_started_ms')}, route agent started {step('agent_started_ms')}, its WireGuard device"
        f" {step('device_created_ms')}, every remote gateway declared it up {step('remotes_up_ms')}, a local worker"
        f" declared its reach of the remote cluster up {step('worker_up_ms')}"
    )


def measure_recovery_carry(
    lab: LabLayout, st: LabState, *, recover_at: float, **kw: Any
) -> tuple[FailoverResult, dict[str, Any]]:
    """``measure_recovery``, plus the fresh flows and the victim's sets from the recovery on (CarryProbe)."""
    probe = CarryProbe(kw["client"], kw["server"], lab.node(VICTIM))
    begun = time.time()  # the stream starts a little later (the reflectors first) and ends after kw["duration"]

    def event() -> None:
        t0 = time.time()
        failure.recover(st.name, VICTIM)
        probe.start(t0, begun + kw["duration"] - 0.2)

    try:
        result = measure_event(lab, st, event=event, victim=VICTIM, event_at=recover_at, **kw)
        return result, {**probe.finish(), **recovery_steps(lab, st, probe.t0)}
    finally:
        probe.stop()


def with_lab(topo: Topology, fn: Callable[[LabLayout, LabState], None], keep: str | None = None) -> None:
    """Build a lab, wait until every peer is up, run ``fn``; remove the lab (its files copied under ``keep``)."""
    name = f"b{uuid.uuid4().hex[:7]}"
    try:
        st = build.up(topo, name=name, wait_timeout=120.0)
        lab = layout(name, topo)
        wait_all_up(lab, st)
        fn(lab, st)
    finally:
        report = build.down(name, keep=None if keep is None else Path(keep) / name)
        if report.kept is not None:
            print(f"lab {name}'s files kept in {report.kept}", flush=True)


def run_strategy(strategy: str, args: argparse.Namespace, results: dict[str, object]) -> None:
    def measure(lab: LabLayout, st: LabState) -> None:
        client = lab.cluster("east").pods_of("east-w1")[0]
        server = lab.cluster("west").pods_of("west-w1")[0]
        kw = {"client": client, "server": server, "flows": args.flows, "rate": args.rate,
              "duration": args.duration, "senders": args.senders}  # fmt: skip
        cut: dict[str, float] = {}  # when each of the victim's links was down: underlay (its cluster), wan

        def fail() -> None:
            failure.fail(st.name, VICTIM, on_cut=cut.setdefault)

        failed = measure_event(lab, st, event=fail, victim=VICTIM, event_at=args.fail_at, **kw)
        print(row(f"{strategy} fail 1/{args.gateways}", failed, args.gateways), flush=True)
        results[f"{strategy}_fail"] = failed.summary()
        # each side from the cut of the link its probes cross: the local worker's the underlay, the remote's the WAN
        locals_ = [(n.name, "local worker") for n in lab.cluster("east").nodes if not n.gateway]
        remotes = [(g.name, "remote gateway") for g in lab.cluster("west").gateways]
        where = failover_split.split(st.logs_dir, locals_, VICTIM, cut["underlay"], since=failed.failed_at)
        where += failover_split.split(st.logs_dir, remotes, VICTIM, cut["wan"], since=failed.failed_at)
        for line in failover_split.lines(f"{strategy} fail 1/{args.gateways}", where):
            print(line, flush=True)
        results[f"{strategy}_fail_split"] = {"observers": [r.as_json() for r in where],
                                             "median": failover_split.summary(where)}  # fmt: skip
        time.sleep(args.settle)
        if not args.carry:
            recovered = measure_recovery(lab, st, victim=VICTIM, recover_at=args.fail_at, **kw)
            print(row(f"{strategy} recover", recovered, args.gateways), flush=True)
            results[f"{strategy}_recover"] = recovered.summary()
            return
        kw["duration"] = max(args.duration, args.fail_at + args.carry_seconds + 0.5)  # the prober's time, and more
        recovered, carry = measure_recovery_carry(lab, st, recover_at=args.fail_at, **kw)
        print(row(f"{strategy} recover", recovered, args.gateways), flush=True)
        print(carry_line(f"{strategy} carry", carry), flush=True)
        results[f"{strategy}_recover"] = recovered.summary()
        results[f"{strategy}_carry"] = carry

    with_lab(topology(strategy, args.gateways, cable=args.cable, probe=args.probe), measure, args.keep)


def run_single(args: argparse.Namespace, results: dict[str, object]) -> None:
    def measure(lab: LabLayout, st: LabState) -> None:
        client = lab.cluster("east").pods_of("east-w1")[0]
        server = lab.cluster("west").pods_of("west-w1")[0]
        kw = {"client": client, "server": server, "flows": args.flows, "rate": args.rate,
              "duration": args.duration, "senders": args.senders}  # fmt: skip
        failed = measure_failover(lab, st, victim=VICTIM, fail_at=args.fail_at, **kw)
        print(row("single-gateway takeover", failed, 1), flush=True)
        results["single_takeover"] = failed.summary()
        failure.recover(st.name, VICTIM)

    with_lab(topology("resilient", 2, multi_active=False, cable=args.cable, probe=args.probe), measure, args.keep)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=64, help="UDP flows (default 64)")
    p.add_argument("--rate", type=int, default=100, help="datagrams per second per flow (default 100)")
    p.add_argument("--gateways", type=int, default=4, help="gateways per cluster (default 4)")
    p.add_argument("--strategies", default="resilient,multipath", help="comma-separated (default resilient,multipath)")
    p.add_argument("--duration", type=float, default=6.0, help="seconds of traffic per measurement (default 6)")
    p.add_argument("--fail-at", type=float, default=2.0, help="seconds into the traffic of the failure (default 2)")
    p.add_argument("--senders", type=int, default=2, help="sender processes sharing the flows (default 2)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between failure and recovery runs")
    p.add_argument("--single", action="store_true", help="also measure a single-gateway mode takeover")
    p.add_argument("--json", metavar="FILE", help="also write the summaries as JSON")
    p.add_argument("--keep", metavar="DIR", help="copy each lab's files (logs, status, state) to DIR/<lab>")
    p.add_argument("--cable", choices=[c.value for c in Cable], default="vxlan",
                   help="the labs' cable between gateways (default vxlan)")  # fmt: skip
    p.add_argument("--carry", action=argparse.BooleanOptionalAction, default=None,
                   help="time until the returning gateway carries traffic (default: with wireguard)")  # fmt: skip
    p.add_argument("--cni", choices=("generic", "ovn"), default="generic",
                   help="ovn: the plain lab and an OVN lab side by side (benchmarks/ovn_failover.py)")  # fmt: skip
    p.add_argument("--repeat", type=int, choices=range(1, 21), default=1, metavar="1..20",
                   help="with --cni ovn: failure and recovery cycles per lab (default 1)")  # fmt: skip
    p.add_argument("--carry-seconds", type=float, default=12.0,
                   help="with --carry: fresh flows for this long after the recovery; the recovery run's traffic"
                   " lasts --fail-at + this + 0.5 s if that is longer than --duration (default 12)")  # fmt: skip
    for key in ("interval", "min-interval", "fast-interval", "timeout"):
        p.add_argument(f"--probe-{key}", type=float, metavar="S", help=f"the route agents' --probe-{key} (seconds)")
    p.add_argument("--probe-budget", type=int, metavar="N", help="the route agents' --probe-budget (probes/s)")
    p.add_argument("--down-after", type=int, metavar="N", help="the route agents' --down-after (misses)")
    args = p.parse_args()
    given = {"interval": args.probe_interval, "min_interval": args.probe_min_interval, "budget": args.probe_budget,
             "fast_interval": args.probe_fast_interval, "timeout": args.probe_timeout,
             "down_after": args.down_after}  # fmt: skip
    args.probe = {k: v for k, v in given.items() if v is not None}  # the topology's probe: (magw.lab.spec.probe)
    if os.geteuid() != 0:
        p.error("needs root (network namespaces)")
    args.cable = Cable(args.cable)
    if args.carry is None:
        args.carry = args.cable is Cable.WIREGUARD
    if not 1.0 <= args.carry_seconds <= 60.0:
        p.error("--carry-seconds: 1..60")
    configure_logging("console", "warning")
    structlog.get_logger(__name__)
    if args.cni == "ovn":
        if args.single or args.carry or args.cable is not Cable.VXLAN:
            p.error("--cni ovn: not with --single, --carry or --cable wireguard")
        from benchmarks.ovn_failover import side_by_side

        return side_by_side(args)
    cable = f", cable {args.cable.value}" if args.cable is not Cable.VXLAN else ""
    print(f"{args.flows} flows x {args.rate} pkt/s, {args.gateways} gateways per cluster, victim {VICTIM}{cable}; "
          "(columns: see the module docstring)", flush=True)  # fmt: skip
    print(HEADER, flush=True)
    results: dict[str, object] = {}
    if args.cable is not Cable.VXLAN:
        results["cable"] = args.cable.value
    for strategy in args.strategies.split(","):
        run_strategy(strategy.strip(), args, results)
    if args.single:
        run_single(args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
