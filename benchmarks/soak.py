"""Soak: one lab with three clusters, Globalnet, the egress gateway and WireGuard, traffic all along, seeded faults.

Usage (root): ``.venv/bin/python benchmarks/soak.py --minutes N --seed S [--json FILE] [--name NAME]
[--control-plane file|kube] [--cni generic|ovn]``

The lab is ``examples/lab-soak.yaml`` (docs/robustness.md, "Soak", says what it combines and what it leaves out);
with ``--control-plane kube`` its daemons run on API server emulators and the API servers' own faults join
(``benchmarks/soak_kube.py``); with ``--cni ovn`` (either control plane) its clusters run OVN-Kubernetes with real
packets (the egress gateway too), OVN's processes are killed too, the groups are warmed up before the first window
(``soak_watch.warm_up``), and the first window's flows are started ahead of it (``soak_watch.prime``: a new
connection's first requests can be lost in the lab's userspace datapath, whatever the fault).
The run is a sequence of fault windows, back to back, until ``--minutes`` are spent. In each window, traffic
starts in every group (``benchmarks/soak_watch.py``: UDP flows with sequence numbers and long-lived TCP
connections, in a ring between the clusters by global IPs and both ways through the egress VIP); ``PRE`` s later
one fault of the seeded schedule (``benchmarks/soak_faults.py``) is injected, healed after its hold, and the
traffic runs ``POST`` s more. Then:

- **flows**: a group *crossed* the fault when the fault ``touches`` one of the group's clusters (its source's or
  its destination's: which gateway a flow's hash picked is not recorded, so any gateway of the cluster counts) or,
  for the egress and ingress groups, the egress VIPs. A group that did not cross it must lose nothing: no
  datagram lost, every TCP connection alive at the end. A group that crossed it must come back: no flow lost at
  its end, and every loss window at most ``FAILOVER_BOUND`` s (plus the hold when the failed part was the only
  path: a fault whose ``outage`` takes a cluster's only gateway, or a node where the group's Service has a
  backend, which the lab never removes from the Service). Its TCP connections are counted, not judged: under
  Globalnet a flow moved to another gateway leaves with that gateway's egress address, which no connection survives;
- **convergence**, polled until it holds or ``CONVERGE_BOUND`` s after the heal: every route agent's status says
  converged with every probed peer up; every node's kernel, read by ``tests/support/kernel_dump.py``, is exactly
  ``magw plan --format json`` of its broker snapshot (``benchmarks/soak_kernel.py``); in every cluster no global
  IP is held twice, none lies outside the cluster's global CIDR, and no status of a deleted object is left;
- **resources**: every daemon's RSS and open fds against its baseline (the first sample of its pid, after the
  first window: a restarted daemon re-baselines) stay within ``RSS_BOUND_MIB`` and ``FD_BOUND``.

Prints one row per fault (kind, target, detection time, loss, convergence time, verdict), a summary, and writes
it all as JSON with ``--json``. Exit 1 if any invariant was violated. The lab has a unique name and is removed in
``finally`` (SIGTERM too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import soak_drops, soak_faults, soak_kernel, soak_report, soak_view, soak_watch  # after sys.path
from benchmarks.soak_view import SnapshotOf  # after sys.path
from magw.lab.build import kept, state  # after sys.path
from magw.lab.build import lifecycle as build  # after sys.path
from magw.lab.planes import ovn as lab_ovn  # after sys.path
from magw.lab.spec.layout import LabLayout, layout  # after sys.path
from magw.lab.spec.topology import load_topology  # after sys.path
from magw.model.cable import Cable  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

TOPOLOGY = Path(__file__).resolve().parent.parent / "examples" / "lab-soak.yaml"
PRE, POST = 3.0, 8.0  # seconds of traffic before the fault and after its heal
FAILOVER_BOUND = 3.0  # s: the longest loss window of a crossed flow (the lab's ~0.3 s, x10 for the shared 2 cores)
CONVERGE_BOUND = 120.0  # s after the heal
RSS_BOUND_MIB = 24.0
FD_BOUND = 16
FLOWS, RATE, CONNS = 4, 50, 2  # per group: UDP flows at RATE datagrams/s (20 ms resolution), TCP connections
FRESH_CYCLE = 8  # --fresh-ports: windows (each >= 11 s) before a set of source ports returns: > the 30 s UDP timeout


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(f"soak: stopped by signal {signum}")


def downs(st_dir: Path, since: float, until: float, tail: int = 4000) -> list[tuple[float, str, str, str]]:
    """(seconds after ``since``, observer, peer, what) of every route agent's log line calling a peer down in the
    span (among each log's last ``tail`` lines); ``what``: ``alive``, or the remote cluster a gateway lost."""
    out = []
    for path in (st_dir / "logs").glob("route-agent-*.log"):
        try:
            lines = path.read_text(errors="replace").splitlines()[-tail:]
        except OSError:
            continue
        for line in lines:
            if '"health.state_changed"' not in line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("new") != "down":
                continue
            at = datetime.fromisoformat(str(ev["timestamp"]).replace("Z", "+00:00")).timestamp()
            if since <= at <= until:
                out.append((at - since, path.stem.removeprefix("route-agent-"), str(ev.get("peer")),
                            str(ev.get("what"))))
    return sorted(out)


def detection(seen: list[tuple[float, str, str, str]], target: str) -> float | None:
    """Seconds from the injection to the first route agent's log line calling ``target`` down (``seen`` counts from
    ``PRE`` seconds before the injection, to catch peers called down before it)."""
    return next((at - PRE for at, _o, peer, _w in seen if peer == target), None)


def judge(
    fault: soak_faults.Fault, group: soak_watch.Group, doc: dict[str, Any], bound: float
) -> tuple[dict[str, Any], list[str]]:
    """One group's figures in one window, and the invariants it broke."""
    crossed = bool(fault.touches & group.touches)
    udp, tcp = doc.get("udp", {}), doc.get("tcp", {})
    problems: list[str] = []
    if "error" in udp or "error" in tcp:
        problems.append(f"{group.name}: traffic tool failed: {udp.get('error') or tcp.get('error')}")
        return {"group": group.name, "crossed": crossed}, problems
    flows = udp["flows"]
    lost = sum(f["lost"] for f in flows)
    tail = sum(f["lost_tail"] for f in flows)
    window = max((w for f in flows for w in f["windows_ms"]), default=0.0)
    # when each loss began, in seconds from the injection (negative: before it): a loss at the kill, at the heal
    # (the restart) or neither points at different causes
    lost_at = sorted(round(s - PRE, 2) for f in flows for s in f.get("window_starts_s", []))[:8]
    broken = tcp["conns"] - tcp["survived"]
    if group.seen is not None:  # an egress group that left with another address never used the VIP
        wrong = sorted({str(c.get("seen_ip")) for c in tcp.get("connections", [])
                        if c.get("survived") and c.get("seen_ip") != group.seen})  # fmt: skip
        if wrong:
            problems.append(f"{group.name}: the server saw {', '.join(wrong)}, not {group.seen}")
    if not crossed:
        if lost:
            at = ", ".join(f"{a:+.2f}" for a in lost_at)
            problems.append(f"{group.name}: did not cross the fault but lost {lost} datagrams (window {window:.0f} ms; "
                            f"at {at} s from the injection, hold {fault.hold:g} s)")
        if broken:
            problems.append(f"{group.name}: did not cross the fault but {broken}/{tcp['conns']} TCP connections broke")
    else:
        if tail:
            problems.append(f"{group.name}: {tail} datagrams lost at the end: a flow did not come back")
        if window > bound * 1000:
            problems.append(f"{group.name}: loss window {window:.0f} ms > bound {bound * 1000:.0f} ms")
        # A crossed group's TCP connections are counted, not judged: a flow moved to another gateway leaves with that
        # gateway's own Globalnet egress address, and a connection cannot survive its address changing.
    figures = {
        "group": group.name, "crossed": crossed, "sent": udp["sent"] * len(flows), "lost": lost, "lost_tail": tail,
        "window_ms": window, "lost_at_s": lost_at, "tcp_conns": tcp["conns"], "tcp_survived": tcp["survived"],
        "tcp_max_gap_ms": tcp.get("max_gap_ms"),
        # why the broken ones broke (reset, stalled, silent at the end): a crossed group's breaks are not judged, but
        # breaks in windows whose UDP lost nothing are a question of their own (docs/health.md, "false split")
        "tcp_errors": sorted({str(c["error"]) for c in tcp.get("connections", []) if c.get("error")})[:4],
        "lost_sports": [f["sport"] for f in flows if f["lost"]],  # which flows: one flow each window, or any?
    }  # fmt: skip
    return figures, problems


def converge(lab: LabLayout, snapshot_of: SnapshotOf, started: float,
             rounds: list[float] | None = None) -> tuple[float | None, list[str]]:  # fmt: skip
    """Poll the convergence invariants until they hold (seconds since ``started``, when the passing check ended:
    an upper bound) or the bound is spent. ``rounds`` gets each check's own duration (a ``magw plan`` process per
    node)."""
    nodes = [n.name for n in lab.nodes]
    problems: list[str] = []
    while time.monotonic() - started < CONVERGE_BOUND:
        began = time.monotonic()
        problems = soak_watch.agent_statuses(lab.name, nodes)
        if not problems:
            problems = soak_watch.globalnet_problems(snapshot_of, [c.id for c in lab.topology.clusters])
        st = state.read(lab.name)
        if not problems and st is not None and st.ovn:
            problems = [f"{c.id}: the OVN syncer's last sync is not ok with every gateway's router: "
                        f"{(lab_ovn.syncer_status(st, c.id) or {}).get('last_sync')}"
                        for c in lab.clusters if not lab_ovn.synced(lab, st, c)]  # fmt: skip
        if not problems:
            argv = {r.owner: r.argv for r in (st.processes if st is not None else ()) if r.kind == "route-agent"}
            for node in lab.nodes:
                flags = soak_kernel.plan_flags(argv.get(node.name, ()))
                plan = soak_kernel.plan_json(snapshot_of, node.cluster, node.name, flags)
                problems += [f"{node.name}: {p}" for p in soak_kernel.node_problems(node.namespace, plan)]
        if rounds is not None:
            rounds.append(time.monotonic() - began)
        if not problems:
            return time.monotonic() - started, []
        time.sleep(1.0)
    return None, problems


def heal_wait(fault: soak_faults.Fault, inject_took: float) -> float:
    """Seconds from the inject's return to the heal: the heal comes ``lead + hold`` after the injection began (at
    least ``hold`` after the inject returned), so the traffic, which runs ``PRE + lead + hold + POST``, still runs
    ``POST`` seconds after it. Without the lead, the seed-31 soak's gateway-add took 6.1 s of its window's 8 s of
    POST and the traffic ended inside the removed gateway's failover: judged "a flow did not come back"."""
    return max(fault.hold, fault.lead + fault.hold - inject_took)


def window(lab: LabLayout, snapshot_of: SnapshotOf, fault: soak_faults.Fault, groups: list[soak_watch.Group],
           res: soak_watch.Resources, base_port: int = soak_watch.BASE_PORT) -> dict[str, Any]:  # fmt: skip
    duration = PRE + fault.lead + fault.hold + POST
    drop_nodes = soak_drops.lab_nodes(lab, state.read(lab.name))
    drops_before = soak_drops.read_all(drop_nodes)  # before the traffic: evidence for a row that goes wrong
    running = {g.name: soak_watch.start(g, duration, flows=FLOWS, rate=RATE, conns=CONNS, base_port=base_port)
               for g in groups}  # fmt: skip
    time.sleep(PRE)
    wall = time.time()
    problems: list[str] = []
    try:
        injected = fault.inject()
    except Exception as exc:  # a fault that cannot be injected is reported, the soak goes on
        injected = f"inject failed: {type(exc).__name__}: {exc}"
        problems.append(f"{fault.kind} {fault.target}: {injected}")
    inject_took = time.time() - wall
    time.sleep(heal_wait(fault, inject_took))
    if fault.lead and inject_took > fault.lead:  # a slow inject leaves the traffic less than POST s after the heal
        problems.append(f"{fault.kind} {fault.target}: the inject took {inject_took:.1f} s, more than its "
                        f"{fault.lead:g} s lead: the traffic ran less than {POST:g} s after the heal")  # fmt: skip
    try:
        healed = fault.heal()
    except Exception as exc:
        healed = f"heal failed: {type(exc).__name__}: {exc}"
        problems.append(f"{fault.kind} {fault.target}: {healed}")
    heal_at = time.monotonic()
    docs = {name: soak_watch.collect(r, duration + 60) for name, r in running.items()}
    only_path = fault.outage and any(
        sum(n.gateway and n.cluster == c for n in lab.nodes) == 1 for c in fault.touches if c != "egress")
    bound = FAILOVER_BOUND + (fault.hold if only_path else 0.0)
    drops_after = soak_drops.read_all(drop_nodes)
    rows = []
    for g in groups:
        # A Service may have sent a flow to a pod of the failed node: lost while the node is down.
        mine = FAILOVER_BOUND + fault.hold if fault.outage and fault.target in g.backends else bound
        figures, bad = judge(fault, g, docs[g.name], mine)
        eg = lab.topology.egressgw
        clusters = {eg.cluster if t == "egress" and eg is not None else t for t in g.touches}
        spaces = {n.name: n.namespace for n in lab.nodes if n.cluster in clusters}
        dark = [f["sport"] for f in docs[g.name].get("udp", {}).get("flows", []) if f["lost_tail"]]
        if dark:  # the evidence, before the entries expire
            figures["dark_conntrack"] = soak_kernel.conntrack_evidence(spaces, dark)
        if not figures.get("crossed") and figures.get("lost", 0):  # where did they die? (benchmarks/soak_drops.py)
            figures["drops_moved"] = soak_drops.moved(drops_before, drops_after, spaces)
        rows.append(figures)
        problems += bad
    rounds: list[float] = []
    took, left = converge(lab, snapshot_of, heal_at, rounds)
    problems += [f"not converged {CONVERGE_BOUND:.0f} s after the heal: {p}" for p in left[:6]]
    problems += res.sample(lab.name)
    st = state.read(lab.name)
    assert st is not None
    seen = downs(st.dir, wall - PRE, time.time())
    detect = detection(seen, fault.target) if fault.kind in ("power-loss", "wan-flap") else None
    # Peers called down that the fault did not take down: probes lost on the loaded machine (all of a node's peers
    # at once is its own stall). Said with the row: they explain losses of groups that did not cross the fault.
    # Not counted: what the target itself saw (a node whose WAN or underlay is cut rightly loses its peers), and a
    # gateway's reach of a cluster the fault touches (it did lose that cluster, and its workers follow).
    spurious = sorted({f"{obs}->{peer}" for _at, obs, peer, what in seen
                       if fault.target not in (peer, obs) and what not in fault.touches})  # fmt: skip
    crossed = [r for r in rows if r.get("crossed")]
    return {
        "kind": fault.kind, "target": fault.target, "touches": sorted(fault.touches), "hold_s": fault.hold,
        "inject_s": round(inject_took, 2),
        "injected": injected, "healed": healed, "at": datetime.fromtimestamp(wall, UTC).isoformat(),
        "detection_s": None if detect is None else round(detect, 3),
        "crossed_lost": sum(r.get("lost", 0) for r in crossed),
        "crossed_window_ms": max((r.get("window_ms", 0.0) for r in crossed), default=0.0),
        "untouched_lost": sum(r.get("lost", 0) for r in rows if not r.get("crossed")),
        "bound_s": bound, "converged_s": None if took is None else round(took, 2),
        "check_s": round(rounds[-1], 2) if rounds else None,
        "groups": rows, "problems": problems, "spurious_downs": spurious,
    }  # fmt: skip


def soak(minutes: float, seed: int, name: str, report: Any = print, existing: bool = False, cable: str = "",
         fresh_ports: bool = False, kinds: frozenset[str] = frozenset(),
         control_plane: str = "file", cni: str = "generic") -> dict[str, Any]:  # fmt: skip
    rng = random.Random(seed)
    topo = load_topology(TOPOLOGY)
    if cable:
        topo = attrs.evolve(topo, cable=Cable(cable))
    lab = layout(name, topo)
    started = time.monotonic()
    doc: dict[str, Any] = {"seed": seed, "minutes": minutes, "lab": name, "cable": topo.cable.value,
                           "control_plane": control_plane, "cni": cni,
                           "fresh_ports": fresh_ports, "kinds": sorted(kinds) or "all", "bounds": {
        "failover_s": FAILOVER_BOUND, "converge_s": CONVERGE_BOUND, "rss_mib": RSS_BOUND_MIB, "fds": FD_BOUND}}
    rows: list[dict[str, Any]] = []
    finished = False
    try:
        if not existing:
            build.up(topo, name=name, wait_timeout=300.0, remote_wait=False, control_plane=control_plane, cni=cni)
        st = state.read(name)
        if st is None or st.control_plane != control_plane or st.ovn != (cni == "ovn"):
            raise RuntimeError(f"lab {name}: not a {control_plane} lab with --cni {cni}")
        broker, snapshot_of = st.broker_dir, soak_view.lab_snapshots(name)
        up_s = time.monotonic() - started
        took, left = converge(lab, snapshot_of, time.monotonic())
        if took is None:
            raise RuntimeError(f"the lab did not converge after up: {left[:6]}")
        groups = soak_watch.groups(lab, snapshot_of)
        if cni == "ovn":
            warm, rounds, dark = soak_watch.warm_up(groups)
            doc["warm_up_s"] = None if warm is None else round(warm, 1)
            doc["warm_up_rounds"] = rounds
            if warm is None:
                raise RuntimeError(f"OVN lab: flows still dark after the warm-up's 60 s: {dark[:8]}")
            report(f"OVN lab: every group's flows pass {warm:.1f} s after convergence, in {rounds} round(s) of the "
                   "warm-up (docs/robustness.md)")  # fmt: skip
            primed, dark = soak_watch.prime(groups, FLOWS, soak_watch.BASE_PORT)
            doc["primed_lost"] = primed
            if dark:
                raise RuntimeError(f"OVN lab: the first window's flows are dark: {dark[:8]}")
            report(f"OVN lab: the first window's flows were started ahead; their first second lost "
                   f"{sum(primed.values())} datagrams (docs/ovn.md, \"Requests that arrive together at a new "
                   "connection\")")  # fmt: skip
        res = soak_watch.Resources(rss_bound_mib=RSS_BOUND_MIB, fd_bound=FD_BOUND)
        res.sample(name)  # baselines
        report(f"lab {name} up in {up_s:.0f} s and converged; seed {seed}; groups: "
               + ", ".join(f"{g.name} -> {g.target}" for g in groups))  # fmt: skip
        report(soak_report.HEADER)
        end = started + minutes * 60
        faults = soak_faults.schedule(lab, broker, rng, 10_000, kinds, control_plane, cni)
        for fault in faults:
            if time.monotonic() + PRE + fault.lead + fault.hold + POST > end and rows:
                break
            # --fresh-ports: each window's UDP flows from other source ports than the last FRESH_CYCLE windows'
            # (longer ago than the kernel's UDP conntrack timeout), so no per-5-tuple state can outlive a window
            base = soak_watch.BASE_PORT + (len(rows) % FRESH_CYCLE) * FLOWS if fresh_ports else soak_watch.BASE_PORT
            row = window(lab, snapshot_of, fault, groups, res, base)
            rows.append(row)
            report(soak_report.row_text(len(rows), row))
        doc["faults"] = rows
        doc["resources"] = {k: {"rss_growth_mib": round(v[0], 1), "fd_growth": v[1]} for k, v in res.worst.items()}
        finished = True
    finally:
        if not existing:
            # A run that violated an invariant, or ended early, keeps the lab's logs and status files: the route
            # agents' health events say which probes missed (the thirty-third session's runs needed --existing).
            keep = kept.kept_dir(name) if not finished or any(r["problems"] for r in rows) else None
            gone = build.down(name, keep=keep)
            if gone.kept is not None:
                doc["kept"] = str(gone.kept)
                report(f"the lab's logs and status files are kept in {gone.kept}")
    doc["elapsed_s"] = round(time.monotonic() - started, 1)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long to inject faults (default 30)")
    p.add_argument("--seed", type=int, default=None, help="seed of the fault schedule (default: random, printed)")
    p.add_argument("--json", help="also write every figure to this file")
    p.add_argument("--name", default="", help="lab name (default: a unique one)")
    p.add_argument("--cable", choices=("vxlan", "wireguard"), default="",
                   help="the gateways' cable (default: the topology's, wireguard)")
    p.add_argument("--fresh-ports", action="store_true",
                   help="UDP flows from new source ports each window (cycling through 8 sets), not the same ones; "
                   "with --cni ovn every window's flows are then new connections, whose first requests the lab's "
                   "userspace datapath can lose (docs/ovn.md)")  # fmt: skip
    p.add_argument("--kinds", default="",
                   help="comma list of fault kinds to draw from (default: every kind; see docs/robustness.md)")
    p.add_argument("--control-plane", choices=("file", "kube"), default="file",
                   help="what feeds the daemons: file (the file broker) or kube (API server emulators, with their own "
                   "fault kinds: docs/robustness.md)")  # fmt: skip
    p.add_argument("--cni", choices=("generic", "ovn"), default="generic",
                   help="the clusters' CNI: generic (the lab's) or ovn (OVN-Kubernetes with real packets, on either "
                   "control plane: OVN's own fault kinds too: docs/robustness.md)")  # fmt: skip
    p.add_argument("--existing", action="store_true",
                   help="run on the running lab --name (built from examples/lab-soak.yaml) and leave it up")
    args = p.parse_args(argv)
    if not 0 < args.minutes <= 24 * 60:
        p.error(f"--minutes: must be in (0, 1440], got {args.minutes}")
    if os.geteuid() != 0:
        print("soak: needs root (network namespaces)", file=sys.stderr)
        return 2
    configure_logging("console", "warning")
    signal.signal(signal.SIGTERM, _stop)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    name = args.name or f"sk{uuid.uuid4().hex[:6]}"
    if args.existing and not args.name:
        p.error("--existing: needs --name")
    kinds = frozenset(k.strip() for k in args.kinds.split(",") if k.strip())
    known = soak_faults.kinds_of(args.control_plane, args.cni)
    if kinds - set(known):
        p.error(f"--kinds: {', '.join(sorted(kinds - set(known)))} unknown with --control-plane "
                f"{args.control_plane} --cni {args.cni}; known: {', '.join(known)}")  # fmt: skip
    doc = soak(args.minutes, seed, name, report=lambda s: print(s, flush=True), existing=args.existing,
               cable=args.cable, fresh_ports=args.fresh_ports, kinds=kinds,
               control_plane=args.control_plane, cni=args.cni)  # fmt: skip
    lines = soak_report.summary(doc, RSS_BOUND_MIB, FD_BOUND)
    for line in lines:
        print(line)
    doc["summary"] = lines
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 1 if any(r["problems"] for r in doc["faults"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
