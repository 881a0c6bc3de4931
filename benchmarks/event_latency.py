"""Benchmark: one Endpoint change in the file broker to the kernel, under N routes, in a running route
agent.

Run as root: ``.venv/bin/python benchmarks/event_latency.py [--routes 100000] [--repeat 3]``.

A broker directory holds cluster ``east`` (gateways e-gw1, e-gw2, worker e-w1) and 100 remote clusters
sharing ``--routes`` /24 CIDRs. ``magw-route-agent`` runs as worker e-w1 inside a fresh namespace (``ip
netns exec``, ``--endpoint-ttl 0 --no-health``). Once the kernel holds every route, each repetition adds
a third east gateway (its Node and Endpoint documents, written atomically by rename) and measures the
time until ``ip -n NS -json nexthop show`` shows a group of 3 members; then removes it and measures until
the group is back to 2. The poll runs every 5 ms, so the figures are an upper bound by that much. Then,
as many times, a broker Health document takes e-gw2 down and is removed again: the time until the groups
hold e-gw1 only (and both again), and the kernel changes the agent's syncs logged for each down. Last,
with the agent stopped, the kernel baseline: ``ip -batch`` replacing the same groups with one member more
(and back) under the same routes, which is most of what the agent's sync waits for (a group replace costs
the kernel time in proportion to the routes). Before that, it waits for the agent's periodic full resync
(observed in its audit thread) and takes e-gw2 down and up again while the resync observes: the time of
each to the kernel, and the audits discarded because the kernel changed under them. The namespace, the
agent (by PID) and the directory are removed in ``finally``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REMOTES = 100
FIRST = 11 << 24
TIMEOUT = 600.0
AGENT = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "magw-route-agent")

EAST_NODES = [("e-gw1", "172.18.0.6", "10.1.1.1", True), ("e-gw2", "172.18.0.8", "10.1.2.1", True)]
WORKER = ("e-w1", "172.18.0.3", "10.1.3.1", False)
NEW_GW = ("e-gw3", "172.18.0.10", "10.1.4.1", True)


def _net(i: int) -> str:
    v = FIRST + (i << 8)
    return f"{v >> 24}.{(v >> 16) & 255}.{(v >> 8) & 255}.0/24"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def nodes_text(nodes: list[tuple[str, str, str, bool]]) -> str:
    docs = [
        f"kind: Node\ncluster: east\nname: {n}\nip: {ip}\ncni_ip: {cni}\n" + ("gateway: true\n" if gw else "")
        for n, ip, cni, gw in nodes
    ]
    return "---\n".join(docs)


def endpoint_text(cluster: str, host: str, ip: str) -> str:
    return f"kind: Endpoint\ncluster: {cluster}\nhostname: {host}\nprivate_ip: {ip}\n"


def write_broker(d: Path, routes: int) -> None:
    docs = [
        "kind: Config\nmulti_active_gateway: true\nstrategy: resilient\nunderlay_mtu: 1500\n",
        "kind: Cluster\nid: east\npod_cidrs: [10.1.0.0/16]\nservice_cidrs: [100.1.0.0/16]\n",
    ]
    base, extra = divmod(routes, REMOTES)
    index = 0
    for r in range(1, REMOTES + 1):
        count = base + (1 if r <= extra else 0)
        nets = [_net(index + k) for k in range(count)]
        index += count
        docs.append(f"kind: Cluster\nid: c{r}\nservice_cidrs: [{nets[0]}]\npod_cidrs: [{', '.join(nets[1:])}]\n")
        write_atomic(d / f"endpoint-c{r}@c{r}-gw.yaml", endpoint_text(f"c{r}", f"c{r}-gw", f"172.31.{r}.2"))
    write_atomic(d / "clusterset.yaml", "---\n".join(docs))
    write_atomic(d / "nodes-east.yaml", nodes_text([*EAST_NODES, WORKER]))
    for name, ip, _cni, _gw in EAST_NODES:
        write_atomic(d / f"endpoint-east@{name}.yaml", endpoint_text("east", name, ip))


def group_sizes(ns: str) -> list[int]:
    out = subprocess.run(
        ["ip", "-n", ns, "-json", "nexthop", "show"], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    return sorted(len(nh["group"]) for nh in json.loads(out or "[]") if "group" in nh)


def route_count(ns: str) -> int:
    out = subprocess.run(
        ["ip", "-n", ns, "route", "show", "table", "all"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return sum(1 for line in out.splitlines() if line[:1].isdigit() and not line.startswith("10.1."))


def wait_for(ns: str, members: int, deadline: float) -> float:
    """Seconds until every group has exactly ``members`` members (1: or no group is left)."""
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        sizes = group_sizes(ns)
        if (sizes or members == 1) and all(s == members for s in sizes):
            return time.perf_counter() - started
        time.sleep(0.005)
    raise SystemExit(f"timed out waiting for groups of {members} members")


def sync_changes(log: Path, offset: int) -> tuple[list[int], int]:
    """The ``changes`` of each ``reconciler.sync_done`` the agent logged after byte ``offset``, and the new offset."""
    with open(log, "rb") as f:
        f.seek(offset)
        data = f.read()
    out = []
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("{") and '"reconciler.sync_done"' in line:
            out.append(int(json.loads(line).get("changes", 0)))
    return out, offset + len(data)


def health_cycles(ns: str, broker: Path, log: Path, repeat: int) -> None:
    """A Health document takes e-gw2 down (the groups drop to e-gw1), then goes; time and ops of each."""
    downs, ups, ops = [], [], []
    offset = log.stat().st_size
    for _ in range(repeat):
        write_atomic(broker / "health.yaml", "kind: Health\ndown: [e-gw2]\n")
        downs.append(wait_for(ns, 1, time.perf_counter() + 60))
        time.sleep(0.5)  # the sync's log line follows the kernel change
        changes, offset = sync_changes(log, offset)
        ops.append(changes)
        (broker / "health.yaml").unlink()
        ups.append(wait_for(ns, 2, time.perf_counter() + 60))
        time.sleep(1.0)
        _, offset = sync_changes(log, offset)
    for what, xs in (("health: gateway down", downs), ("health: gateway up", ups)):
        print(f"{what}: broker write to kernel p50 {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms")
    print(f"health: kernel changes of the syncs after each down: {ops}")


RESYNC_WAIT = 40.0  # seconds: the agent's default --resync-period is 30


def _events(log: Path, offset: int, name: str) -> list[dict[str, object]]:
    with open(log, "rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{") and f'"{name}"' in line]


def resync_cycle(ns: str, broker: Path, log: Path, deadline: float) -> None:
    """An event during the agent's periodic resync, whose observe takes seconds at 100k routes (the nft listing
    of the set, the route dump). The resync observes in its audit thread (docs/reconciler.md, "Audits"): right
    after the agent logs ``reconciler.audit_started``, a Health document takes e-gw2 down and is removed again;
    the time of each to the kernel, and what became of the audit."""
    offset = log.stat().st_size
    while not _events(log, offset, "reconciler.audit_started"):
        if time.perf_counter() > deadline:
            print(f"resync: no audit started within {RESYNC_WAIT:.0f} s")
            return
        time.sleep(0.02)
    write_atomic(broker / "health.yaml", "kind: Health\ndown: [e-gw2]\n")
    down = wait_for(ns, 1, time.perf_counter() + 60)
    (broker / "health.yaml").unlink()
    up = wait_for(ns, 2, time.perf_counter() + 60)
    print(f"event during a resync: health down to kernel {down * 1000:.0f} ms, up {up * 1000:.0f} ms")
    audited: list[dict[str, object]] = []
    while time.perf_counter() < deadline + 60:
        audited = [e for e in _events(log, offset, "reconciler.sync_done") if e.get("reasons") == "audit"]
        if audited or _events(log, offset, "reconciler.audit_gave_up"):
            break
        time.sleep(0.2)
    discarded = len(_events(log, offset, "reconciler.audit_discarded"))
    took = [f"{float(str(e['took_ms'])):.0f} ms" for e in audited] if audited else "none"
    print(f"resync: audits discarded (the kernel changed under them) {discarded}; the audited full sync: {took}")


def group_replaces(groups: list[dict[str, Any]], extra: int | None) -> str:
    """``ip -batch`` lines replacing each group of ``ip -json nexthop show`` as it is, or with member ``extra``
    more (resilient groups keep their buckets and idle timer)."""
    lines = []
    for g in groups:
        members = "/".join(str(m["id"]) for m in g["group"]) + (f"/{extra}" if extra is not None else "")
        res = g.get("resilient_args", {})
        tail = f" type resilient buckets {res['buckets']} idle_timer {res['idle_timer']}" if res else ""
        lines.append(f"nexthop replace id {g['id']} group {members}{tail}")
    return "\n".join(lines) + "\n"


def kernel_baseline(ns: str, repeat: int) -> None:
    """The kernel's own cost of the same change: ``ip -batch`` replacing every group with one member more,
    then as it was, in the same namespace under the same routes (the agent stopped)."""
    groups = [
        nh
        for nh in json.loads(
            subprocess.run(
                ["ip", "-n", ns, "-json", "nexthop", "show"], check=True, capture_output=True, text=True, timeout=30
            ).stdout
        )
        if "group" in nh
    ]
    spare = {m["id"] for g in groups for m in g["group"]}
    extra = max(spare) + 1
    via = "240.18.0.10"  # e-gw3's VTEP, as the agent made it
    subprocess.run(["ip", "-n", ns, "nexthop", "replace", "id", str(extra), "via", via, "dev", "vx-submariner"],
                   check=True, timeout=30)  # fmt: skip

    adds: list[float] = []
    removes: list[float] = []
    for _ in range(repeat):
        for more, xs in ((True, adds), (False, removes)):
            started = time.perf_counter()
            text = group_replaces(groups, extra if more else None)
            subprocess.run(["ip", "-n", ns, "-batch", "-"], input=text, text=True, check=True, timeout=120)
            xs.append(time.perf_counter() - started)
    print(
        f"kernel baseline: ip -batch replacing the {len(groups)} groups, one member more p50 "
        f"{statistics.median(adds) * 1000:.0f} ms, back p50 {statistics.median(removes) * 1000:.0f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", type=int, default=100_000, help="remote CIDRs (= routes), 100..200000")
    parser.add_argument("--repeat", type=int, default=3, help="add/remove cycles, 1..20")
    parser.add_argument("--nexthop-compat-mode", choices=("keep", "off"), default="keep",
                        help="the agent's flag (off: no route notifications per group change; the ip -batch "
                        "baseline then runs in the same mode, in the same namespace)")  # fmt: skip
    parser.add_argument("--keep-log", type=Path, default=None, help="copy the agent's JSON log here at the end")
    args = parser.parse_args(argv)
    if not REMOTES <= args.routes <= 200_000 or not 1 <= args.repeat <= 20:
        parser.error("--routes must be 100..200000 and --repeat 1..20")
    if os.geteuid() != 0:
        print("needs root (creates a network namespace)", file=sys.stderr)
        return 2
    print(f"routes {args.routes}; nproc {os.cpu_count()}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"nexthop compat mode {args.nexthop_compat_mode}")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="magw-evlat-"))
    broker = work / "broker"
    broker.mkdir()
    ns = f"magwev-{uuid.uuid4().hex[:10]}"
    agent: subprocess.Popen[bytes] | None = None
    try:
        write_broker(broker, args.routes)
        subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
        setup = ["link set lo up", "link add cni0 type bridge", f"addr add {WORKER[2]}/24 dev cni0", "link set cni0 up"]
        subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(setup) + "\n", text=True, check=True)
        with open(work / "agent.log", "wb") as log:
            agent = subprocess.Popen(
                ["ip", "netns", "exec", ns, AGENT, "--broker-dir", str(broker), "--node", WORKER[0],
                 "--cluster", "east", "--endpoint-ttl", "0", "--no-health", "--log-format", "json",
                 "--nexthop-compat-mode", args.nexthop_compat_mode],
                stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        started = time.perf_counter()
        first = wait_for(ns, 2, time.perf_counter() + TIMEOUT)
        while route_count(ns) < args.routes and time.perf_counter() - started < TIMEOUT:
            time.sleep(0.5)
        print(
            f"initial: group after {first:.2f} s, {route_count(ns)} routes after {time.perf_counter() - started:.1f} s"
        )
        adds, removes = [], []
        for _ in range(args.repeat):
            write_atomic(broker / "nodes-east.yaml", nodes_text([*EAST_NODES, NEW_GW, WORKER]))
            write_atomic(broker / f"endpoint-east@{NEW_GW[0]}.yaml", endpoint_text("east", NEW_GW[0], NEW_GW[1]))
            adds.append(wait_for(ns, 3, time.perf_counter() + 60))
            (broker / f"endpoint-east@{NEW_GW[0]}.yaml").unlink()
            removes.append(wait_for(ns, 2, time.perf_counter() + 60))
            write_atomic(broker / "nodes-east.yaml", nodes_text([*EAST_NODES, WORKER]))
            time.sleep(1.0)  # let the node change settle before the next cycle
        for what, xs in (("gateway added", adds), ("gateway removed", removes)):
            print(
                f"{what}: broker write to kernel p50 {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms"
            )
        health_cycles(ns, broker, work / "agent.log", args.repeat)
        resync_cycle(ns, broker, work / "agent.log", time.perf_counter() + RESYNC_WAIT)
        agent.send_signal(signal.SIGTERM)  # the baseline changes the groups behind its back: stop it first
        agent.wait(timeout=30)
        kernel_baseline(ns, args.repeat)
        return 0
    finally:
        if agent is not None and agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=20)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)
        if (work / "agent.log").exists():  # kept for a look after the run
            shutil.copy(work / "agent.log", Path(tempfile.gettempdir()) / "event_latency_agent.log")
        if args.keep_log:
            shutil.copy(work / "agent.log", args.keep_log)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
