"""The soak's traffic groups and its non-kernel checks: daemons' RSS and fds, Globalnet allocations, statuses.

Traffic: per group, UDP flows with per-flow sequence numbers (``magw.lab.payload.losswatch stream``) and long-lived
TCP connections (``magw.lab.payload.tcpkeep hold``), started for one fault's window and read when it ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import attrs

from benchmarks.soak_view import SnapshotOf
from magw.lab.build import procs, state
from magw.lab.observe import globalview
from magw.lab.spec.layout import LabLayout
from magw.model.globalnet import Globalnet

BASE_PORT = 41000  # losswatch stream: flow i sends from BASE_PORT + i
DAEMONS = ("route-agent", "gateway", "globalnet", "egress", "egress-agent", "ovn-syncer")


@attrs.frozen
class Group:
    """One kind of traffic: from ``ns`` to ``target``; ``touches``: the clusters it crosses, and "egress";
    ``backends``: the nodes whose pods may answer it (a Service's backends: the lab, unlike Kubernetes, never
    drops a dead node's endpoints, so a flow the Service sent there is lost while that node is down); ``seen``:
    the source address the server must see on every surviving TCP connection (the egress groups'), or None."""

    name: str
    ns: str
    target: str
    touches: frozenset[str]
    backends: frozenset[str] = frozenset()
    seen: str | None = None


def groups(lab: LabLayout, snapshot_of: SnapshotOf) -> list[Group]:
    """Between the three clusters in a ring (by exported service global IPs: pod CIDRs overlap), and through
    the egress VIP both ways (a bound pod to the outside server; the outside client to the VIP's Service)."""
    ids = [c.id for c in lab.topology.clusters]
    out = []
    for i, src in enumerate(ids):
        dst = ids[(i + 1) % len(ids)]
        gws = tuple(n.name for n in lab.nodes if n.cluster == dst and n.gateway)
        snap = snapshot_of(dst)
        gn = snap.globalnet if snap is not None else Globalnet()
        ip = globalview.cluster_view(dst, gn, gws).service_ip("default", "echo")
        if ip is None:
            raise RuntimeError(f"cluster {dst}: exported service echo has no global IP")
        on = frozenset(n.name for n in lab.nodes if n.cluster == dst)  # echo: the default pod of every node
        out.append(Group(f"{src}>{dst}", f"{lab.name}-{src}-w1-p1", f"{ip}:8080", frozenset({src, dst}), on))
    eg = lab.topology.egressgw
    if eg is not None:
        vip = eg.vips[0]
        cl = lab.cluster(eg.cluster)
        shop = [p for p in lab.pods if p.cluster == eg.cluster and p.kube_namespace == vip.bindings[0].namespace]
        bound = sorted(shop, key=lambda p: lab.node(p.node).gateway)[0]  # a worker's first: it outlives a gateway
        outside = cl.underlay.network_address + 250
        # the bound pod leaves as the VIP; the outside client reaches pay-0 with its own address (client IP kept)
        out.append(Group("egress", bound.namespace, f"{outside}:8080", frozenset({"egress"}), seen=str(vip.vip)))
        pay = frozenset(p.node for p in lab.pods if p.cluster == eg.cluster and "pay" in p.name)  # Service shop/pay
        out.append(Group("ingress", f"{lab.name}-outside", f"{vip.vip}:8081", frozenset({"egress"}), pay,
                         seen=str(outside)))  # fmt: skip
    return out


def _run(group: Group, module: str, *args: str) -> subprocess.Popen[str]:
    argv = ["ip", "netns", "exec", group.ns, sys.executable, "-m", module, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _udp(group: Group, duration: float, flows: int, rate: int, base_port: int, drain: float) -> subprocess.Popen[str]:
    return _run(group, "magw.lab.payload.losswatch", "stream", "--target", group.target, "--flows", str(flows),
                "--rate", str(rate), "--duration", f"{duration:.1f}", "--drain", f"{drain:g}",
                "--base-port", str(base_port))  # fmt: skip


def start(group: Group, duration: float, *, flows: int, rate: int, conns: int,
          base_port: int = BASE_PORT) -> dict[str, subprocess.Popen[str]]:  # fmt: skip
    return {
        "udp": _udp(group, duration, flows, rate, base_port, 2.0),
        "tcp": _run(group, "magw.lab.payload.tcpkeep", "hold", "--target", group.target, "--conns", str(conns),
                    "--duration", f"{duration:.1f}", "--interval", "0.05", "--timeout", "20"),
    }  # fmt: skip


WARM_PORT = 51000  # warm-up flows' first source port: far from BASE_PORT's windows (and --fresh-ports' cycle)


def warm_up(groups: list[Group], bound: float = 60.0, flows: int = 8) -> tuple[float | None, int, list[str]]:
    """Rounds of 2 s of UDP flows on every group, from source ports no window uses, until a round in which no flow
    lost more than half its datagrams: (seconds it took, rounds, []); or, once ``bound`` is spent, (None, rounds,
    the last round's dark flows).

    For an OVN lab: the windows must start on paths that work, and a first round with dark flows is a finding. The
    first flows through a new gateway router used to stay dark there (docs/ovn.md, "A new gateway router's first
    flows"): their requests left the router without its load balancer's SNAT while the router or the userspace
    datapath still resolved a neighbour. The route agent's ARP requests and the lab's tunnel neighbours ended that;
    tests/lab/test_soak.py wants one round."""
    started = time.monotonic()
    dark: list[str] = []
    n = 0
    while time.monotonic() - started <= bound:
        port = WARM_PORT + (n % 20) * flows
        n += 1
        _docs, dark = _udp_round(groups, 2.0, flows, port)
        if not dark:
            return time.monotonic() - started, n, []
    return None, n, dark


def prime(groups: list[Group], flows: int, base_port: int) -> tuple[dict[str, int], list[str]]:
    """One second of UDP flows on every group from the first window's own source ports, so that its flows are not
    new connections when it starts: (datagrams lost per group, flows that lost more than half).

    For an OVN lab: in the lab's userspace datapath, requests of a new connection that reach a gateway router
    together (a burst, or a stream whose first datagrams queued while ovs-vswitchd waited for a CPU) can leave it
    without its load balancer's SNAT; a reply then takes ``ovn_cluster_router``'s ECMP choice of gateway, often
    the other one, and is lost (docs/ovn.md, "Requests that arrive together at a new connection"). That loss
    belongs to no fault; the later windows reuse these 5-tuples while their conntrack entries live."""
    docs, dark = _udp_round(groups, 1.0, flows, base_port)
    return {name: sum(f["lost"] for f in d["udp"].get("flows", [])) for name, d in docs.items()}, dark


def _udp_round(groups: list[Group], seconds: float, flows: int, port: int) -> tuple[dict[str, Any], list[str]]:
    """UDP flows at 20/s on every group at once: (each group's report, the flows that lost more than half and the
    groups whose tool failed)."""
    running = {g.name: {"udp": _udp(g, seconds, flows, 20, port, 1.0)} for g in groups}
    docs = {name: collect(r, 30) for name, r in running.items()}
    dark = [f"{name}:{f['sport']}" for name, d in docs.items() for f in d["udp"].get("flows", [])
            if f["lost"] * 2 > f["sent"]] + [f"{name}: {d['udp']['error']}" for name, d in docs.items()
                                             if "error" in d["udp"]]  # fmt: skip
    return docs, dark


def collect(running: dict[str, subprocess.Popen[str]], timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, proc in running.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()  # by the PID we started
            stdout, stderr = proc.communicate(timeout=30)
        try:
            out[key] = json.loads(stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            out[key] = {"error": f"exit {proc.returncode}: {stderr.strip()[-300:]}"}
    return out


# --- resources -------------------------------------------------------------------------------------------------


def usage(pid: int) -> tuple[float, int] | None:
    """(RSS in MiB, open fds) of ``pid``, or None when it is gone."""
    try:
        rss = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS"))
        return int(rss.split()[1]) / 1024.0, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None


@attrs.define
class Resources:
    """Per daemon (kind, owner): the pid its baseline was taken of, that baseline, and the worst growth seen."""

    rss_bound_mib: float
    fd_bound: int
    base: dict[str, tuple[int, float, int]] = attrs.field(factory=dict)  # key -> (pid, rss, fds)
    worst: dict[str, tuple[float, int]] = attrs.field(factory=dict)

    def sample(self, name: str) -> list[str]:
        """Sample every daemon; a new pid (restarted) re-baselines; returns the bounds broken now."""
        st = state.read(name)
        assert st is not None
        problems = []
        for rec in st.processes:
            if rec.kind not in DAEMONS or not procs.alive(rec):
                continue
            got = usage(rec.pid)
            if got is None:
                continue
            key = f"{rec.kind}/{rec.owner}"
            if key not in self.base or self.base[key][0] != rec.pid:
                self.base[key] = (rec.pid, *got)
                continue
            _pid, rss0, fds0 = self.base[key]
            grow = (got[0] - rss0, got[1] - fds0)
            old = self.worst.get(key, (0.0, 0))
            self.worst[key] = (max(old[0], grow[0]), max(old[1], grow[1]))
            if grow[0] > self.rss_bound_mib or grow[1] > self.fd_bound:
                problems.append(f"{key} pid {rec.pid}: RSS +{grow[0]:.1f} MiB, fds +{grow[1]} since its baseline")
        return problems


# --- Globalnet allocations and statuses ---------------------------------------------------------------------------


def globalnet_problems(snapshot_of: SnapshotOf, clusters: Iterable[str], prefix: str = "soak-") -> list[str]:
    """Per cluster: every allocated global IP held by one object only and inside the cluster's global CIDRs, and
    no status left of an object the soak deleted (``prefix``)."""
    problems = []
    for cid in clusters:
        snap = snapshot_of(cid)
        if snap is None:
            problems.append(f"{cid}: no snapshot")
            continue
        cidrs = next((c.global_cidrs for c in snap.clusters if c.id == cid), ())
        holders: dict[IPv4Address, list[str]] = {}
        for ref, status in snap.globalnet.statuses:
            if ref.name.startswith(prefix):
                problems.append(f"{cid}: leaked status of deleted {ref.kind} {ref.namespace}/{ref.name}")
            for ip in status.allocated_ips:
                holders.setdefault(ip, []).append(f"{ref.kind}/{ref.name}")
                if not any(ip in net for net in cidrs):
                    problems.append(f"{cid}: {ref.kind}/{ref.name} holds {ip} outside {list(map(str, cidrs))}")
        problems += [f"{cid}: {ip} held by {who}" for ip, who in holders.items() if len(who) > 1]
    return problems


def agent_statuses(name: str, nodes: Iterable[str]) -> list[str]:
    """What keeps the route agents' statuses from saying converged with every probed peer up."""
    problems = []
    st = state.read(name)
    assert st is not None
    for node in nodes:
        path = st.dir / "status" / f"route-agent-{node}.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{node}: status unreadable ({type(exc).__name__})")
            continue
        if not doc.get("converged"):
            problems.append(f"{node}: not converged ({doc.get('waiting') or doc.get('counts')})")
        health = doc.get("health") or {}
        down = [p.get("hostname") for p in health.get("peers", []) if p.get("state") != "up"]
        if down or health.get("down"):
            problems.append(f"{node}: peers not up: {down or health.get('down')}")
    return problems
