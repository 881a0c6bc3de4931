"""``magw lab fail`` and ``magw lab recover``: a gateway loses power (or only its WAN link), then comes back.

Power loss: the node's ports on its cluster's underlay bridge and on the WAN
bridge go down (the cables are pulled: nothing reaches the node, nothing
leaves it) and its daemons are killed with SIGKILL (no clean shutdown, no
withdrawn Endpoint, no emptied lease). The ports are the bridge-side ends of
the veths, so the node keeps its own routes (setting the node's own end down
would make its kernel flush the routes that use it).

``--wan-only``: only the WAN port goes down; the daemons keep running, so the
gateway still answers its workers' "alive" probes but loses every remote
cluster (docs/health.md: reach).

Recovery sets the ports up and restarts the node's killed daemons with the
same command lines and logs; their new PIDs go into the state file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import structlog

from magw.lab.build import netns, procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, NodeLayout, layout

log = structlog.get_logger(__name__)

DAEMON_KINDS = ("route-agent", "gateway", "egress-agent")
CutListener = Callable[[str, float], None]  # (the port's what: underlay, encap, wan; wall-clock time it was down)
KILL_WAIT = 2.0


@attrs.frozen(kw_only=True)
class Port:
    """A bridge port that connects a node: in namespace ``namespace``, named ``name``."""

    namespace: str
    name: str
    what: str  # "underlay", "encap" (--cni ovn: OVN's tunnel leg) or "wan"


def node_of(lab: LabLayout, name: str, verb: str) -> NodeLayout:
    try:
        return lab.node(name)
    except KeyError:
        known = ", ".join(n.name for n in lab.nodes)
        raise LabInputError(f"{verb}: NODE: {name!r} is not a node of lab {lab.name} (nodes: {known})") from None


def ports(lab: LabLayout, node: NodeLayout, *, ovn: bool = False) -> tuple[Port, ...]:
    """The node's underlay port, with ``ovn`` its OVN tunnel leg's (``naming.encap_port``), and, for a gateway,
    its WAN port. On an OVN node the Open vSwitch and ovn-controller keep running: with every link down the
    node is as dead to the others as without power, and its taps keep their addresses for the recovery."""
    underlay_ns = lab.cluster(node.cluster).underlay_ns
    out = [Port(namespace=underlay_ns, name=naming.underlay_port(node.short), what="underlay")]
    if ovn:
        out.append(Port(namespace=underlay_ns, name=naming.encap_port(node.short), what="encap"))
    if node.wan_ip is not None:
        out.append(Port(namespace=lab.wan_ns, name=naming.wan_port(node.cluster, node.short), what="wan"))
    return tuple(out)


def _set(port: Port, up: bool) -> None:
    netns.run(["ip", "-n", port.namespace, "link", "set", port.name, "up" if up else "down"])


def _cut(cut: list[Port], on_cut: CutListener | None = None) -> None:
    """Every port down, one ``ip -batch`` per namespace: an OVN node's tunnel leg goes with its underlay port, so
    the probes and OVN's geneve lose the node at the same moment (one by one, ``ip`` runs tens of ms apart here).
    ``on_cut(what, at)``: after each batch, the ports' ``what`` and the wall-clock time they were down by."""
    by_ns: dict[str, list[Port]] = {}
    for port in cut:
        by_ns.setdefault(port.namespace, []).append(port)
    for ns, group in by_ns.items():
        netns.ip_batch(ns, [f"link set {p.name} down" for p in group])
        if on_cut is not None:
            at = time.time()
            for p in group:
                on_cut(p.what, at)


def port_down(port: Port) -> bool:
    """True when the port is administratively down (``ip -j link``)."""
    out = netns.run(["ip", "-n", port.namespace, "-j", "link", "show", "dev", port.name])
    links = json.loads(out) if out.strip() else []
    return bool(links) and "UP" not in links[0].get("flags", [])


def failed_ports(lab: LabLayout, *, ovn: bool = False) -> dict[str, list[str]]:
    """Node -> the kinds of its ports that are down ("underlay", "encap" with ``ovn``, "wan"), for nodes with any."""
    out: dict[str, list[str]] = {}
    for node in lab.nodes:
        down = [p.what for p in ports(lab, node, ovn=ovn) if netns.exists(p.namespace) and port_down(p)]
        if down:
            out[node.name] = down
    return out


