"""Turning each of the seed's four OVN+Globalnet fixes off in a running lab, and reading whether it is off
(tests/lab/test_lab_ovn_globalnet.py, docs/ovn-globalnet.md).

Each "off" removes or replaces exactly what the fix put there, with the tools an operator would use (``ip``,
``nft``, ``ovn-nbctl``), never through magw. magw's reconcilers repair such drift at their next full resync (the
route agents and the OVN syncer every 30 s), so every "off" is idempotent (it may be redone after a repair) and
comes with a "still off" check: a probe counts only when the fix was still off after it (``while_off``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from magw.lab.planes.ovn_servers import OvnDir
from magw.lab.planes.ovn_topology import nbctl
from tests.support import netns as checker

T = TypeVar("T")
OFF_ATTEMPTS = 3  # a repair lands in a probe's window rarely (the probe takes ~1 s of a 30 s resync period)
UP_IP = "169.254.254.9"  # submariner_up_lrp, table 149's next hop (docs/ovn.md)
CLUSTER_PORT_IP = "169.254.254.2"  # ovn_cluster_subm_lrp, where submariner_router sends traffic into the cluster
GN_SNAT = "magw globalnet:"  # the comments of magw's Globalnet rules
MOVED_CHAIN = "gn-egress"  # 1981 off: the Globalnet SNAT rules in a chain nothing jumps to


def while_off(what: str, turn_off: Callable[[], None], still_off: Callable[[], bool], observe: Callable[[], T]) -> T:
    """Turn a fix off and ``observe`` at once; the observation counts only if the fix was still off after it
    (a reconciler's repair may land in between: then turn it off again, at most OFF_ATTEMPTS times)."""
    for _ in range(OFF_ATTEMPTS):
        turn_off()
        if not still_off():
            continue
        seen = observe()
        if still_off():
            return seen
    pytest.fail(f"{what}: magw repaired it during each of {OFF_ATTEMPTS} observations")


# ---- kernel routes (1982: table 150 on workers; 1983: table 149 on gateways) -----------------------------


def table_routes(ns: str, table: int) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = checker.ip_json(ns, "route", "show", "table", str(table))
    return routes


def replace_args(route: dict[str, Any], table: int) -> list[str]:
    """``ip route replace`` arguments that put ``route`` (from ``ip -j route show``) back exactly."""
    args = [route["dst"], "via", route["gateway"], "dev", route["dev"]]
    if "prefsrc" in route:
        args += ["src", route["prefsrc"]]
    return [*args, "table", str(table), "metric", str(route.get("metric", 0)), "proto", str(route["protocol"])]


def ip(ns: str, *args: str, check: bool = True) -> None:
    checker.run(ns, "ip", *args, check=check)


# ---- nft (1981: the Globalnet SNAT in magw's postrouting base chain) ------------------------------------


def _nft(ns: str, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", *args], input=stdin, capture_output=True, text=True,
                         timeout=30, check=True)  # fmt: skip
    return out.stdout


def globalnet_snat_rules(ns: str, chain: str = "postrouting") -> list[tuple[str, str]]:
    """(rule text, handle) of magw's Globalnet SNAT rules in ``chain`` of ``ip magw`` ([] if no such chain)."""
    try:
        text = _nft(ns, "-a", "list", "chain", "ip", "magw", chain)
    except subprocess.CalledProcessError:
        return []
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if GN_SNAT in line and " snat " in f" {line} ":
            body, handle = line.rsplit(" # handle ", 1)
            rules.append((body, handle))
    return rules


def move_globalnet_snat(ns: str) -> None:
    """1981 off: the rules into a regular chain that nothing jumps to (Submariner's missing jump into
    SUBMARINER-GN-EGRESS), in one transaction."""
    rules = globalnet_snat_rules(ns)
    if not rules:
        return
    cmds = [f"add chain ip magw {MOVED_CHAIN}"]
    for body, handle in rules:
        cmds += [f"add rule ip magw {MOVED_CHAIN} {body}", f"delete rule ip magw postrouting handle {handle}"]
    _nft(ns, "-f", "-", stdin="\n".join(cmds) + "\n")


def chains(ns: str) -> list[str]:
    doc = json.loads(_nft(ns, "-j", "list", "table", "ip", "magw"))
    return [o["chain"]["name"] for o in doc["nftables"] if "chain" in o]


def unnated_connections(ns: str, remote_global: str) -> list[dict[str, str]]:
    """The TCP connections in ``ns``'s conntrack toward ``remote_global`` that no NAT touched (the reply goes back
    to the original source): what a gateway left without its Globalnet SNAT. Each as its original tuple."""
    out = subprocess.run(["ip", "netns", "exec", ns, "conntrack", "-L", "-p", "tcp", "-d", remote_global],
                         capture_output=True, text=True, timeout=30, check=False).stdout  # fmt: skip
    found = []
    for line in out.splitlines():
        fields = [f.split("=", 1) for f in line.split() if "=" in f]
        keys = [k for k, _ in fields]
        if keys.count("src") < 2:
            continue
        orig = {k: v for k, v in fields[: keys.index("src", 1)]}
        reply_dst = fields[keys.index("dst", keys.index("src", 1))][1]
        if reply_dst == orig["src"]:
            found.append(orig)
    return found


def forget_connections(ns: str, connections: list[dict[str, str]]) -> None:
    """Delete those conntrack entries (by their exact original tuple)."""
    for c in connections:
        subprocess.run(["ip", "netns", "exec", ns, "conntrack", "-D", "-p", "tcp", "-s", c["src"], "-d", c["dst"],
                        "--sport", c["sport"], "--dport", c["dport"]], capture_output=True, timeout=30,
                       check=False)  # fmt: skip


def flush_ovs_conntrack(ovs_dir: Path) -> None:
    """Forget every connection in the userspace conntrack of the ovs-vswitchd whose files are in ``ovs_dir``.

    An "off" window leaves half-open connections in the gateway routers' conntrack zones; a later connection that
    reuses one of their 5-tuples (the kernel may give a failed connect's source port again) tripped an assertion
    of OVS 3.1's userspace conntrack once here (``conn->conn_type == CT_CONN_TYPE_DEFAULT`` in
    ``conn_update_state``): ovs-vswitchd aborted, and the gateway with it. The kernel datapath of real nodes has
    no such code; the tests start every "on" check from a clean table instead."""
    subprocess.run(["ovs-appctl", "-t", str(ovs_dir / "vswitchd.ctl"), "dpctl/flush-conntrack"],
                   env={**os.environ, "OVS_RUNDIR": str(ovs_dir)}, capture_output=True, text=True, timeout=30,
                   check=True)  # fmt: skip


COUNTER_TABLE = "gnovntest"


def add_leak_counter(ns: str, local_cidr: str, remote_global: str) -> None:
    """Count, on ``ns``'s vxlan-tunnel, packets from another cluster's LOCAL addresses to our global CIDR: what a
    gateway sends without its Globalnet SNAT. The test's own table, before any other hook (priority -400)."""
    _nft(ns, "-f", "-", stdin=(
        f"table ip {COUNTER_TABLE} {{\n chain pre {{\n  type filter hook prerouting priority -400; policy accept;\n"
        f'  iifname "vxlan-tunnel" ip saddr {local_cidr} ip daddr {remote_global} counter\n }}\n}}\n'
    ))  # fmt: skip


def leak_count(ns: str) -> int:
    doc = json.loads(_nft(ns, "-j", "list", "table", "ip", COUNTER_TABLE))
    return sum(e["counter"]["packets"] for o in doc["nftables"] if "rule" in o for e in o["rule"]["expr"]
               if "counter" in e)  # fmt: skip


def drop_leak_counter(ns: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "ip", COUNTER_TABLE], capture_output=True,
                   timeout=30, check=False)  # fmt: skip


