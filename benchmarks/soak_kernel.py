"""The soak's convergence check: each lab node's kernel, read back independently, against ``magw plan``.

The plan: the node's cluster as its control plane gives it (``benchmarks/soak_view.py``: the file broker's
directory or the cluster's API server, assembled exactly as the route agent's source does), written as a snapshot
file and given to ``magw plan --format json`` as a user runs it (the command's JSON, not the planner's objects).
The kernel: ``tests.support.kernel_dump.read`` (``ip -json -d``, ``bridge -json``, ``nft -j``), never magw's
drivers.

What the lab itself made on a node is foreign and left out of the comparison, by what it is, not by asking magw:
links that are not VXLAN (``lo``, ``eth0``, ``cni0``, pod veths, ``wan0``, and the WireGuard cable's ``magw-wg``,
whose device is compared with the plan's ``cable`` separately: it exists and is up), routes and rules of another
protocol than magw's (157) and kernel routes, and the nft tables the lab or other daemons own (``lab-*``, the
gateway daemon's ``magw_health`` liveness set, the lab's flow counters). Everything else must be exactly the plan:
a missing object is "not converged", an extra one is a leak, a duplicated one is a leak.

The plan holds only when every gateway is healthy (the route agents plan around a gateway their probes call
down): the soak compares after a fault has been healed and the agents' statuses say every peer is up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.soak_view import SnapshotOf
from magw.lab.kubelet import proxy
from magw.snapshot.load import dump_snapshot
from tests.support.kernel_dump import Baseline, Dump, differences, ours, planned, read

MAGW_PROTO = "157"
FOREIGN_TABLES = ("lab-kube", proxy.TABLE, "lab-cni", "lab-ovnk", "magw_health", "magw_lab_flows")
BIN = Path(sys.executable).parent
PLAN_FLAGS = ("--ovn-mgmt-nexthop",)


def _proto(obj: dict[str, Any]) -> str:
    return str(obj.get("protocol", ""))


def lab_baseline(dump: Dump, apart: frozenset[str] = frozenset()) -> Baseline:
    """The lab's own objects on a node (see the module's docstring), as a ``Baseline`` of the independent reader;
    ``apart``: links compared on their own (the egress datapath's external VXLAN device)."""
    links = {link["ifname"] for link in dump.links if link.get("linkinfo", {}).get("info_kind") != "vxlan"} | apart
    routes = [r for r in dump.routes if _proto(r) != MAGW_PROTO]
    rules = [r for r in dump.rules if _proto(r) != MAGW_PROTO]
    tables = {(o["table"]["family"], o["table"]["name"]) for o in dump.nft if "table" in o}
    lab_tables = {t for t in tables if t[1] in FOREIGN_TABLES}
    base = Baseline.of(attrs_dump(dump, routes=routes, rules=rules))
    return Baseline(
        links=frozenset(links),
        nexthops=frozenset(),
        routes=base.routes,
        rules=base.rules,
        nft_tables=frozenset(lab_tables),
    )


def attrs_dump(dump: Dump, **changes: Any) -> Dump:
    fields = {k: getattr(dump, k) for k in ("links", "addrs", "neighbors", "fdb", "nexthops", "routes", "rules", "nft")}
    fields.update(changes)
    return Dump(**fields)


def plan_json(snapshot_of: SnapshotOf, cluster: str, node: str, flags: list[str] | None = None) -> dict[str, Any]:
    """``magw plan --format json`` of ``node`` from its cluster's snapshot as the lab's daemons read it now
    (``flags``: more of its flags, ``plan_flags``)."""
    snap = snapshot_of(cluster)
    if snap is None:
        raise RuntimeError(f"cluster {cluster}: no snapshot (incomplete, or its control plane does not answer)")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="magw-soak-") as f:
        f.write(dump_snapshot(snap))
        f.flush()
        done = subprocess.run(
            [str(BIN / "magw"), "plan", "--snapshot", f.name, "--node", node, "--format", "json",
             *(flags or [])],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"magw plan --node {node} failed: {done.stderr.strip()[-300:]}")
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def plan_flags(argv: tuple[str, ...] | list[str]) -> list[str]:
    """The route agent's flags that ``magw plan`` takes too, from its command line: the plan is then the one the agent
    applies (``--ovn-mgmt-nexthop``: on an OVN node, table 150's next hop)."""
    out: list[str] = []
    for i, arg in enumerate(argv[:-1]):
        if arg in PLAN_FLAGS:
            out += [arg, argv[i + 1]]
    return out


