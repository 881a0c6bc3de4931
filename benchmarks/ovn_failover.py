"""``benchmarks/failover.py --cni ovn``: the plain lab and the OVN lab side by side, same topology, same traffic.

Both labs: east and west, ``--gateways`` N gateways, one worker and two pods per node. Traffic: ``--flows`` paced
UDP flows (``--rate`` datagrams/s each, ``magw.lab.scenarios.pairs``) from east-w1's two pods to every west pod,
split over the pod pairs: in OVN, UDP flows spread over the gateway routers by pod pair only (the userspace
datapath's ECMP hash ignores UDP ports), so pairs, not ports, make the spread, and the plain lab gets the same
flows. Per lab, ``--repeat`` cycles of: east-gw1 loses power ``--fail-at`` s into the traffic (``magw lab fail``),
``--settle`` s, then it comes back mid-stream (``magw lab recover``; that run lasts ``--fail-at`` + 12 s: its
daemons take seconds to start on a loaded machine). Every measurement sends from client ports of
its own (``magw.lab.scenarios.pairs``: Open vSwitch 3.1.0 aborts when an old UDP 5-tuple returns).

Per run: the row of ``benchmarks/failover.py`` (its columns), where the flows left east before the event, the loss
windows apart for the flows that left east through the victim (east's choice: the worker's kernel group, or OVN's
reroute policy) and those that only came back through it (west's gateways' kernel groups, probe-driven in both
labs), and the steps, in ms after the event began (``failed_at``, just before ``magw lab fail``), from:

* the route agents' JSON logs: when east-w1 (the worker; on OVN it hosts east's OVN syncer) and west's gateways
  declared the victim down (up, on recovery): the detection;
* OVN only: when east-w1's route agent logged the syncer's NB transaction (``ovn_syncer.synced``), and each
  monitor's own receive timestamps (ms, UTC; upper bounds: a monitor scheduled late stamps late): the NB policy's
  nexthops losing (regaining) the victim's join address (``ovsdb-client --timestamp monitor`` on the NB), the SB
  logical flows changing (the same on the SB: ``ovn-northd``), and the OpenFlow flows of east-w1's ``br-int``
  that match west's CIDR changing (``ovs-ofctl --timestamp monitor``: ``ovn-controller`` on the client's chassis).

Then the medians over the cycles of both labs and the ratio OVN / plain of the loss window (goal <= 2), over all
flows with loss and over those that left east through the victim (the flows OVN's reroute policy moves).
With three or more gateways, the OVN select group that remains renumbers its buckets: flows of surviving gateways
may move too (docs/ovn.md, "Failover"): the summary counts the flows that never crossed the victim and changed
gateway, and what they lost.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from benchmarks.failover import HEADER, VICTIM, _first_after, row, wait_all_up
from magw.desired.ovn.topology import Slot
from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.planes.ovn import ovn_dir, syncer_status
from magw.lab.planes.ovn_nodes import ovs_dir
from magw.lab.scenarios import failure
from magw.lab.scenarios.failover import BASE_PORT, FailoverResult
from magw.lab.scenarios.pairs import make_pairs, measure_pairs
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import Topology, parse_topology

GOAL = 2.0
FAIL_SECONDS = 6.0  # at least this much traffic after --fail-at: room for late streams and a slow magw lab fail
RECOVER_SECONDS = 12.0  # a recovery run's traffic after the event: a returning gateway's daemons start slowly here
MONITOR_SKEW = 0.05  # seconds: how much earlier than the NB monitor's stamp a later step's monitor may stamp
MONITOR_SECONDS = 120  # a monitor outlives nothing: ``timeout`` ends it even if we could not
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})(?::|$)")
Block = tuple[float, str]  # (wall-clock seconds, the lines the tool printed with that stamp)


def topology(strategy: str, gateways: int) -> Topology:
    spec = {"gateways": gateways, "workers": 1, "pods_per_node": 2}
    return parse_topology({"strategy": strategy, "clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})


class Monitor:
    """A monitoring tool run in the background (stdout line-buffered into a temp file), stopped by its PID."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.argv, self.env = argv, env
        self._out: TextIO | None = None
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self._out = tempfile.TemporaryFile("w+")  # noqa: SIM115  # closed by stop()
        self._proc = subprocess.Popen(["timeout", str(MONITOR_SECONDS), "stdbuf", "-oL", *self.argv],
                                      stdout=self._out, stderr=subprocess.STDOUT, text=True, env=self.env)  # fmt: skip

    def stop(self) -> list[Block]:
        """Stop it; the timestamped blocks it printed."""
        if self._proc is None or self._out is None:
            return []
        if self._proc.poll() is None:
            self._proc.terminate()  # timeout passes the signal on to the tool
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self._out.seek(0)
        text = self._out.read()
        self._out.close()
        blocks: list[Block] = []
        for line in text.splitlines():
            if m := STAMP.match(line):
                stamp = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
                blocks.append((stamp, line[m.end() :] + "\n"))
            elif blocks:
                blocks[-1] = (blocks[-1][0], blocks[-1][1] + line + "\n")
        return blocks


