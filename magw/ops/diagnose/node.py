"""Run the checks of the topics asked for on one node's namespace: read (``readers``), then judge."""

from __future__ import annotations

import http.client
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Sequence
from ipaddress import IPv4Network
from typing import Any

import attrs

from magw.drivers.netlink.capabilities import Capabilities, detect
from magw.model.cable import WG_DEVICE, WG_OVERHEAD, WG_PORT
from magw.model.vtep import VX_SUBMARINER, VXLAN_OVERHEAD, VXLAN_TUNNEL
from magw.ops.diagnose import readers
from magw.ops.diagnose.clock import ClockSample, clock_checks
from magw.ops.diagnose.cni import StaleReadings, cni_checks, stale_checks
from magw.ops.diagnose.kernel import KernelReadings, kernel_checks
from magw.ops.diagnose.mtu import PathProbe, TunnelMtu, mtu_checks
from magw.ops.diagnose.mtu import path_checks as mtu_path_checks
from magw.ops.diagnose.paths import CableProbe
from magw.ops.diagnose.paths import path_checks as cable_path_checks
from magw.ops.diagnose.shadow import OUR_PROTOCOL, Resolution, nft_checks, route_checks, rule_checks
from magw.ops.diagnose.sysctl import SysctlReadings, sysctl_checks
from magw.ops.diagnose.verdict import Check, NodeReport, warned

TOPICS = ("kernel", "sysctl", "mtu", "clock", "firewall", "shadow", "cni", "stale")
DEVICES = (VXLAN_TUNNEL, VX_SUBMARINER)
GATEWAY_TABLE = "100"


@attrs.frozen(kw_only=True)
class NodeContext:
    """What is known of the node besides its namespace: its name, role (None: unknown) and cable."""

    name: str
    netns: str | None
    gateway: bool | None = None
    cable: str | None = None
    clock_urls: tuple[str, ...] = ()
    read_only: bool = True  # kernel: learn nexthop support from dumps only (never create probe objects)
    foreign_namespaces: tuple[str, ...] = ()
    agent_status: dict[str, Any] | None = None  # the route agent's status file (its health peers)
    wan_peers: tuple[str, ...] = ()  # the remote gateways' public IPs (a lab's plan): WireGuard's endpoints
    capabilities: Capabilities | None = None  # already detected (the CLI's kernel topic): not probed again

    @property
    def prefix(self) -> str:
        return f"ip netns exec {self.netns} " if self.netns else ""


def _kernel(ctx: NodeContext, _: dict[str, Any]) -> list[Check]:
    caps = ctx.capabilities or detect(ctx.netns, read_only=ctx.read_only)
    links = _links(ctx)
    cable = ctx.cable or ("wireguard" if WG_DEVICE in links else "vxlan" if VXLAN_TUNNEL in links else None)
    return kernel_checks(KernelReadings(
        kernel=caps.kernel, nexthops=caps.nexthops, resilient=caps.resilient, nft=caps.nft, iproute2=caps.iproute2,
        modules={m: readers.module_state(m) for m in ("vxlan", "wireguard")},
        wireguard_go=readers.which("wireguard-go"), cable=cable, notes=caps.notes))


def _links(ctx: NodeContext) -> dict[str, dict[str, Any]]:
    return readers.links(ctx.netns)


def _sysctl(ctx: NodeContext, links: dict[str, Any]) -> list[Check]:
    devs = ["all", *(d for d in DEVICES if d in links)]
    return sysctl_checks(SysctlReadings(
        hash_policy=readers.sysctl(ctx.netns, "net.ipv4.fib_multipath_hash_policy"),
        ip_forward=readers.sysctl(ctx.netns, "net.ipv4.ip_forward"),
        rp_filter={d: readers.sysctl(ctx.netns, f"net.ipv4.conf.{d}.rp_filter") for d in devs},
        netns_flag=ctx.prefix))


def _underlay(ctx: NodeContext, links: dict[str, Any], dst: str) -> tuple[str | None, int | None]:
    got = readers.route_get(ctx.netns, dst)
    dev = got.get("dev") if got else None
    return dev, (links[dev]["mtu"] if dev in links else None)