def foreign_device_addresses(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's addresses on devices it does not create as links: an OVN gateway's ``ovn-k8s-sub0``, an Open
    vSwitch internal port the route agent makes through OVS. The reader leaves such devices to the lab (they are not
    VXLAN), so their addresses are compared apart."""
    links = {str(link["name"]) for link in plan["links"]}
    return [a for a in plan.get("addresses", []) if a["dev"] not in links]


def external_links(plan: dict[str, Any]) -> frozenset[str]:
    """The plan's external (metadata-mode) VXLAN devices, whose fields the reader's link shape does not hold."""
    return frozenset(str(link["name"]) for link in plan["links"] if link.get("external"))


def wanted(plan: dict[str, Any]) -> dict[str, list[str]]:
    """The plan in the reader's canonical form, without what is on the external devices (checked apart); the
    extra nft tables (the egress datapath's) count as nft too."""
    apart = external_links(plan)
    on = ("links", "addresses", "neighbors", "fdb")
    plan = {k: ([o for o in v if o.get("dev", o.get("name")) not in apart] if k in on else v) for k, v in plan.items()}
    foreign = foreign_device_addresses(plan)
    plan["addresses"] = [a for a in plan["addresses"] if a not in foreign]
    plan["routes"] = [r for r in plan["routes"] if "encap" not in r]
    plan["rules"] = [{k: v for k, v in r.items() if k not in ("fwmark", "fwmask")} for r in plan["rules"]]
    want = planned(plan)
    extra = [o for doc in plan.get("extra_nft") or [] for o in doc.get("nftables", [])]
    if extra:
        want["nft"] = sorted(want["nft"] + planned({**plan, "nft": {"nftables": extra}})["nft"])
    return want


def _encap_and_marks(ns: str, dump: Dump, plan: dict[str, Any]) -> tuple[Dump, list[str]]:
    """What the reader's shapes do not hold, compared here from the raw JSON: the plan's lightweight-tunnel routes
    (``ip -json`` prints the route's and the encap's ``dst`` under one key, so the reader cannot tell them apart:
    such a table is read with ``ip route show`` text) and its rules' fwmark/fwmask. Returns the dump without those
    tables' routes, and the problems found."""
    lines: list[str] = []
    tables = {int(r["table"]) for r in plan["routes"] if "encap" in r}
    for table in sorted(tables):
        text = subprocess.run(["ip", "-n", ns, "-4", "route", "show", "table", str(table)], capture_output=True,
                              text=True, timeout=60).stdout.split("\n")  # fmt: skip
        text = [" ".join(line.split()) for line in text if line.strip()]
        for r in (r for r in plan["routes"] if "encap" in r and int(r["table"]) == table):
            dst = "default" if r["dst"] == "0.0.0.0/0" else r["dst"].removesuffix("/32")
            enc = r["encap"]
            head = f"{dst} encap {enc['type']} id {enc['id']} "
            tail = (f"dst {enc['dst']} ", f"dev {r['nexthops'][0]['dev']} ")
            hit = [t for t in text if t.startswith(head) and all(x in t for x in tail)]
            if len(hit) != 1:
                lines.append(f"routes: table {table} encap route {dst} id {enc['id']}: {len(hit)} in the kernel")
        planned_here = sum(1 for r in plan["routes"] if int(r["table"]) == table)
        if len(text) != planned_here:
            lines.append(f"routes: table {table} holds {len(text)} routes, the plan {planned_here}: {text[:3]}")
    for rule in (r for r in plan["rules"] if "fwmark" in r):
        kern = [r for r in dump.rules if r.get("priority") == rule["priority"]]
        if len(kern) != 1 or int(str(kern[0].get("fwmark", "0")), 16) != rule["fwmark"] \
                or int(str(kern[0].get("fwmask", "0xffffffff")), 16) != rule["fwmask"]:  # fmt: skip
            mark = f"{rule['fwmark']:#x}/{rule['fwmask']:#x}"
            lines.append(f"rules: priority {rule['priority']} fwmark {mark}: kernel {kern}")
    routes = [r for r in dump.routes if not (r.get("table") is not None and str(r["table"]).isdigit()
                                             and int(r["table"]) in tables)]  # fmt: skip
    return attrs_dump(dump, routes=routes), lines


def node_problems(ns: str, plan: dict[str, Any]) -> list[str]:
    """What differs between the kernel of ``ns`` and ``plan``: missing, extra (leaked) or duplicated objects."""
    dump, lines = _encap_and_marks(ns, read(ns), plan)
    apart = external_links(plan)
    got = ours(dump, lab_baseline(dump, apart))
    lines += differences(wanted(plan), got)
    for name in sorted(apart):
        dev = [link for link in dump.links if link["ifname"] == name]
        data = dev[0].get("linkinfo", {}).get("info_data", {}) if dev else {}
        if not dev or "UP" not in dev[0].get("flags", []) or not data.get("external"):
            lines.append(f"links: external VXLAN device {name} missing, down or not external")
    for a in foreign_device_addresses(plan):
        held = [f"{i['local']}/{i['prefixlen']}" for d in dump.addrs if d["ifname"] == a["dev"]
                for i in d.get("addr_info", [])]  # fmt: skip
        if a["address"] not in held:
            lines.append(f"addresses: {a['address']} missing on {a['dev']} (it holds {held})")
    cable = plan.get("cable")
    if cable:
        dev = [link for link in dump.links if link["ifname"] == cable["name"]]
        if not dev:
            lines.append(f"cable: device {cable['name']} missing")
        elif "UP" not in dev[0].get("flags", []):
            lines.append(f"cable: device {cable['name']} not up")
    return lines


def conntrack_evidence(namespaces: dict[str, str], sports: list[int], limit: int = 12) -> list[str]:
    """``node: entry`` for each UDP conntrack entry (``conntrack -L``, not our reader) of the given source ports in
    each node's namespace (``namespaces``: node -> namespace): where a flow that did not come back left state, read
    right after the window's traffic ends (UDP entries live 30-120 s), so a run that fails says why."""
    wanted = [f"sport={p} " for p in sports] + [f"dport={p} " for p in sports]
    out: list[str] = []
    for node, ns in sorted(namespaces.items()):
        done = subprocess.run(["ip", "netns", "exec", ns, "conntrack", "-L", "-p", "udp"], capture_output=True,
                              text=True, timeout=30, check=False)  # fmt: skip
        out += [f"{node}: {' '.join(line.split())}" for line in done.stdout.splitlines()
                if any(w in line for w in wanted)]  # fmt: skip
    return out[:limit]
