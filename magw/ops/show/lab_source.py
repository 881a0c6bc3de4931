"""``magw show --lab NAME`` (and ``magw top``): a lab read the way its daemons and an operator on its nodes would.

- snapshots: the lab's file broker directory, or with ``--control-plane kube`` its API server emulators
  (``magw.lab.observe.kube_view``: the same lists and mapping as the Kubernetes source);
- statuses: each route agent's status file, only while it is current (``magw.lab.observe.status.agent_sync``:
  a dead process's last file says nothing of now);
- kernels: in each chosen node's namespace, ``ip -j nexthop show``, ``ip -j nexthop bucket show``,
  ``ip -s -j link show`` (magw's devices and the WAN link), ``conntrack -C`` (tracked connections) and the
  tracked flows toward remote clusters, each found in the connection tracking of the node at the other end of
  its path (``magw.ops.show.flows``: which path the kernel sent it over);
- versions: every daemon the lab started with the magw build it runs, the kernel and the tools.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from magw import __version__
from magw.lab.build import builds, procs, state
from magw.lab.build.netns import ns_exec, run
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.observe import kube_view
from magw.lab.observe.status import agent_sync, current_status
from magw.lab.planes import egressgw_daemons
from magw.lab.planes.daemons import agent_status
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, NodeLayout, layout
from magw.model import Snapshot
from magw.model.cable import WG_DEVICE
from magw.model.vtep import VX_SUBMARINER, VXLAN_TUNNEL
from magw.ops.show.broker_source import SourceError, broker_snapshots
from magw.ops.show.flows import count_paths, toward, tracked_tuples
from magw.ops.show.inputs import Inputs, NodeKernel
from magw.util.conntrack import Entry, Flow, parse_conntrack

DEVICES = (VXLAN_TUNNEL, VX_SUBMARINER, WG_DEVICE, naming.WAN_IF)
_DAEMON_KINDS = ("route-agent", "gateway", "globalnet", egressgw_daemons.CONTROLLER_KIND, egressgw_daemons.AGENT_KIND)
_COUNTERS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets")


def open_lab(name: str) -> LabState:
    """The lab's state; ``SourceError`` (one line) when there is no such lab or it is not up."""
    try:
        return state.require(name, up=True)
    except state.UnknownLab as exc:
        raise SourceError(f"--lab: {exc}") from None


def lab_snapshots(lab: LabLayout, st: LabState) -> dict[str, Snapshot]:
    if not st.kube:
        return broker_snapshots(st.broker_dir)
    out = {}
    for c in lab.clusters:
        snap = kube_view.cluster_snapshot(st, c.id)
        if snap is not None:
            out[c.id] = snap
    return out


def _started_at(rec: procs.ProcRecord) -> float | None:
    """When ``rec``'s process started, seconds since the epoch."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - rec.start_ticks / os.sysconf("SC_CLK_TCK"))


def lab_statuses(lab: LabLayout, st: LabState) -> dict[str, dict[str, Any]]:
    """Node -> its route agent's status document, when current."""
    out = {}
    for rec in st.processes:
        if rec.kind != "route-agent":
            continue
        doc = agent_status(st, lab.node(rec.owner))
        sync = agent_sync(alive=procs.alive(rec), status=doc, started_at=_started_at(rec))
        current = current_status(sync, doc)
        if current is not None:
            out[rec.owner] = current
    return out


def _json(ns: str, *argv: str) -> list[dict[str, Any]]:
    try:
        out = run(["ip", "-n", ns, "-j", *argv])
    except LabError:
        return []
    doc = json.loads(out) if out.strip() else []
    return [d for d in doc if isinstance(d, dict)] if isinstance(doc, list) else []


def _flows(ns: str) -> int | None:
    try:
        return int(ns_exec(ns, "conntrack", "-C").strip())
    except (LabError, ValueError):
        return None


class Tracked:
    """Every lab node's tracked connections and addresses, each read once (lazily) for one look at the lab."""

    def __init__(self, lab: LabLayout) -> None:
        self._lab = lab
        self._entries: dict[str, list[Entry] | None] = {}
        self._owners: dict[str, NodeLayout] | None = None

    def entries(self, node: NodeLayout) -> list[Entry] | None:
        """The node's ``conntrack -L`` entries; None when it cannot be read."""
        if node.name not in self._entries:
            try:
                self._entries[node.name] = parse_conntrack(ns_exec(node.namespace, "conntrack", "-L"))
            except LabError:
                self._entries[node.name] = None
        return self._entries[node.name]

    def owner(self, address: str) -> NodeLayout | None:
        """The lab node holding IPv4 ``address`` on one of its devices (a path's next hop)."""
        if self._owners is None:
            self._owners = {}
            for n in self._lab.nodes:
                for link in _json(n.namespace, "-4", "addr", "show"):
                    for a in link.get("addr_info") or ():
                        if isinstance(a, dict) and a.get("local") and not str(a["local"]).startswith("127."):
                            self._owners.setdefault(str(a["local"]), n)
        return self._owners.get(address)