def ovn_monitors(st: LabState, lab: LabLayout) -> dict[str, Monitor]:
    """east's NB policies' nexthops, SB logical flows' actions, and east-w1's br-int flows (changes only)."""
    d, client = ovn_dir(st, "east"), lab.node("east-w1")
    env = {**os.environ, "OVS_RUNDIR": str(ovs_dir(st, client))}
    return {
        "nb": Monitor(["ovsdb-client", "--timestamp", "monitor", d.nb, "OVN_Northbound", "Logical_Router_Policy",
                       "nexthops,!initial"]),
        "sb": Monitor(["ovsdb-client", "--timestamp", "monitor", d.sb, "OVN_Southbound", "Logical_Flow",
                       "actions,!initial"]),
        "of": Monitor(["ovs-ofctl", "--timestamp", "monitor", "br-int", "watch:!initial"], env),
    }


def ovn_steps(blocks: dict[str, list[Block]], t0: float, join_ip: str, remote_cidr: str, gone: bool,
              synced: float | None) -> dict[str, Any]:  # fmt: skip
    """ms after ``t0``: the syncer's log of its transaction (``synced``), the NB policy without (``gone``) or with
    the join address, the first SB change and the first OpenFlow change matching ``remote_cidr`` (the policy's
    flows) after ``t0``: nothing else changes them then. Each monitor stamps what it receives, so a monitor process
    scheduled late on a loaded machine stamps late: these are upper bounds."""

    def new_rows(text: str) -> list[str]:
        return [line for line in text.splitlines() if re.search(r"\s(new|insert)\s", line)]

    nb = next((s for s, text in blocks["nb"] if s >= t0 - 0.001 and (rows := new_rows(text))
               and all((f'"{join_ip}"' in r) != gone for r in rows)), None)  # fmt: skip
    # A failure changes nothing else; a recovery first re-creates the gateway's router (its Endpoint is back), so
    # there the SB and OpenFlow changes count from the NB's (less a little: the monitors stamp what they receive).
    after = t0 if gone or nb is None else nb - MONITOR_SKEW
    sb = next((s for s, _t in blocks["sb"] if s >= after - 0.001), None)
    of = next((s for s, text in blocks["of"] if s >= after - 0.001 and f"nw_dst={remote_cidr}" in text), None)
    steps = (("synced_ms", synced), ("nb_ms", nb), ("sb_ms", sb), ("of_ms", of))
    return {k: None if v is None else round((v - t0) * 1000, 1) for k, v in steps}


def detection(st: LabState, lab: LabLayout, t0: float, new: str) -> dict[str, Any]:
    """ms after ``t0``: east-w1 and each west gateway declared the victim ``new`` (down/up), from their logs."""
    must = (f'"new": "{new}"', f'"peer": "{VICTIM}"', '"what": "alive"')

    def ms(node: str) -> float | None:
        t = _first_after(st.logs_dir / f"route-agent-{node}.log", t0, "health.state_changed", *must)
        return None if t is None else round((t - t0) * 1000, 1)

    west = [ms(g.name) for g in lab.cluster("west").gateways]
    return {"worker_ms": ms("east-w1"), "west_ms": west}