# ---- the NB (1984: submariner_router's routes back into the cluster) ------------------------------------


def routes_into_cluster(d: OvnDir) -> list[tuple[str, str]]:
    """(uuid, prefix) of every static route toward ovn_cluster_router's join port (169.254.254.2): the routes
    of every submariner_router* back into the cluster."""
    out = nbctl(d, "--format=csv", "--no-headings", "--columns=_uuid,ip_prefix", "find",
                "Logical_Router_Static_Route", f'nexthop="{CLUSTER_PORT_IP}"')  # fmt: skip
    rows = [line.split(",") for line in out.splitlines() if line.strip()]
    return sorted((uuid, prefix.strip('"')) for uuid, prefix in rows)


def set_route_prefixes(d: OvnDir, prefix: str) -> None:
    """Give every route back into the cluster ``prefix``, in one transaction, and wait until every chassis has
    it (``--wait=hv``)."""
    args: list[str] = []
    for uuid, _ in routes_into_cluster(d):
        args += ["--", "set", "Logical_Router_Static_Route", uuid, f'ip_prefix="{prefix}"']
    if args:
        nbctl(d, "--wait=hv", *args[1:])


def put_route_prefixes(d: OvnDir, saved: list[tuple[str, str]]) -> None:
    """Give each route of ``saved`` (uuid, prefix) its prefix back, if the row still exists."""
    present = {uuid for uuid, _ in routes_into_cluster(d)}
    args: list[str] = []
    for uuid, prefix in saved:
        if uuid in present:
            args += ["--", "set", "Logical_Router_Static_Route", uuid, f'ip_prefix="{prefix}"']
    if args:
        nbctl(d, "--wait=hv", *args[1:])
