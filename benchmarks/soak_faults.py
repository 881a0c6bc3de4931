"""The soak's faults: each one injected into a running lab, then healed; and the seeded schedule of them.

A fault is ``inject`` then, ``hold`` seconds later, ``heal``; both return a short text of what was done. What a
fault may disturb is ``touches``: the clusters whose flows may cross the failed part, and ``"egress"`` for the
flows through the egress VIPs (see ``benchmarks/soak.py``, "crossed"). A SIGKILLed daemon is restarted by
``heal`` with the same command line (``magw.lab.build.procs.restart``) unless the lab restarts it itself
(keepalived and conntrackd are the egress agent's children: it starts them again; the heal then only checks).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import yaml

from benchmarks import soak_kube
from magw.lab.build import grow, netns, procs, state
from magw.lab.planes import readiness
from magw.lab.planes.kube import BROKER, BROKER_EMULATOR, CLUSTER_EMULATOR
from magw.lab.scenarios import failure
from magw.lab.spec.layout import LabLayout, layout
from magw.sources.file.endpoint_files import withdraw_endpoint

Action = Callable[[], str]
# The kinds of a file-broker lab and of a kube lab (examples/lab-soak.yaml both): docs/robustness.md, "Soak". A kube
# lab has no broker files; its gateway-remove takes the Node's label away.
FILE_KINDS = ("broker-garbage", "broker-truncate", "gateway-add", "gateway-remove", "globalnet-blip", "kill-conntrackd",
              "kill-egress", "kill-egress-agent", "kill-gateway", "kill-globalnet", "kill-keepalived",
              "kill-route-agent", "power-loss", "underlay-flap", "wan-flap")  # fmt: skip
KUBE_KINDS = ("gateway-add", "gateway-remove", "globalnet-blip", "kill-apiserver", "kill-conntrackd", "kill-egress",
              "kill-egress-agent", "kill-gateway", "kill-globalnet", "kill-keepalived", "kill-route-agent",
              "power-loss", "underlay-flap", "wan-flap", "watch-410", "watch-drop")  # fmt: skip
# An OVN lab (``--cni ovn``) has OVN's own kinds too: its processes SIGKILLed and restarted by the harness
# (magw.lab.build.procs keeps their environment for that); on either control plane. gateway-add there makes the new
# node an OVN node too (magw.lab.planes.ovn_grow).
EGRESS_KINDS = ("kill-conntrackd", "kill-egress", "kill-egress-agent", "kill-keepalived")
OVN_PROCESS_KINDS = ("kill-ovn-controller", "kill-ovn-northd", "kill-ovsdb-nb", "kill-ovsdb-sb")
OVN_KINDS = tuple(sorted({*FILE_KINDS, *OVN_PROCESS_KINDS}))
OVN_KUBE_KINDS = tuple(sorted({*KUBE_KINDS, *OVN_PROCESS_KINDS}))
KINDS = tuple(sorted({*FILE_KINDS, *KUBE_KINDS, *OVN_KINDS}))


def kinds_of(control_plane: str, cni: str = "generic") -> tuple[str, ...]:
    if cni == "ovn":
        return OVN_KUBE_KINDS if control_plane == "kube" else OVN_KINDS
    return KUBE_KINDS if control_plane == "kube" else FILE_KINDS


@attrs.frozen
class Fault:
    kind: str
    target: str
    touches: frozenset[str]  # cluster ids, and "egress" for the VIP flows
    inject: Action
    heal: Action
    hold: float  # seconds between inject and heal
    outage: bool  # the failed part is down until healed (a cluster with one gateway then has no path at all)
    # Seconds the inject itself may take (gateway-add waits until the new node is probed as up): the window's
    # traffic runs that much longer, and the heal comes at lead + hold after the injection began, so the traffic
    # still runs POST seconds after it (benchmarks/soak.py).
    lead: float = 0.0


def _record(name: str, kind: str, owner: str) -> procs.ProcRecord:
    st = state.read(name)
    assert st is not None
    found = [r for r in st.processes if r.kind == kind and r.owner == owner]
    if not found:
        raise RuntimeError(f"no {kind} process of {owner} in lab {name}")
    return found[0]


def _sigkill(rec: procs.ProcRecord) -> None:
    if procs.alive(rec):
        os.kill(rec.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while procs.alive(rec) and time.monotonic() < deadline:
        time.sleep(0.02)


def kill_daemon(name: str, kind: str, owner: str) -> tuple[Action, Action]:
    """SIGKILL the lab's ``kind`` process of ``owner``; heal: restart it (same command, log and build)."""

    def inject() -> str:
        rec = _record(name, kind, owner)
        _sigkill(rec)
        return f"SIGKILL pid {rec.pid}"

    def heal() -> str:
        st = state.read(name)
        assert st is not None
        records = list(st.processes)
        for i, rec in enumerate(records):
            if rec.kind == kind and rec.owner == owner and not procs.alive(rec):
                records[i] = procs.restart(rec)
                state.write(attrs.evolve(st, processes=tuple(records)))
                return f"restarted as pid {records[i].pid}"
        return "was running again"

    return inject, heal


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _child(ns: str, comm: str) -> int | None:
    pids = sorted(pid for pid in netns.namespace_pids(ns) if _comm(pid) == comm)
    return pids[0] if pids else None


