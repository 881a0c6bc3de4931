"""Benchmark: datagrams lost while one gateway's WireGuard key is rotated, with real paced UDP flows.

One lab: east and west, ``--gateways`` gateways (default 2) and one worker with one pod each, cable
wireguard (the inter-cluster VXLAN goes through one wireguard-go device per gateway, ``magw-wg``). Per
run, ``--flows`` UDP flows of ``--rate`` datagrams/s each go from east's worker pod to a reflector in west's
worker pod and back, every datagram numbered per flow (``magw.lab.payload.losswatch``, as
``benchmarks/failover.py``), and ``--rotate-at`` seconds in, east-gw1's key is rotated
(``magw.drivers.wireguard.keys.rotate`` on its state directory, what ``magw cable rotate-key`` does). Then:
its gateway daemon sees the new key file within ~0.1 s and republishes its Endpoint with the new public
key; the route agents of the remote gateways are to replace their peer for it, and its own route agent to
set the new private key at its next sync. Until both ends hold the new keys and have shaken hands again,
what crosses east-gw1's tunnel in either direction is lost.

Why 40 s of traffic by default: the route agents give their WireGuard device a new key or peer only in a
sync that applies a kernel change, or, in a quiet lab, about the periodic resync (``--resync-period``,
30 s: seen 25 s after a rotation made 5 s after the lab came up). The Endpoint change itself changes
nothing in the kernel (the VXLAN peer is the gateway's inner address, the same after the rotation), so
nothing is applied then: measured 2026-11-28, the new key took effect 0.3-25 s after the rotation, when an
unrelated health transition or the resync came, on the rotating gateway and on the remote ones in the same
cycle only by chance (the lab starts all its agents together). 40 s covers the resync; the stream stays
within losswatch's 120 s.

Which gateways a flow crosses (toward the server, and back) is read from nft sets in every gateway just
before the rotation (``magw.lab.observe.flowwatch``): flows hash independently in each direction, so with 2
gateways about 1 - (1/2)^2 = 75 % of them cross east-gw1 at all.

Per run it prints: when (ms after the rotation) the new public key was in east-gw1's Endpoint document, when
its route agent's status showed it applied (polled every 20 ms), when every remote gateway's device had the
new peer and when all of them had shaken hands with it (``wg show`` in their wireguard-go's mount namespace,
every 100 ms); the datagrams each flow lost, the flows through east-gw1 first, with their longest loss
window (``*``: the flow crossed other gateways at the end than before the rotation); the p50 / max loss
window of the flows through east-gw1 that lost anything; the datagrams lost by the flows that never crossed
east-gw1 (target: 0: a rotation must not touch the other gateway's flows; if they lost anything, how many of
them moved); the peers the route agents declared down during the run, those involving east-gw1 and those
elsewhere (the latter flag the run ``flapping``: probes were lost where nothing changed, a loaded machine,
and flows may have moved for that reason) and the share of the scheduled datagrams the senders sent (below
100 %: a starved CPU). ``--repeat`` rotates again in the same lab once every route agent sees every peer
up; a summary over all runs ends the output.

Default 16 flows x 100 datagrams/s (a 10 ms resolution): every datagram crosses wireguard-go twice, and on
the 2-vCPU machine of docs/performance.md 32 flows starved the senders (55 % of their schedule sent) and
made the health probes of the whole lab flap.

Run as root: ``.venv/bin/python benchmarks/rotation.py [--flows 16 --rate 100 --repeat 3] [--json FILE]
[--keep DIR]``. The lab has a unique name and is removed in ``finally``; every process started is stopped
by PID; every wait is bounded, and so is the whole run (``--max-seconds``: no new run starts after it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.failover import wait_all_up  # after sys.path
from magw.drivers.wireguard import keys  # after sys.path
from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState  # after sys.path
from magw.lab.planes.daemons import agent_status, endpoint_file, node_state_dir  # after sys.path
from magw.lab.scenarios.failover import FailoverResult, FlowOutcome, measure_event  # after sys.path
from magw.lab.spec import naming  # after sys.path
from magw.lab.spec.layout import LabLayout, NodeLayout, layout  # after sys.path
from magw.lab.spec.topology import Topology, parse_topology  # after sys.path
from magw.model.cable import WG_DEVICE, Cable  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

VICTIM = "east-gw1"
WATCH_EVERY = 0.02  # seconds between looks at the Endpoint document and the route agent's status
REMOTE_EVERY = 5  # look at the remote gateways' devices every 5th turn (a wg call each)


def topology(gateways: int, strategy: str) -> Topology:
    spec = {"gateways": gateways, "workers": 1, "pods_per_node": 1}
    return parse_topology({"strategy": strategy, "cable": Cable.WIREGUARD.value,
                           "clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})  # fmt: skip


def health_downs(lab_name: str) -> tuple[int, int]:
    """Peers the lab's route agents have declared down so far (``health.state_changed`` to down in their logs):
    (those that involve the victim, as the declaring node or as the peer; all others)."""
    involving = others = 0
    for log in sorted((naming.state_dir(lab_name) / "logs").glob("route-agent-*.log")):
        node = log.stem.removeprefix("route-agent-")
        with open(log) as f:
            for line in f:
                if '"health.state_changed"' not in line or '"new": "down"' not in line:
                    continue
                if node == VICTIM or f'"peer": "{VICTIM}"' in line:
                    involving += 1
                else:
                    others += 1
    return involving, others


def handshakes(st: LabState, gw: NodeLayout) -> dict[str, int]:
    """Public key -> latest handshake (epoch s, 0: none yet) of every peer of the gateway's ``magw-wg``.

    ``wg show`` in the gateway's namespace and in its wireguard-go's mount namespace (where the control socket
    is, magw.drivers.wireguard.userspace); {} when it cannot be read (e.g. wireguard-go restarting)."""
    try:
        pid = (node_state_dir(st, gw) / keys.KEY_DIR / "wireguard-go.pid").read_text().strip()
        done = subprocess.run(
            ["ip", "netns", "exec", gw.namespace, "nsenter", f"--target={pid}", "--mount",
             "wg", "show", WG_DEVICE, "latest-handshakes"],
            capture_output=True, text=True, timeout=5, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in done.stdout.splitlines():
        key, _, epoch = line.partition("\t")
        if epoch.strip().isdigit():
            out[key] = int(epoch)
    return out


class RotationWatch:
    """After the rotation, when (ms): the new public key is in the victim's Endpoint; in its route agent's status
    (the device holds the new private key); a peer of every remote gateway's device; and every remote gateway
    has shaken hands with it."""

    def __init__(self, st: LabState, node: NodeLayout, remotes: tuple[NodeLayout, ...], limit: float) -> None:
        self.st, self.node, self.remotes, self.limit = st, node, remotes, limit
        self.t0 = 0.0
        self.public_key = ""
        self.published_ms: float | None = None
        self.applied_ms: float | None = None
        self.remote_ms: dict[str, float] = {}  # remote gateway -> when its device had the new peer
        self.handshake_ms: dict[str, float] = {}  # remote gateway -> when it had shaken hands with the new key
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def rotate(self) -> None:
        """Rotate the victim's key now and start watching (the event of the measurement)."""
        self.t0 = time.monotonic()
        new = keys.rotate(node_state_dir(self.st, self.node))
        self.public_key = keys.public_key(new)  # the public half only: what the Endpoint and the status show
        self._thread.start()

    def _watch(self) -> None:
        path: Path = endpoint_file(self.st.broker_dir, self.node)
        for turn in range(int(self.limit / WATCH_EVERY) + 1):  # bounded in count; the reads take time too
            now_ms = (time.monotonic() - self.t0) * 1000
            if self._stop.is_set() or now_ms > self.limit * 1000:
                return
            if turn % REMOTE_EVERY == 0:  # a wg call per remote gateway: every 0.1 s only
                for gw in self.remotes:
                    if gw.name in self.handshake_ms:
                        continue
                    peers = handshakes(self.st, gw)
                    if self.public_key in peers:
                        self.remote_ms.setdefault(gw.name, now_ms)
                        if peers[self.public_key] > 0:
                            self.handshake_ms[gw.name] = now_ms
            if self.published_ms is None:
                try:
                    if self.public_key in path.read_text():
                        self.published_ms = now_ms
                except OSError:
                    pass
            if self.applied_ms is None:
                cable = (agent_status(self.st, self.node) or {}).get("cable") or {}
                if cable.get("public_key") == self.public_key:
                    self.applied_ms = now_ms
            if self.published_ms is not None and self.applied_ms is not None and self.all_shaken:
                return
            self._stop.wait(WATCH_EVERY)

    @property
    def all_shaken(self) -> bool:
        return len(self.handshake_ms) == len(self.remotes)

    def remote_max(self, times: dict[str, float]) -> float | None:
        """When the last remote gateway got there; None while one has not."""
        return max(times.values()) if len(times) == len(self.remotes) else None

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def _ms(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f} ms"


