"""The soak's drop counters: where did a group that did not cross the fault lose its datagrams?

A group that did not cross a fault must lose nothing; when it does anyway (rarely, and not again when run alone), the
kept logs say what the daemons did but not where the packets died. So every window reads, before its traffic and
after it, each node's kernel counters of dropped or unroutable packets (``/proc/net/snmp`` in the node's namespace:
IP ``InDiscards``, ``OutNoRoutes``, ``OutDiscards``, ``InHdrErrors``, ``InAddrErrors``; UDP
``NoPorts``, ``InErrors``, ``RcvbufErrors``; ICMP ``OutDestUnreachs``) and, on an OVN lab, its ``ovs-vswitchd``'s drop
coverage counters (``ovs-appctl coverage/show``: ``datapath_drop_*``, ``drop_action_*``, and any ``*drop*``). A
violated row names the counters that moved on the nodes of the clusters the group passes through.

The counters move during every fault (a crossed group's packets die somewhere too), so they are evidence to read
with the row, not a verdict. They are read with ``cat`` and ``ovs-appctl``, not with magw's code.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from magw.lab.build.state import LabState
from magw.lab.planes.ovn_nodes import ovs_dir
from magw.lab.spec.layout import LabLayout

Counters = dict[str, int]

KERNEL = {
    "Ip": ("InDiscards", "OutNoRoutes", "OutDiscards", "InHdrErrors", "InAddrErrors"),
    "Udp": ("NoPorts", "InErrors", "RcvbufErrors"),
    "Icmp": ("OutDestUnreachs",),
}
OVS_DROP = re.compile(r"^(\S*drop\S*)\s.*total:\s*(\d+)\s*$")


def parse_snmp(text: str) -> Counters:
    """The ``KERNEL`` counters of a ``/proc/net/snmp`` text (a header line and a value line per protocol)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    out: Counters = {}
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        proto = names[0].rstrip(":")
        if proto not in KERNEL or values[0] != names[0] or len(names) != len(values):
            continue
        fields = dict(zip(names[1:], values[1:], strict=True))
        out.update({f"{proto}.{k}": int(fields[k]) for k in KERNEL[proto] if k in fields})
    return out


def parse_coverage(text: str) -> Counters:
    """The drop counters of an ``ovs-appctl coverage/show`` text, as ``ovs.NAME``."""
    return {f"ovs.{m.group(1)}": int(m.group(2)) for line in text.splitlines() if (m := OVS_DROP.match(line.strip()))}


def read_node(namespace: str, vswitchd_ctl: Path | None) -> Counters:
    """One node's counters now (bounded; a read that fails leaves its counters out)."""
    out: Counters = {}
    try:
        snmp = subprocess.run(["ip", "netns", "exec", namespace, "cat", "/proc/net/snmp"], capture_output=True,
                              text=True, timeout=10, check=False)  # fmt: skip
        out.update(parse_snmp(snmp.stdout))
        if vswitchd_ctl is not None and vswitchd_ctl.exists():
            cov = subprocess.run(["ovs-appctl", "-t", str(vswitchd_ctl), "coverage/show"], capture_output=True,
                                 text=True, timeout=10, check=False)  # fmt: skip
            out.update(parse_coverage(cov.stdout))
    except subprocess.TimeoutExpired:
        pass
    return out


def lab_nodes(lab: LabLayout, st: LabState | None) -> dict[str, tuple[str, Path | None]]:
    """Every node of ``lab``: its namespace and, on an OVN lab, its ``ovs-vswitchd``'s control socket."""
    ovn = st is not None and st.ovn
    return {n.name: (n.namespace, ovs_dir(st, n) / "vswitchd.ctl" if ovn and st is not None else None)
            for n in lab.nodes}  # fmt: skip


def read_all(nodes: Mapping[str, tuple[str, Path | None]]) -> dict[str, Counters]:
    """``node -> counters`` for ``nodes``: node -> (namespace, its vswitchd's control socket or None)."""
    return {node: read_node(ns, ctl) for node, (ns, ctl) in sorted(nodes.items())}


def moved(before: Mapping[str, Counters], after: Mapping[str, Counters], nodes: Iterable[str]) -> list[str]:
    """``node: counter +n, ...`` for each of ``nodes`` whose counters grew (a counter new since ``before`` counts from
    0: OVS lists a coverage counter only once it is non-zero). A node not read both times is left out."""
    out = []
    for node in sorted(nodes):
        was, now = before.get(node, {}), after.get(node, {})
        if not was or not now:
            continue
        grew = [f"{k} +{v - was.get(k, 0)}" for k, v in sorted(now.items()) if v > was.get(k, 0)]
        if grew:
            out.append(f"{node}: {', '.join(grew)}")
    return out