def _repair(lab: LabLayout, node: str, comm: str) -> None:
    """Put the node back the way the lab starts it: every ``comm`` of its namespace SIGKILLed, its egress agent
    SIGKILLed and restarted (it starts keepalived and conntrackd again), so the next fault meets a sound lab."""
    ns = lab.node(node).namespace
    for _ in range(10):
        pid = _child(ns, comm)
        if pid is None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    inject, heal = kill_daemon(lab.name, "egress-agent", node)
    inject()
    heal()


def kill_child(lab: LabLayout, node: str, comm: str) -> tuple[Action, Action]:
    """SIGKILL the node's ``comm`` (keepalived or conntrackd, started by its egress agent: the first of that name,
    keepalived's parent); heal: wait (bounded) until the agent has started it again. If it does not, the fault
    is reported and the node repaired (``_repair``)."""
    ns = lab.node(node).namespace
    killed: list[int] = []

    def inject() -> str:
        pid = _child(ns, comm)
        if pid is None:
            raise RuntimeError(f"no {comm} in {ns}")
        os.kill(pid, signal.SIGKILL)  # a process of this lab's namespace, found by the lab's own layout
        killed.append(pid)
        return f"SIGKILL pid {pid}"

    def heal() -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pid = _child(ns, comm)
            if pid is not None and pid not in killed:
                return f"back as pid {pid}"
            time.sleep(0.2)
        left = [pid for pid in netns.namespace_pids(ns) if _comm(pid) == comm]
        _repair(lab, node, comm)
        raise RuntimeError(f"{comm} of {node} not restarted by its egress agent within 30 s (left running: pids "
                           f"{left}; node repaired: {comm} killed, egress agent restarted)")

    return inject, heal


def gateway_remove(name: str, node: str, withdraw: Action, relabel: Action | None = None) -> tuple[Action, Action]:
    """The node stops being a gateway, as when an operator removes its gateway label: its gateway daemon ends and
    its Endpoint is withdrawn (``withdraw``: what ``magw-gateway --withdraw-on-exit`` does on SIGTERM; on a kube
    lab the label goes too, ``soak_kube.unlabel_and_withdraw``); every route agent then plans without it and its
    own route agent plans the node as a worker. Heal: (``relabel``, then) the gateway daemon starts again (same
    command line) and publishes: the node is a gateway again and takes its share of the flows back."""
    kill, restart = kill_daemon(name, "gateway", node)

    def inject() -> str:
        killed = kill()
        withdrawn = withdraw()
        started = time.monotonic()
        st = state.read(name)
        assert st is not None
        lab = layout(name, st.topology)
        still = readiness.probing(st, lab, node)
        while still and time.monotonic() - started < 3.0:
            time.sleep(0.1)
            still = readiness.probing(st, lab, node)
        gone = (f"out of every route agent's peers after {time.monotonic() - started:.1f} s" if not still
                else f"still probed after 3 s by {', '.join(still)}")  # fmt: skip
        return f"gateway daemon {killed}; {withdrawn}; {gone}"

    def heal() -> str:
        back = relabel() if relabel is not None else ""
        return "; ".join(x for x in (back, restart()) if x)

    return inject, heal


# What gateway-add's inject may take: the add and the wait until every peer probes the node as up, 1.3-3.7 s with
# VXLAN cables and 6.1-13.5 s with WireGuard (wireguard-go) in the 30-minute soaks. The seed-31 soak's last window
# judged a flow "did not come back" when the add took 6.1 s and left the traffic about 1 s after the removal: the
# traffic ended inside the removed gateway's failover, not the flow (and adds of 10-13 s healed after it ended).
ADD_LEAD = 25.0