def _flow(f: FlowOutcome) -> str:
    """``sport:lost(window)``, ``*`` when the flow crossed other gateways at the end (it moved)."""
    return f"{f.sport}:{f.lost}" + (f"({f.window_ms:.0f}ms)" if f.lost else "") + ("*" if f.moved else "")


def run_doc(result: FailoverResult, watch: RotationWatch, downs: tuple[int, int]) -> dict[str, Any]:
    crossed, untouched = result.crossed, result.untouched
    windows = sorted(f.window_ms for f in crossed if f.lost)

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return {
        "published_ms": ms(watch.published_ms),
        "applied_ms": ms(watch.applied_ms),
        "remote_peer_ms": ms(watch.remote_max(watch.remote_ms)),
        "remote_handshake_ms": ms(watch.remote_max(watch.handshake_ms)),
        "flows": len(result.flows),
        "crossed_victim": len(crossed),
        "crossed_with_loss": len(windows),
        "window_p50_ms": round(statistics.median(windows), 1) if windows else 0.0,
        "window_max_ms": round(max(windows), 1) if windows else 0.0,
        "lost_crossed": sum(f.lost for f in crossed),
        "untouched": len(untouched),
        "lost_on_untouched": sum(f.lost for f in untouched),
        "untouched_moved": sum(1 for f in untouched if f.moved),
        "untouched_moved_lost": sum(f.lost for f in untouched if f.moved),
        "health_downs": downs[0],
        "health_downs_elsewhere": downs[1],
        "rotated_at": round(result.failed_at, 3),
        "sent_share": result.summary()["sent_share"],
        "per_flow": [
            {
                "sport": f.sport,
                "forward": sorted(f.before.forward),
                "back": sorted(f.before.back),
                "forward_after": sorted(f.after.forward),
                "back_after": sorted(f.after.back),
                "crossed_victim": f.crossed(VICTIM),
                "lost": f.lost,
                "window_ms": f.window_ms,
            }
            for f in result.flows
        ],
    }