def _path_flows(
    node: NodeLayout, remote: Sequence[IPv4Network], nexthops: Sequence[Mapping[str, Any]], tracked: Tracked
) -> tuple[int | None, dict[str, int]]:
    """How many tracked flows toward ``remote`` the node has, and how many of them the next hop of each of its
    nexthops (by gateway address) tracks, that is how many went that way."""
    entries = tracked.entries(node)
    if entries is None:
        return None, {}
    mine = toward(entries, remote)
    hops: dict[str, frozenset[Flow]] = {}
    for address in sorted({str(nh["gateway"]) for nh in nexthops if nh.get("gateway")}):
        owner = tracked.owner(address)
        seen = tracked.entries(owner) if owner is not None and owner.name != node.name else None
        if seen is not None:
            hops[address] = tracked_tuples(seen)
    return len(mine), count_paths((e.leaving for e in mine), hops)


def node_kernel(node: NodeLayout, remote: Sequence[IPv4Network], tracked: Tracked | None) -> NodeKernel:
    """What the node's kernel holds for shares, rates and flows (empty parts when a read fails); ``remote``: the
    remote clusters' CIDRs, whose flows are counted per path when ``tracked`` (the lab's connection tracking)."""
    namespace = node.namespace
    nexthops = tuple(_json(namespace, "nexthop", "show"))
    looked, path_flows = _path_flows(node, remote, nexthops, tracked) if tracked is not None else (None, {})
    links = {}
    for link in _json(namespace, "-s", "link", "show"):
        if link.get("ifname") in DEVICES:
            stats = link.get("stats64") or {}
            rx, tx = stats.get("rx") or {}, stats.get("tx") or {}
            links[str(link["ifname"])] = {
                "rx_bytes": int(rx.get("bytes", 0)),
                "tx_bytes": int(tx.get("bytes", 0)),
                "rx_packets": int(rx.get("packets", 0)),
                "tx_packets": int(tx.get("packets", 0)),
            }
    return NodeKernel(
        nexthops=nexthops,
        buckets=tuple(_json(namespace, "nexthop", "bucket", "show")),
        links=links,
        flows=_flows(namespace) if tracked is not None else None,
        tracked=looked,
        path_flows=path_flows,
    )


def _tool(argv: list[str]) -> str:
    try:
        return " ".join(run(argv).split()[:6]) or "?"
    except LabError as exc:
        return f"not found ({exc})"


def lab_versions(st: LabState) -> tuple[dict[str, str], ...]:
    rows = [{"component": "magw show", "where": "here", "version": f"{__version__} ({builds.describe('')})"}]
    for rec in st.processes:
        if rec.kind in _DAEMON_KINDS:
            live = "" if procs.alive(rec) else ", DEAD"
            rows.append({"component": rec.kind, "where": rec.owner, "version": f"{builds.describe(rec.build)}{live}"})
    rows += [
        {"component": "kernel", "where": "host", "version": platform.release()},
        {"component": "iproute2", "where": "host", "version": _tool(["ip", "-V"])},
        {"component": "nft", "where": "host", "version": _tool(["nft", "--version"])},
    ]
    return tuple(rows)


def _remote_cidrs(snapshots: Mapping[str, Snapshot], cluster: str) -> list[IPv4Network]:
    snap = snapshots.get(cluster)
    return [] if snap is None else [n for c in snap.remote_clusters for n in (*c.pod_cidrs, *c.service_cidrs)]


def read_lab(
    name: str, *, kernel_nodes: Iterable[str] | None = None, flows: bool = True, versions: bool = True
) -> Inputs:
    """The lab ``name``'s inputs; kernels of ``kernel_nodes`` (default: every gateway), with their tracked flows
    when ``flows``; the versions when ``versions`` (a few commands: ``top`` reads without)."""
    st = open_lab(name)
    lab = layout(st.name, st.topology)
    wanted = set(kernel_nodes) if kernel_nodes is not None else {g.name for g in lab.gateways}
    unknown = sorted(wanted - {n.name for n in lab.nodes})
    if unknown:
        raise SourceError(f"--node: lab {name!r} has no node {', '.join(unknown)} "
                          f"(nodes: {', '.join(n.name for n in lab.nodes)})")  # fmt: skip
    at = time.monotonic()
    snapshots = lab_snapshots(lab, st)
    tracked = Tracked(lab) if flows else None
    kernels = {n.name: node_kernel(n, _remote_cidrs(snapshots, n.cluster), tracked) for n in lab.nodes
               if n.name in wanted}  # fmt: skip
    plane = "Kubernetes API emulators" if st.kube else f"file broker {st.broker_dir}"
    return Inputs(
        source=f"lab {name} ({plane})",
        snapshots=snapshots,
        statuses=lab_statuses(lab, st),
        kernels=kernels,
        versions=lab_versions(st) if versions else (),
        at=at,
    )