def gateway_add(name: str, cluster: str) -> tuple[Action, Action]:
    """A new gateway node joins ``cluster`` (``magw lab add-gateway``: wired, its Node published, its daemons
    started, and waited for until every worker of its cluster and every remote gateway probes it as up), carries its
    share of the cluster's flows for the hold, then leaves (``remove-gateway``: its daemons stopped, its Endpoint
    withdrawn, its Node deleted, its namespace removed): the flows it carried move back to the others."""
    added: list[str] = []

    def inject() -> str:
        started = time.monotonic()
        node = grow.add_gateway(name, cluster, timeout=60.0)
        added.append(node.name)
        return f"{node.name} added to {cluster}, probed as up everywhere after {time.monotonic() - started:.1f} s"

    def heal() -> str:
        if not added:
            return "nothing was added"
        said: list[str] = []
        grow.remove_gateway(name, added[-1], progress=said.append)
        return f"removed: {'; '.join(said)}"

    return inject, heal


def file_withdraw(broker: Path, cluster: str, node: str) -> Action:
    return lambda: "Endpoint withdrawn" if withdraw_endpoint(broker, cluster, node) else "Endpoint was already gone"


def power(name: str, node: str, *, wan_only: bool = False) -> tuple[Action, Action]:
    return (lambda: "; ".join(failure.fail(name, node, wan_only=wan_only)),
            lambda: "; ".join(failure.recover(name, node)))  # fmt: skip


def link_flap(lab: LabLayout, node: str) -> tuple[Action, Action]:
    """The node's underlay port down, then up (its daemons keep running: a flap inside the cluster)."""
    port = next(p for p in failure.ports(lab, lab.node(node)) if p.what == "underlay")

    def set_(up: bool) -> str:
        subprocess.run(["ip", "-n", port.namespace, "link", "set", port.name, "up" if up else "down"], check=True,
                       timeout=30)  # fmt: skip
        return f"{port.namespace}/{port.name} {'up' if up else 'down'}"

    return (lambda: set_(False)), (lambda: set_(True))


def broker_file(broker: Path, file: str, garbage: bool) -> tuple[Action, Action]:
    """A broker document truncated to nothing, or replaced by bytes that are not YAML; heal: its text back."""
    path = broker / file
    saved: list[str] = []

    def inject() -> str:
        saved.append(path.read_text())
        tmp = path.with_name(f".{path.name}.soak")
        tmp.write_bytes(b"\x00\xff{[: not yaml ]]\n\t-\x7f" if garbage else b"")
        os.replace(tmp, path)
        return f"{file} {'replaced by garbage' if garbage else 'truncated'}"

    def heal() -> str:
        tmp = path.with_name(f".{path.name}.soak")
        tmp.write_text(saved[-1])
        os.replace(tmp, path)
        return f"{file} restored"

    return inject, heal


def globalnet_blip(broker: Path, cluster: str, rng: random.Random) -> tuple[Action, Action]:
    """A GlobalEgressIP created and deleted within milliseconds (a namespace-wide one in ``default``)."""
    name = f"soak-{rng.randrange(10**6)}"
    path = broker / f"k8s@{cluster}@GlobalEgressIP@default@{name}.yaml"
    doc = {"kind": "GlobalEgressIP", "cluster": cluster, "namespace": "default", "name": name, "numberOfIPs": 1}

    def inject() -> str:
        path.write_text(yaml.safe_dump(doc))
        time.sleep(0.005)
        path.unlink()
        return f"GlobalEgressIP default/{name} created and deleted 5 ms later"

    return inject, (lambda: "nothing to heal")