def print_run(i: int, doc: dict[str, Any], result: FailoverResult) -> None:
    print(f"run {i}: rotated {VICTIM}'s key; new public key in its Endpoint after {_ms(doc['published_ms'])},"
          f" set by its route agent after {_ms(doc['applied_ms'])}, a peer of every remote gateway after"
          f" {_ms(doc['remote_peer_ms'])}, all of them shook hands with it after {_ms(doc['remote_handshake_ms'])}"
          " (polled every 20 ms, the remote gateways every 100 ms)", flush=True)  # fmt: skip
    crossed = " ".join(_flow(f) for f in result.crossed) or "-"
    untouched = " ".join(_flow(f) for f in result.untouched) or "-"
    print(f"  lost per flow (source port:datagrams lost(longest window), * moved), through {VICTIM}: {crossed}")
    print(f"  lost per flow, not through {VICTIM}: {untouched}")
    print(
        f"  through {VICTIM}: {doc['crossed_victim']}/{doc['flows']} flows, {doc['crossed_with_loss']} lost"
        f" {doc['lost_crossed']} datagrams, loss window p50 {doc['window_p50_ms']:.1f} ms max"
        f" {doc['window_max_ms']:.1f} ms; not through it: {doc['untouched']} flows lost {doc['lost_on_untouched']}"
        f" ({'ok' if doc['lost_on_untouched'] == 0 else 'NOT 0'}; {doc['untouched_moved']} of them moved, losing"
        f" {doc['untouched_moved_lost']}); peers declared down: {doc['health_downs']} involving {VICTIM},"
        f" {doc['health_downs_elsewhere']} elsewhere"
        + (
            " [flapping: the rest of the lab lost probes too, a loaded machine]"
            if doc["health_downs_elsewhere"]
            else ""
        )
        + ";"
        f" sent {doc['sent_share']:.0%}",
        flush=True,
    )


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    windows = sorted(f["window_ms"] for r in runs for f in r["per_flow"] if f["crossed_victim"] and f["lost"])
    published = [r["published_ms"] for r in runs if r["published_ms"] is not None]
    applied = [r["applied_ms"] for r in runs if r["applied_ms"] is not None]
    shaken = [r["remote_handshake_ms"] for r in runs if r["remote_handshake_ms"] is not None]
    return {
        "runs": len(runs),
        "window_p50_ms": round(statistics.median(windows), 1) if windows else 0.0,
        "window_max_ms": round(max(windows), 1) if windows else 0.0,
        "crossed_flows": sum(r["crossed_victim"] for r in runs),
        "crossed_with_loss": sum(r["crossed_with_loss"] for r in runs),
        "lost_crossed": sum(r["lost_crossed"] for r in runs),
        "untouched_flows": sum(r["untouched"] for r in runs),
        "lost_on_untouched": sum(r["lost_on_untouched"] for r in runs),
        "published_p50_ms": round(statistics.median(published), 1) if published else None,
        "applied_p50_ms": round(statistics.median(applied), 1) if applied else None,
        "applied_max_ms": round(max(applied), 1) if applied else None,
        "applied_runs": len(applied),
        "handshake_p50_ms": round(statistics.median(shaken), 1) if shaken else None,
        "handshake_max_ms": round(max(shaken), 1) if shaken else None,
        "handshake_runs": len(shaken),
        "health_downs": sum(r["health_downs"] for r in runs),
        "health_downs_elsewhere": sum(r["health_downs_elsewhere"] for r in runs),
        "flapping_runs": sum(1 for r in runs if r["health_downs_elsewhere"]),
    }