def windows(result: FailoverResult) -> dict[str, Any]:
    """p50/max loss windows of the flows that left east through the victim, and of those only back through it."""
    fwd = [f.window_ms for f in result.flows if VICTIM in f.before.forward and f.lost]
    back = [f.window_ms for f in result.flows if VICTIM in f.before.back and VICTIM not in f.before.forward and f.lost]
    crossed_fwd = sum(VICTIM in f.before.forward for f in result.flows)
    seen = [f for f in result.untouched if f.before.forward and f.before.back]  # untouched, and known to be
    out: dict[str, Any] = {"forward_crossed": crossed_fwd, "forward_lossy": len(fwd), "back_lossy": len(back),
                           "unseen_before": sum(not (f.before.forward and f.before.back) for f in result.flows),
                           "moved_untouched": sum(f.moved for f in seen), "lost_untouched": sum(f.lost for f in seen)}
    for name, ws in (("forward", fwd), ("back", back)):
        out[f"{name}_p50_ms"] = round(statistics.median(ws), 1) if ws else None
        out[f"{name}_max_ms"] = round(max(ws), 1) if ws else None
    spread: dict[str, int] = {}
    for f in result.flows:
        for g in sorted(f.before.forward):
            if g.startswith("east-"):
                spread[g] = spread.get(g, 0) + 1
    out["leaving_east"] = spread
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def detail(label: str, doc: dict[str, Any]) -> str:
    w, d = doc["windows"], doc["detection"]
    west = [x for x in d["west_ms"] if x is not None]
    lines = [
        f"{'':<4}{label}: flows leaving east by gateway before the event {w['leaving_east']}; loss windows p50/max:"
        f" left east through {VICTIM} {_fmt(w['forward_p50_ms'])}/{_fmt(w['forward_max_ms'])} ms"
        f" ({w['forward_lossy']} of {w['forward_crossed']} lost any), came back through it only"
        f" {_fmt(w['back_p50_ms'])}/{_fmt(w['back_max_ms'])} ms ({w['back_lossy']} lossy)"
        + (f"; {w['unseen_before']} flows not seen both ways before the event (late or lossy: figures less sure)"
           if w["unseen_before"] else ""),
        f"{'':<4}steps (ms after the event began): east-w1 declared {VICTIM} {doc['new']} {_fmt(d['worker_ms'])},"
        f" west's gateways {_fmt(min(west)) if west else '-'}..{_fmt(max(west)) if west else '-'}",
    ]
    if "ovn" in doc:
        o = doc["ovn"]
        lines[-1] += (f"; the syncer's NB transaction logged {_fmt(o['synced_ms'])}, NB policy"
                      f" {'without' if doc['new'] == 'down' else 'with'} its join address {_fmt(o['nb_ms'])},"
                      f" SB logical flows {_fmt(o['sb_ms'])} (ovn-northd), east-w1's OpenFlow {_fmt(o['of_ms'])}"
                      " (ovn-controller)")  # fmt: skip
    return "\n".join(lines)


def wait_policy_full(st: LabState, lab: LabLayout, limit: float = 60.0) -> None:
    """Until east's syncer status shows every east gateway in the policy toward west (bounded)."""
    want = len(lab.cluster("east").gateways)
    deadline = time.monotonic() + limit
    while True:
        policies = (((syncer_status(st, "east") or {}).get("last_sync") or {}).get("policies")) or {}
        if policies and all(len(hops) == want for hops in policies.values()):
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"east's OVN policy is not back to {want} nexthops after {limit:g} s: {policies}")
        time.sleep(0.2)


