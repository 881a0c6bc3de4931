"""The lab's cloud in front of a cluster's gateways (topology ``load_balancer``, ``magw.lab.spec.cloud``).

A ``cloud`` namespace per cluster, on the cluster's underlay bridge (port ``lb``, the underlay's ``.254``) and on
the WAN bridge (port ``<cluster>-lb``, the cluster's public address). Its nft table ``magw-lab-cloud``:

- ``prerouting`` (raw, before conntrack): UDP to a listener port (45001-45008) whose backend is not in the set
  ``live`` is dropped, so no conntrack entry without NAT is left behind to outlive the backend's return;
- ``dnat``: UDP to (public IP, listener port) goes to the backend's private address and the cable's port (map
  ``listeners``);
- ``nat-out``: everything leaving on the WAN gets the cloud's NAT address (not the load balancer's), UDP and TCP
  with a random port from 20000-40000 (port-rewriting NAT, as cloud NAT gateways do);
- ``forward``: from the WAN, only DNATed and established traffic passes.

The health check (``magw.lab.payload.cloudlb``) runs in the namespace and edits ``live`` and ``listeners``.
"""

from __future__ import annotations

import sys
from ipaddress import IPv4Address
from pathlib import Path

from magw.lab.build import procs
from magw.lab.build.state import LabState
from magw.lab.payload.cloudlb import LISTENER_MAP as LISTENERS
from magw.lab.payload.cloudlb import LIVE_SET as LIVE
from magw.lab.spec import naming
from magw.lab.spec.cloud import NAT_PORTS, PUBLIC_PORT_BASE, CloudLayout
from magw.lab.spec.layout import ClusterLayout, LabLayout
from magw.lab.spec.topology import MAX_GATEWAYS
from magw.model.cable import WG_PORT, Cable
from magw.model.vtep import INTER_PORT

TABLE = "magw-lab-cloud"
KIND = "cloudlb"
SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.default.rp_filter": "0"}
LISTENER_PORTS = f"{PUBLIC_PORT_BASE + 1}-{PUBLIC_PORT_BASE + MAX_GATEWAYS}"


def cable_port(lab: LabLayout) -> int:
    """The port a gateway's cable listens on: VXLAN's, or WireGuard's (the lab keeps WireGuard's default)."""
    return WG_PORT if lab.topology.cable is Cable.WIREGUARD else INTER_PORT


def link_commands(lab: LabLayout, cluster: ClusterLayout, cloud: CloudLayout) -> list[str]:
    """Inside the cloud namespace: its legs on the underlay and the WAN, with their addresses."""
    mtu = lab.topology.underlay_mtu
    ul_port, wan_port = naming.underlay_port(naming.CLOUD_SHORT), naming.wan_port(cluster.id, naming.CLOUD_SHORT)
    return [
        f"link add {naming.UNDERLAY_IF} mtu {mtu} type veth peer name {ul_port} mtu {mtu} netns {cluster.underlay_ns}",
        f"addr add {cloud.underlay_ip}/{cluster.underlay.prefixlen} dev {naming.UNDERLAY_IF}",
        f"link set {naming.UNDERLAY_IF} up",
        f"link add {naming.WAN_IF} mtu {mtu} type veth peer name {wan_port} mtu {mtu} netns {lab.wan_ns}",
        f"addr add {cloud.public_ip}/{lab.wan_subnet.prefixlen} dev {naming.WAN_IF}",
        f"addr add {cloud.nat_ip}/{lab.wan_subnet.prefixlen} dev {naming.WAN_IF}",
        f"link set {naming.WAN_IF} up",
        *(f"route add {o.underlay} via {ip} dev {naming.WAN_IF}" for o, ip in peers(lab, cluster)),
    ]