def _mtu(ctx: NodeContext, links: dict[str, Any]) -> list[Check]:
    tunnels, probes = [], []
    for dev in DEVICES:
        if dev not in links:
            continue
        mtu = int(links[dev]["mtu"])
        dsts = readers.fdb_dsts(ctx.netns, dev)
        under, under_mtu = _underlay(ctx, links, dsts[0]) if dsts else (None, None)
        tunnels.append(TunnelMtu(device=dev, mtu=mtu, underlay=under, underlay_mtu=under_mtu))
        if under == WG_DEVICE and under in links:  # VXLAN through WireGuard: the wg device over its own underlay
            tunnel, wg_probes = _wg(ctx, links)
            tunnels.append(tunnel)
            probes += wg_probes
        size = mtu + VXLAN_OVERHEAD
        for dst in dsts:
            ok, why = readers.echo(ctx.netns, dst, size=size, dontfrag=True)
            probes.append(PathProbe(device=dev, target=dst, size=size, answered=ok, error=why))
    return mtu_checks(tunnels, ctx.prefix) + mtu_path_checks(probes, ctx.prefix)


def _wg(ctx: NodeContext, links: dict[str, Any]) -> tuple[TunnelMtu, list[PathProbe]]:
    """The WireGuard device's MTU over its underlay, and a DF echo of a full WireGuard packet to each endpoint."""
    mtu = int(links[WG_DEVICE]["mtu"])
    endpoints = _wg_endpoints(ctx) or list(ctx.wan_peers)
    under, under_mtu = _underlay(ctx, links, endpoints[0]) if endpoints else (None, None)
    size = mtu + WG_OVERHEAD
    probes = []
    for dst in endpoints:
        ok, why = readers.echo(ctx.netns, dst, size=size, dontfrag=True)
        probes.append(PathProbe(device=WG_DEVICE, target=dst, size=size, answered=ok, error=why))
    tunnel = TunnelMtu(device=WG_DEVICE, mtu=mtu, underlay=under, underlay_mtu=under_mtu, overhead=WG_OVERHEAD)
    return tunnel, probes


def _wg_endpoints(ctx: NodeContext) -> list[str]:
    """The peers' endpoint addresses as ``wg`` shows them; [] when it cannot (wireguard-go's socket lives in a
    mount namespace of its own)."""
    argv = readers._in_ns(ctx.netns, ["wg", "show", WG_DEVICE, "endpoints"])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=readers.TIMEOUT, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    fields = [line.split() for line in out.splitlines()]
    return [f[1].rsplit(":", 1)[0] for f in fields if len(f) > 1 and f[1] != "(none)"]


def peer_states(status: dict[str, Any] | None) -> dict[str, str]:
    """VTEP address -> health state, from a route agent's status document (``health.peers``)."""
    health = (status or {}).get("health") or {}
    return {str(p["address"]): str(p.get("state")) for p in health.get("peers", []) if "address" in p}


def _firewall(ctx: NodeContext, links: dict[str, Any]) -> list[Check]:
    probes = []
    states = peer_states(ctx.agent_status)
    for dev in DEVICES:
        if dev not in links:
            continue
        by_mac = {e.get("mac"): e.get("dst") for e in readers.run_json(ctx.netns, ["bridge", "-j", "fdb", "show",
                                                                                     "dev", dev])}
        for n in readers.neighbours(ctx.netns, dev):
            ok, why = readers.echo(ctx.netns, n["dst"])
            probes.append(CableProbe(device=dev, vtep=n["dst"], underlay=by_mac.get(n.get("lladdr")),
                                     answered=ok, error=why, agent_state=states.get(n["dst"]),
                                     port=WG_PORT if dev == VXLAN_TUNNEL and WG_DEVICE in links else None))
    if not probes:
        return [warned("firewall", "cables", "no peer on magw's devices to probe",
                       "start the route agent; check --netns names a node")]
    return cable_path_checks(probes, ctx.prefix)


def _clock(ctx: NodeContext, _: dict[str, Any]) -> list[Check]:
    return clock_checks([sample_clock(url) for url in ctx.clock_urls])