def one_run(lab: LabLayout, st: LabState, args: argparse.Namespace, *, ovn: bool, base: int, down: bool,
            join_ip: str) -> dict[str, Any]:  # fmt: skip
    """One measurement (the failure, or the recovery) with its windows and steps."""
    east, west = lab.cluster("east"), lab.cluster("west")
    pairs = make_pairs(east.pods_of("east-w1"), west.pods, args.flows, base)
    act: Callable[[], object] = (lambda: failure.fail(st.name, VICTIM)) if down else (
        lambda: failure.recover(st.name, VICTIM))  # fmt: skip
    monitors = ovn_monitors(st, lab) if ovn else {}
    for m in monitors.values():
        m.start()
    try:
        time.sleep(0.5 if monitors else 0.0)  # the monitors connect
        duration = max(args.duration, args.fail_at + FAIL_SECONDS) if down else args.fail_at + RECOVER_SECONDS
        result = measure_pairs(lab, st, pairs=pairs, event=act, victim=VICTIM, rate=args.rate,
                               duration=duration, event_at=args.fail_at)  # fmt: skip
    finally:
        blocks = {k: m.stop() for k, m in monitors.items()}
    t0, new = result.failed_at, "down" if down else "up"
    doc: dict[str, Any] = {"summary": result.summary(), "windows": windows(result), "new": new,
                           "detection": detection(st, lab, t0, new), "result": result}  # fmt: skip
    if ovn:
        # the sync that took the victim out of the policy (the first after a failure), or put it back
        synced = _first_after(st.logs_dir / "route-agent-east-w1.log", t0, "ovn_syncer.synced",
                              *(() if down else (f'"{join_ip}"',)))  # fmt: skip
        doc["ovn"] = ovn_steps(blocks, t0, join_ip, str(west.pod_cidr), gone=down, synced=synced)
    return doc


def run_lab(cni: str, topo: Topology, args: argparse.Namespace, out: list[dict[str, Any]]) -> None:
    """Build the lab, ``--repeat`` cycles of failure and recovery, remove it (files kept under ``--keep``)."""
    name = f"b{uuid.uuid4().hex[:7]}"
    ovn = cni == "ovn"
    try:
        st = build.up(topo, name=name, wait_timeout=120.0, cni=cni)
        lab = layout(name, topo)
        wait_all_up(lab, st)
        join_ip = ""
        if ovn:
            wait_policy_full(st, lab)
            slot = ((syncer_status(st, "east") or {}).get("last_sync") or {}).get("slots", {}).get(VICTIM)
            join_ip = Slot(int(slot)).join_ip
        label = "ovn" if ovn else "plain"
        base = BASE_PORT
        for cycle in range(args.repeat):
            for down in (True, False):
                what = f"{label} {'fail' if down else 'recover'} {cycle + 1}"
                try:
                    doc = one_run(lab, st, args, ovn=ovn, base=base, down=down, join_ip=join_ip)
                except LabError as exc:  # no figure from this run; the lab goes on (a failed fail still recovers)
                    print(f"{what:<24} FAILED, no figure: {exc}", flush=True)
                    out.append({"cni": cni, "cycle": cycle + 1, "new": "down" if down else "up", "error": str(exc)})
                    continue
                finally:
                    base += args.flows  # never the same client ports twice in a lab
                print(row(what, doc.pop("result"), args.gateways), flush=True)
                print(detail(what, doc), flush=True)
                out.append({"cni": cni, "cycle": cycle + 1, **doc})
                if down:
                    time.sleep(args.settle)
            wait_all_up(lab, st)
            if ovn:
                wait_policy_full(st, lab)
            time.sleep(args.settle)
    finally:
        report = build.down(name, keep=None if args.keep is None else Path(args.keep) / name)
        if report.kept is not None:
            print(f"lab {name}'s files kept in {report.kept}", flush=True)