def peers(lab: LabLayout, cluster: ClusterLayout) -> list[tuple[ClusterLayout, IPv4Address]]:
    """The other clusters whose underlays this cluster's cloud routes to without NAT (``peered``), each with its
    cloud's address on the WAN."""
    spec = lab.topology.load_balancer
    if spec is None or not spec.peered:
        return []
    return [(c, c.cloud.public_ip) for c in lab.clusters if c.id != cluster.id and c.cloud is not None]


def nft_script(lab: LabLayout, cluster: ClusterLayout, cloud: CloudLayout) -> str:
    """The cloud's table, every gateway registered in its listener (the health check takes them out)."""
    port = cable_port(lab)
    gws = [g for g in cluster.gateways if g.public_port is not None]
    live = ", ".join(str(g.public_port) for g in gws)
    listeners = ", ".join(f"{g.public_port} : {g.node_ip} . {port}" for g in gws)
    wan, lo, hi = naming.WAN_IF, *NAT_PORTS
    peered = ", ".join(str(c.underlay) for c, _ip in peers(lab, cluster))
    # Peered networks: to and from the other clouds' underlays nothing is translated or dropped (VPC peering).
    no_nat = f'    oifname "{wan}" ip daddr {{ {peered} }} accept;\n' if peered else ""
    from_peers = f'    iifname "{wan}" ip saddr {{ {peered} }} ip daddr {cluster.underlay} accept;\n' if peered else ""
    return f"""table ip {TABLE} {{
  set {LIVE} {{ type inet_service; elements = {{ {live} }}; }}
  map {LISTENERS} {{ type inet_service : ipv4_addr . inet_service; elements = {{ {listeners} }}; }}
  chain listener-guard {{ type filter hook prerouting priority raw; policy accept;
    iifname "{wan}" ip daddr {cloud.public_ip} udp dport {LISTENER_PORTS} udp dport != @{LIVE} drop;
  }}
  chain listener-dnat {{ type nat hook prerouting priority dstnat; policy accept;
    iifname "{wan}" ip daddr {cloud.public_ip} dnat ip to udp dport map @{LISTENERS};
  }}
  chain nat-out {{ type nat hook postrouting priority srcnat; policy accept;
{no_nat}    oifname "{wan}" meta l4proto {{ tcp, udp }} snat ip to {cloud.nat_ip}:{lo}-{hi} random;
    oifname "{wan}" snat ip to {cloud.nat_ip};
  }}
  chain forward {{ type filter hook forward priority filter; policy accept;
{from_peers}    iifname "{wan}" ct status dnat accept;
    iifname "{wan}" ct state established,related accept;
    iifname "{wan}" drop;
  }}
}}
"""


def checker_argv(lab: LabLayout, cluster: ClusterLayout, check_port: int) -> list[str]:
    spec = lab.topology.load_balancer
    assert spec is not None
    port = cable_port(lab)
    backends = [
        arg
        for g in cluster.gateways
        if g.public_port is not None
        for arg in ("--backend", f"{g.public_port}={g.node_ip}:{port}:{check_port}")
    ]
    return [sys.executable, "-m", "magw.lab.payload.cloudlb", "--table", TABLE, *backends,
            "--interval", f"{spec.health_interval:g}", "--unhealthy", str(spec.unhealthy_threshold),
            "--healthy", str(spec.healthy_threshold)]  # fmt: skip


def log_path(st: LabState, cluster: str) -> Path:
    """The health check's JSON lines (``cloudlb.backend_down`` / ``_up`` with their time)."""
    return st.logs_dir / f"cloudlb-{cluster}.log"


def start_checkers(lab: LabLayout, st: LabState, check_port: int) -> tuple[procs.ProcRecord, ...]:
    """A health check per cloud; returns the state's processes plus these."""
    records = list(st.processes)
    for c in lab.clusters:
        if c.cloud is not None:
            argv = checker_argv(lab, c, check_port)
            records.append(procs.start(kind=KIND, owner=c.id, namespace=c.cloud.namespace, argv=argv,
                                       log_path=log_path(st, c.id)))  # fmt: skip
    return tuple(records)