def schedule(lab: LabLayout, broker: Path, rng: random.Random, count: int, only: frozenset[str] = frozenset(),
             control_plane: str = "file", cni: str = "generic") -> list[Fault]:  # fmt: skip
    """``count`` faults drawn from ``rng``: every kind once (in a random order) before any kind repeats; ``only``:
    these kinds alone (ValueError for a kind there is none of on ``control_plane`` and ``cni``: ``kinds_of``)."""
    name = lab.name
    egress = lab.topology.egressgw
    ecl = egress.cluster if egress is not None else ""
    gateways = [n for n in lab.nodes if n.gateway]
    multi = [n for n in gateways if sum(g.cluster == n.cluster for g in gateways) > 1]
    workers = [n for n in lab.nodes if not n.gateway]
    candidates = [f"{ecl}-{c}" for v in egress.vips for c in v.candidates] if egress is not None else []
    kinds: dict[str, Callable[[], Fault]] = {}

    def cl(node: str) -> str:
        return lab.node(node).cluster

    def add(kind: str, build: Callable[[], Fault]) -> None:
        kinds[kind] = build

    def daemon(kind: str, pool: list[str], touches: Callable[[str], frozenset[str]]) -> Callable[[], Fault]:
        def build() -> Fault:
            owner = rng.choice(pool)
            inject, heal = kill_daemon(name, kind, owner)
            return Fault(f"kill-{kind}", owner, touches(owner), inject, heal, hold=2.0, outage=False)
        return build

    none: Callable[[str], frozenset[str]] = lambda _o: frozenset()  # noqa: E731
    # A route agent of a WireGuard gateway runs the node's wireguard-go (a child of its own): its cable may go.
    add("kill-route-agent", daemon("route-agent", [n.name for n in lab.nodes], lambda o: frozenset({cl(o)})))
    # A gateway daemon restarted later than the route agents' --endpoint-ttl (5 s; a loaded machine's Python start
    # takes that long) has its Endpoint expire: its flows move to the cluster's other gateways (docs/robustness.md).
    add("kill-gateway", daemon("gateway", [n.name for n in gateways], lambda o: frozenset({cl(o)})))
    add("kill-globalnet", daemon("globalnet", [c.id for c in lab.topology.clusters], none))
    add("kill-egress", daemon("egress", [ecl], none))
    add("kill-egress-agent", daemon("egress-agent", candidates, lambda _o: frozenset({"egress"})))

    def child(comm: str, touches: frozenset[str]) -> Callable[[], Fault]:
        def build() -> Fault:
            node = rng.choice(candidates)
            inject, heal = kill_child(lab, node, comm)
            return Fault(f"kill-{comm}", node, touches, inject, heal, hold=1.0, outage=False)
        return build

    add("kill-keepalived", child("keepalived", frozenset({"egress"})))
    add("kill-conntrackd", child("conntrackd", frozenset()))

    def power_loss() -> Fault:
        node = rng.choice(multi).name
        inject, heal = power(name, node)
        touched = {cl(node)} | ({"egress"} if node in candidates else set())
        return Fault("power-loss", node, frozenset(touched), inject, heal, hold=6.0, outage=True)

    def remove_gateway() -> Fault:
        node = rng.choice(multi).name
        if control_plane == "kube":
            inject, heal = gateway_remove(name, node, lambda: soak_kube.unlabel_and_withdraw(name, cl(node), node),
                                          lambda: soak_kube.relabel(name, cl(node), node))  # fmt: skip
        else:
            inject, heal = gateway_remove(name, node, file_withdraw(broker, cl(node), node))
        return Fault("gateway-remove", node, frozenset({cl(node)}), inject, heal, hold=4.0, outage=True)

    def add_gateway() -> Fault:
        cid = rng.choice([c.id for c in lab.topology.clusters])
        inject, heal = gateway_add(name, cid)
        return Fault("gateway-add", grow.next_gateway(lab.topology, cid), frozenset({cid}), inject, heal, hold=4.0,
                     outage=True, lead=ADD_LEAD)  # fmt: skip

    def wan_flap() -> Fault:
        node = rng.choice(multi).name
        inject, heal = power(name, node, wan_only=True)
        return Fault("wan-flap", node, frozenset({cl(node)}), inject, heal, hold=2.0, outage=True)

    def cluster_flap() -> Fault:
        node = rng.choice(workers).name
        inject, heal = link_flap(lab, node)
        touched = {cl(node)} | ({"egress"} if cl(node) == ecl else set())
        return Fault("underlay-flap", node, frozenset(touched), inject, heal, hold=1.0, outage=True)

    def broker_bad(garbage: bool) -> Callable[[], Fault]:
        def build() -> Fault:
            files = sorted(p.name for p in broker.glob("node-*.yaml")) + sorted(
                p.name for p in broker.glob("k8s@*@Pod@*.yaml"))
            file = rng.choice(files)
            inject, heal = broker_file(broker, file, garbage)
            kind = "broker-garbage" if garbage else "broker-truncate"
            return Fault(kind, file, frozenset(), inject, heal, hold=3.0, outage=False)
        return build

    def blip() -> Fault:
        cid = rng.choice([c.id for c in lab.topology.clusters])
        inject, heal = globalnet_blip(broker, cid, rng)
        return Fault("globalnet-blip", cid, frozenset(), inject, heal, hold=0.0, outage=False)

    add("power-loss", power_loss)
    add("gateway-remove", remove_gateway)
    add("gateway-add", add_gateway)
    add("wan-flap", wan_flap)
    add("underlay-flap", cluster_flap)
    add("broker-truncate", broker_bad(False))
    add("broker-garbage", broker_bad(True))
    add("globalnet-blip", blip)
    assert tuple(sorted(kinds)) == FILE_KINDS, sorted(kinds)
    if control_plane == "kube":
        kinds = {k: v for k, v in kinds.items() if k in KUBE_KINDS} | kube_kinds(lab, rng)
    if cni == "ovn":
        kinds |= ovn_kinds(lab, rng)
    known = kinds_of(control_plane, cni)
    assert tuple(sorted(kinds)) == known, sorted(kinds)
    unknown = sorted(only - set(kinds))
    if unknown:
        what = f"{control_plane} lab" + (" with --cni ovn" if cni == "ovn" else "")
        raise ValueError(f"fault kinds: {', '.join(unknown)} unknown on a {what}; known: {', '.join(known)}")
    drawn = sorted(only or kinds)
    out: list[Fault] = []
    while len(out) < count:
        order = list(drawn)
        rng.shuffle(order)
        out += [kinds[k]() for k in order[: count - len(out)]]
    return out