def measure(lab: LabLayout, st: LabState, args: argparse.Namespace) -> list[dict[str, Any]]:
    client = lab.cluster("east").pods_of("east-w1")[0]
    server = lab.cluster("west").pods_of("west-w1")[0]
    victim = lab.node(VICTIM)
    deadline = time.monotonic() + args.max_seconds
    runs: list[dict[str, Any]] = []
    for i in range(1, args.repeat + 1):
        if time.monotonic() >= deadline:
            print(f"--max-seconds {args.max_seconds:g} reached: {args.repeat - len(runs)} run(s) left out", flush=True)
            break
        wait_all_up(lab, st)
        time.sleep(args.settle)
        remotes = tuple(g for g in lab.gateways if g.cluster != victim.cluster)
        watch = RotationWatch(st, victim, remotes, limit=args.duration - args.rotate_at + 1.0)
        before = health_downs(lab.name)
        try:
            result = measure_event(lab, st, event=watch.rotate, victim=VICTIM, client=client, server=server,
                                   flows=args.flows, rate=args.rate, duration=args.duration, event_at=args.rotate_at,
                                   senders=args.senders)  # fmt: skip
        finally:
            watch.stop()
        after = health_downs(lab.name)
        doc = run_doc(result, watch, (after[0] - before[0], after[1] - before[1]))
        print_run(i, doc, result)
        runs.append(doc)
    return runs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=16, help="UDP flows (default 16: see the docstring)")
    p.add_argument(
        "--rate", type=int, default=100, help="datagrams per second per flow (default 100: 10 ms resolution)"
    )
    p.add_argument("--gateways", type=int, choices=range(2, 5), default=2, metavar="2..4",
                   help="gateways per cluster (default 2)")  # fmt: skip
    p.add_argument("--strategy", default="resilient", choices=("resilient", "multipath"))
    p.add_argument("--duration", type=float, default=40.0,
                   help="seconds of traffic per run, at most 120 (default 40: see the docstring)")  # fmt: skip
    p.add_argument("--rotate-at", type=float, default=2.0, help="seconds into the traffic of the rotation (default 2)")
    p.add_argument("--senders", type=int, default=2, help="sender processes sharing the flows (default 2)")
    p.add_argument("--settle", type=float, default=1.0, help="seconds between the peers all up and a run (default 1)")
    p.add_argument("--repeat", type=int, choices=range(1, 21), default=3, metavar="1..20",
                   help="rotations, one per run, in the same lab (default 3)")  # fmt: skip
    p.add_argument("--max-seconds", type=float, default=600.0,
                   help="no new run starts after this many seconds of runs (default 600)")  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="also write the runs and the summary as JSON")
    p.add_argument("--keep", metavar="DIR", help="copy the lab's files (logs, status, state: lab keys too) to DIR")
    args = p.parse_args()
    if os.geteuid() != 0:
        p.error("needs root (network namespaces)")
    if not 0 < args.rotate_at < args.duration - 1.0 or args.duration > 120:
        p.error("--rotate-at: must leave at least 1 s of traffic after it, within --duration (at most 120 s)")
    configure_logging("console", "warning")
    print(f"nproc {os.cpu_count()}; kernel {os.uname().release}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())};"
          f" {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")  # fmt: skip
    print(f"{args.flows} flows x {args.rate} pkt/s, {args.gateways} gateways per cluster ({args.strategy}), cable"
          f" wireguard, key of {VICTIM} rotated {args.rotate_at:g} s into {args.duration:g} s of traffic,"
          f" {args.repeat} run(s)", flush=True)  # fmt: skip
    topo = topology(args.gateways, args.strategy)
    name = f"r{uuid.uuid4().hex[:7]}"
    runs: list[dict[str, Any]] = []
    try:
        st = build.up(topo, name=name, wait_timeout=120.0)
        runs = measure(layout(name, topo), st, args)
    finally:
        report = build.down(name, keep=Path(args.keep) if args.keep else None)
        if report.kept is not None:
            print(f"lab files kept in {report.kept}")
    total = summary(runs)
    print(
        f"summary over {total['runs']} run(s): flows through {VICTIM} {total['crossed_with_loss']}/"
        f"{total['crossed_flows']} lost anything ({total['lost_crossed']} datagrams), loss window p50"
        f" {total['window_p50_ms']:.1f} ms max {total['window_max_ms']:.1f} ms; flows not through it lost"
        f" {total['lost_on_untouched']} (of {total['untouched_flows']} flows; target 0); new key published p50"
        f" {_ms(total['published_p50_ms'])}, applied p50 {_ms(total['applied_p50_ms'])} max"
        f" {_ms(total['applied_max_ms'])} ({total['applied_runs']}/{total['runs']} runs), every remote gateway"
        f" shook hands p50 {_ms(total['handshake_p50_ms'])} max {_ms(total['handshake_max_ms'])}"
        f" ({total['handshake_runs']}/{total['runs']} runs); peers declared down {total['health_downs']} involving"
        f" {VICTIM}, {total['health_downs_elsewhere']} elsewhere ({total['flapping_runs']} run(s) flagged flapping)"
    )
    if args.json:
        doc = {"cable": Cable.WIREGUARD.value, "victim": VICTIM, "flows": args.flows, "rate": args.rate,
               "gateways": args.gateways, "strategy": args.strategy, "runs": runs, "summary": total}  # fmt: skip
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0 if runs and total["lost_on_untouched"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
