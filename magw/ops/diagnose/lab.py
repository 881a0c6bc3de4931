"""``magw diagnose --lab NAME [--node N]``: the checks on every node (or the named ones) of a lab.

Each node's role and the lab's cable come from the lab's plan; stale namespaces (the lab's prefix, no node or
pod of the plan) are a report of their own, ``lab NAME``. The lab's nodes share this host's kernel and so its
clock: the clock check says so and measures only against ``--clock-url`` when given.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from magw.lab.build import state
from magw.lab.spec import naming
from magw.lab.spec.layout import layout
from magw.ops.diagnose.cni import StaleReadings, stale_checks
from magw.ops.diagnose.node import NodeContext, diagnose_node
from magw.ops.diagnose.verdict import NodeReport, passed
from magw.ops.show.lab_source import lab_statuses


class LabNotFound(ValueError):
    """No such lab, or it is not up (one line)."""


def _netns_names() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=20, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def diagnose_lab(name: str, nodes: Sequence[str], topics: Sequence[str], clock_urls: Sequence[str] = ()
                 ) -> list[NodeReport]:
    try:
        st = state.require(name, up=True)
    except state.UnknownLab as exc:
        raise LabNotFound(f"--lab: {exc}") from None
    lab = layout(st.name, st.topology)
    unknown = sorted(set(nodes) - {n.name for n in lab.nodes})
    if unknown:
        raise LabNotFound(f"--node: lab {name!r} has no node {', '.join(unknown)} "
                          f"(nodes: {', '.join(n.name for n in lab.nodes)})")
    statuses = lab_statuses(lab, st)  # only a running agent's own file: a dead one's says nothing of now
    reports = []
    for n in lab.nodes:
        if nodes and n.name not in nodes:
            continue
        ctx = NodeContext(name=n.name, netns=n.namespace, gateway=n.gateway, cable=st.topology.cable.value,
                          clock_urls=tuple(clock_urls), agent_status=statuses.get(n.name),
                          wan_peers=tuple(str(g.public_ip) for g in lab.gateways
                                          if g.cluster != n.cluster and g.public_ip is not None))
        report = diagnose_node(ctx, [t for t in topics if t != "clock" or clock_urls])
        if "clock" in topics and not clock_urls:
            note = passed("clock", "skew", "lab nodes share this host's kernel and clock (one clock, no skew); "
                          "--clock-url URL compares with a server")
            report = NodeReport(node=report.node, netns=report.netns, checks=(*report.checks, note))
        reports.append(report)
    if "stale" in topics and not nodes:
        known = set(lab.namespaces) | set(st.namespaces)
        prefix = naming.ns_prefix(name)
        # another lab whose name starts with ours and a dash ("east" and "east-2") shares our prefix: its
        # namespaces are its own, not stray ones of ours
        others = tuple(naming.ns_prefix(n) for n in state.list_labs() if n != name and n.startswith(prefix))
        foreign = tuple(sorted(ns for ns in _netns_names()
                               if ns.startswith(prefix) and ns not in known and not ns.startswith(others)))  # fmt: skip
        checks = stale_checks(StaleReadings(gateway=None, links=set(), nft_tables=set(), gateway_routes=0,
                                            dangling_devices=set(), foreign_namespaces=foreign), "", None)
        reports.append(NodeReport(node=f"lab {name}", netns=None, checks=tuple(checks)))
    return reports