def _kill(records: list[procs.ProcRecord]) -> list[int]:
    killed = []
    for rec in records:
        if procs.alive(rec):
            try:
                os.kill(rec.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(rec.pid)
    deadline = time.monotonic() + KILL_WAIT
    while any(procs.alive(r) for r in records) and time.monotonic() < deadline:
        time.sleep(0.02)
    return killed


def _children_in(ns: str, parents: set[int]) -> list[tuple[int, int]]:
    """(pid, start ticks) of the processes in ``ns`` descended from ``parents`` (keepalived forks its VRRP child
    under its own parent), read before the kill: once a parent dies its children belong to init."""
    parent_of: dict[int, tuple[int, int]] = {}
    for pid in netns.namespace_pids(ns):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        ticks = procs.start_ticks(pid)
        if ticks is not None:
            parent_of[pid] = (int(stat[stat.rindex(")") + 2 :].split()[1]), ticks)
    family = set(parents)
    for _ in range(len(parent_of)):  # bounded: each round adds at least one descendant or stops
        more = {pid for pid, (ppid, _t) in parent_of.items() if ppid in family and pid not in family}
        if not more:
            break
        family |= more
    return [(pid, ticks) for pid, (_p, ticks) in parent_of.items() if pid in family - parents]


def _read(name: str) -> tuple[LabState, LabLayout]:
    st = state.read(name)
    if st is None:
        raise LabError(f"no lab named {name!r}")
    if not st.daemons:
        raise LabError(f"lab {name!r} runs without daemons: nothing to fail over")
    return st, layout(name, st.topology)


def fail(name: str, node_name: str, *, wan_only: bool = False, on_cut: CutListener | None = None) -> tuple[str, ...]:
    """Cut ``node_name`` off (and SIGKILL its daemons unless ``wan_only``); returns what was done, in words.
    ``on_cut``: told when each link went down (``_cut``): a benchmark's zero for what follows."""
    st, lab = _read(name)
    node = node_of(lab, node_name, "fail")
    cut = [p for p in ports(lab, node, ovn=st.ovn) if p.what == "wan" or not wan_only]
    if wan_only and not cut:
        why = "is a worker" if not node.gateway else "is behind its cluster's cloud (--load-balancer)"
        raise LabInputError(f"fail: NODE: {node_name!r} {why}: it has no WAN link")
    _cut(cut, on_cut)
    done = [f"{p.what} link down" for p in cut]
    if not wan_only:
        records = [r for r in st.processes if r.owner == node.name and r.kind in DAEMON_KINDS]
        children = _children_in(node.namespace, {r.pid for r in records if procs.alive(r)})
        killed = _kill(records)
        for pid, ticks in children:  # keepalived and conntrackd of the egress agent die with the node too
            if procs.is_alive(pid, ticks):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        done.append(f"{len(killed)} daemons killed (SIGKILL)")
    log.info("lab.node_failed", lab=name, node=node.name, wan_only=wan_only, done=", ".join(done))
    return tuple(done)


def recover(name: str, node_name: str) -> tuple[str, ...]:
    """Links up and the node's dead daemons restarted; returns what was done, in words."""
    st, lab = _read(name)
    node = node_of(lab, node_name, "recover")
    done = []
    for port in ports(lab, node, ovn=st.ovn):
        if port_down(port):
            _set(port, up=True)
            done.append(f"{port.what} link up")
    records = list(st.processes)
    restarted = 0
    for i, rec in enumerate(records):
        if rec.owner == node.name and rec.kind in DAEMON_KINDS and not procs.alive(rec):
            records[i] = procs.restart(rec)  # same command, log and build
            restarted += 1
    if restarted:
        state.write(attrs.evolve(st, processes=tuple(records)))
        done.append(f"{restarted} daemons restarted")
    log.info("lab.node_recovered", lab=name, node=node.name, done=", ".join(done) or "nothing to do")
    return tuple(done)