def kube_kinds(lab: LabLayout, rng: random.Random) -> dict[str, Callable[[], Fault]]:
    """The kube lab's own kinds (``benchmarks/soak_kube.py``), and its ``globalnet-blip`` through the API. An API
    server's fault touches no flow: every group must lose nothing."""
    servers = [c.id for c in lab.topology.clusters] + [BROKER]

    def apiserver(kind: str, make: Callable[[str], tuple[Action, Action]], hold: float) -> Callable[[], Fault]:
        def build() -> Fault:
            owner = rng.choice(servers)
            inject, heal = make(owner)
            return Fault(kind, owner, frozenset(), inject, heal, hold=hold, outage=False)
        return build

    def blip() -> Fault:
        cid = rng.choice([c.id for c in lab.topology.clusters])
        inject, heal = soak_kube.globalnet_blip(lab.name, cid, rng)
        return Fault("globalnet-blip", cid, frozenset(), inject, heal, hold=0.0, outage=False)

    return {
        "kill-apiserver": apiserver("kill-apiserver", lambda o: soak_kube.kill_apiserver(
            lab.name, o, kill_daemon(lab.name, BROKER_EMULATOR if o == BROKER else CLUSTER_EMULATOR, o)), 3.0),
        "watch-410": apiserver("watch-410", lambda o: soak_kube.signal_apiserver(lab.name, o, signal.SIGUSR1), 0.0),
        "watch-drop": apiserver("watch-drop", lambda o: soak_kube.signal_apiserver(lab.name, o, signal.SIGUSR2), 0.0),
        "globalnet-blip": blip,
    }


def ovn_kinds(lab: LabLayout, rng: random.Random) -> dict[str, Callable[[], Fault]]:
    """An OVN lab's own kinds: SIGKILL of a node's ovn-controller, of a cluster's ovn-northd or one of its
    ovsdb-servers (NB, SB), each restarted by the heal with the same command line and environment. None of them is
    on a packet's path: Open vSwitch keeps forwarding by the flows it holds, and every group must lose nothing.
    (magw's OVN syncer runs in the route agent of the cluster's worker: ``kill-route-agent`` kills it too.)"""
    clusters = [c.id for c in lab.topology.clusters]
    nodes = [n.name for n in lab.nodes]

    def process(kind: str, pool: list[str]) -> Callable[[], Fault]:
        def build() -> Fault:
            owner = rng.choice(pool)
            inject, heal = kill_daemon(lab.name, kind, owner)
            return Fault(f"kill-{kind}", owner, frozenset(), inject, heal, hold=2.0, outage=False)
        return build

    return {
        "kill-ovn-controller": process("ovn-controller", nodes),
        "kill-ovn-northd": process("ovn-northd", clusters),
        "kill-ovsdb-nb": process("ovsdb-nb", clusters),
        "kill-ovsdb-sb": process("ovsdb-sb", clusters),
    }