def _median(docs: list[dict[str, Any]], get: Callable[[dict[str, Any]], float | None]) -> float | None:
    values = [v for d in docs if (v := get(d)) is not None]
    return round(statistics.median(values), 1) if values else None


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the failure runs of each lab, and OVN / plain."""
    out: dict[str, Any] = {}
    for cni in ("generic", "ovn"):
        fails = [r for r in runs if r["cni"] == cni and r["new"] == "down" and "error" not in r]
        out[cni] = {
            "window_p50_ms": _median(fails, lambda r: r["summary"]["window_p50_ms"] or None),
            "window_max_ms": _median(fails, lambda r: r["summary"]["window_max_ms"] or None),
            "forward_p50_ms": _median(fails, lambda r: r["windows"]["forward_p50_ms"]),
            "back_p50_ms": _median(fails, lambda r: r["windows"]["back_p50_ms"]),
            "detect_ms": _median(fails, lambda r: r["detection"]["worker_ms"]),
            "lost_on_untouched": sum(r["windows"]["lost_untouched"] for r in fails),
            "unseen": sum(r["windows"]["unseen_before"] for r in fails),
            "moved_untouched": sum(r["windows"]["moved_untouched"] for r in fails),
            "failed_runs": sum(r["cni"] == cni and "error" in r for r in runs),
        }
        if cni == "ovn":
            for step in ("synced_ms", "nb_ms", "sb_ms", "of_ms"):
                out[cni][step] = _median(fails, lambda r, s=step: r["ovn"][s])
    plain, ovn = out["generic"], out["ovn"]
    for key in ("window_p50_ms", "forward_p50_ms"):
        out[f"ratio_{key}"] = round(ovn[key] / plain[key], 2) if ovn[key] and plain[key] else None
    return out


def print_summary(s: dict[str, Any], repeat: int) -> None:
    p, o = s["generic"], s["ovn"]
    print(f"\nside by side (medians over {repeat} failure(s) of {VICTIM} per lab):")
    print(f"{'lab':<6} {'window p50':>10} {'max':>6} {'left by it':>10} {'back only':>9} {'detect':>6}"
          f" {'synced':>6} {'NB':>5} {'SB':>5} {'OpenFlow':>8} {'untouched: lost':>15} {'moved':>5}"
          f" {'unseen':>6} {'failed runs':>11}")  # fmt: skip
    for name, d in (("plain", p), ("ovn", o)):
        print(f"{name:<6} {_fmt(d['window_p50_ms']):>10} {_fmt(d['window_max_ms']):>6} {_fmt(d['forward_p50_ms']):>10}"
              f" {_fmt(d['back_p50_ms']):>9} {_fmt(d['detect_ms']):>6} {_fmt(d.get('synced_ms')):>6}"
              f" {_fmt(d.get('nb_ms')):>5} {_fmt(d.get('sb_ms')):>5} {_fmt(d.get('of_ms')):>8}"
              f" {d['lost_on_untouched']:>15} {d['moved_untouched']:>5} {d['unseen']:>6}"
              f" {d['failed_runs']:>11}")  # fmt: skip
    ratio = s["ratio_window_p50_ms"]
    verdict = "-" if ratio is None else ("met" if ratio <= GOAL else "NOT met")
    shown = "-" if ratio is None else ratio
    print(f"ovn / plain: loss window p50 {shown} (goal <= {GOAL:g}: {verdict}); flows that left east through"
          f" {VICTIM}: {s['ratio_forward_p50_ms'] or '-'}")  # fmt: skip
    print("(ms after the failure began; detect: east-w1 declared it down; synced: the syncer logged its NB"
          " transaction;\n NB, SB, OpenFlow: a monitor received the change; left by it / back only: the loss windows"
          f" of the flows that left east through {VICTIM} / only came back through it;\n untouched: the flows that"
          " never crossed it, their datagrams lost and how many changed gateway, all failures (flows seen both ways"
          " before the event only:\n unseen counts the others, late or lossy); failed runs: without a"
          " figure)")  # fmt: skip


def side_by_side(args: argparse.Namespace) -> int:
    strategy = args.strategies.split(",")[0].strip()
    topo = topology(strategy, args.gateways)
    print(f"{args.flows} flows x {args.rate} pkt/s from east-w1's 2 pods to every west pod, {args.gateways} gateways"
          f" per cluster, strategy {strategy}, victim {VICTIM}, {args.repeat} cycle(s); plain lab, then OVN lab;"
          f" load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
          flush=True)  # fmt: skip
    print(HEADER, flush=True)
    runs: list[dict[str, Any]] = []
    for cni in ("generic", "ovn"):
        run_lab(cni, topo, args, runs)
    s = summary(runs)
    print_summary(s, args.repeat)
    print(f"load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "summary": s}, f, indent=2)
    return 0