def sample_clock(url: str, *, now: Callable[[], float] = time.time) -> ClockSample:
    """One GET of ``url`` and its ``Date`` header, our clock read before and after (TLS not verified: only the
    header's time is used)."""
    parts = urllib.parse.urlsplit(url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=5,
                                           context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    sent = now()
    try:
        conn.request("GET", parts.path or "/")
        date = conn.getresponse().getheader("Date")
    except (OSError, http.client.HTTPException) as exc:
        return ClockSample(reference=url, sent=sent, received=now(), date_header=None, error=str(exc))
    finally:
        conn.close()
    return ClockSample(reference=url, sent=sent, received=now(), date_header=date)


def route_devices(route: dict[str, Any]) -> set[str]:
    """The devices a route leaves through: its own, or its multipath hops' (a group of several gateways)."""
    devs = {str(route["dev"])} if "dev" in route else set()
    return devs | {str(h["dev"]) for h in route.get("nexthops", []) if "dev" in h}


def _our_routes(ctx: NodeContext) -> list[dict[str, Any]]:
    return [r for r in readers.routes(ctx.netns) if str(r.get("protocol")) in (OUR_PROTOCOL, "magw")
            and route_devices(r) & set(DEVICES) and "/" in str(r.get("dst", ""))]


def _marks(rules: list[dict[str, Any]]) -> dict[str, str]:
    """table -> the fwmark of our rule that reaches it (keep_client_ip's tables 11000-11014): a route there is
    resolved as a packet with that mark, or the main table would answer for it."""
    return {str(r["table"]): str(r["fwmark"]) for r in rules
            if "fwmark" in r and "table" in r and str(r.get("protocol")) in (OUR_PROTOCOL, "magw")}  # fmt: skip


def _shadow(ctx: NodeContext, _: dict[str, Any]) -> list[Check]:
    resolutions = []
    rules = readers.rules(ctx.netns)
    marks = _marks(rules)
    for r in _our_routes(ctx):
        net = IPv4Network(r["dst"], strict=False)
        probe = str(net[1] if net.num_addresses > 2 else net[0])
        src = r.get("prefsrc")
        got = readers.route_get(ctx.netns, probe, src, marks.get(str(r.get("table", "main"))))
        resolutions.append(Resolution(cidr=r["dst"], dev=sorted(route_devices(r))[0],
                                      table=str(r.get("table", "main")), probe=probe,
                                      source=src, got_dev=got.get("dev") if got else None,
                                      got_table=str(got.get("table", "main")) if got else None,
                                      got_type=got.get("type") if got else "no route"))
    checks = route_checks(resolutions, ctx.prefix)
    checks += rule_checks(rules, ctx.prefix)
    checks += nft_checks(readers.nft_ruleset(ctx.netns), ctx.prefix)
    return checks


def _cni(ctx: NodeContext, links: dict[str, Any]) -> list[Check]:
    return cni_checks(set(links), readers.ovn_sockets() if ctx.netns is None else set())


def _stale(ctx: NodeContext, links: dict[str, Any]) -> list[Check]:
    ours = [r for r in readers.routes(ctx.netns) if str(r.get("protocol")) in (OUR_PROTOCOL, "magw")]
    named = {d for r in ours for d in route_devices(r)} | {n["dev"] for n in readers.nexthops(ctx.netns) if "dev" in n}
    tables = {i["table"]["name"] for i in readers.nft_ruleset(ctx.netns) if "table" in i}
    return stale_checks(StaleReadings(
        gateway=ctx.gateway, links=set(links), nft_tables=tables,
        gateway_routes=sum(1 for r in ours if str(r.get("table")) == GATEWAY_TABLE),
        dangling_devices=named - set(links), foreign_namespaces=ctx.foreign_namespaces), ctx.prefix, ctx.netns)


RUNNERS: dict[str, Callable[[NodeContext, dict[str, Any]], list[Check]]] = {
    "kernel": _kernel, "sysctl": _sysctl, "mtu": _mtu, "clock": _clock, "firewall": _firewall,
    "shadow": _shadow, "cni": _cni, "stale": _stale,
}


def diagnose_node(ctx: NodeContext, topics: Sequence[str]) -> NodeReport:
    """Every check of ``topics`` on the node; a topic that cannot read its namespace is one warn row."""
    links = _links(ctx)
    checks: list[Check] = []
    for topic in topics:
        try:
            checks += RUNNERS[topic](ctx, links)
        except readers.ReadError as exc:
            checks.append(warned(topic, "read", f"could not read the namespace: {exc}",
                                 "run as root; check the tools (ip, bridge, nft) are installed"))
    return NodeReport(node=ctx.name, netns=ctx.netns, checks=tuple(checks))
