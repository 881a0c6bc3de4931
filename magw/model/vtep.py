"""Addressing conventions of the two VXLAN meshes: device names, VNIs, ports, VTEP IPs and MACs.

A VTEP address is the node's (or gateway's private) IP with the first octet
replaced: 240/8 on ``vx-submariner`` (inside a cluster), 241/8 on
``vxlan-tunnel`` (between clusters). Each device's MAC is derived from its VTEP
IP, so every peer can program a static neighbor and a unicast FDB entry for it
without asking: ``02:53:`` (locally administered, unicast) + the 4 VTEP bytes.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface

VX_SUBMARINER = "vx-submariner"
VXLAN_TUNNEL = "vxlan-tunnel"

INTRA_VNI = 100
INTRA_PORT = 4800
INTRA_OCTET = 240

INTER_VNI = 1000
INTER_PORT = 4500
INTER_OCTET = 241

VTEP_PREFIXLEN = 8
VXLAN_OVERHEAD = 50  # outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14)

_MAC_PREFIX = (0x02, 0x53)


def vtep_ip(ip: IPv4Address, *, inter_cluster: bool) -> IPv4Address:
    """``ip`` with its first octet replaced by 241 (``inter_cluster``) or 240."""
    octet = INTER_OCTET if inter_cluster else INTRA_OCTET
    return IPv4Address((octet << 24) | (int(ip) & 0x00FFFFFF))


def vtep_interface(ip: IPv4Address, *, inter_cluster: bool) -> IPv4Interface:
    """The device address: the VTEP with its /8."""
    return IPv4Interface(f"{vtep_ip(ip, inter_cluster=inter_cluster)}/{VTEP_PREFIXLEN}")


def vtep_mac(vtep: IPv4Address) -> str:
    """The deterministic MAC of a VTEP: 240.18.0.6 -> ``02:53:f0:12:00:06``."""
    return ":".join(f"{b:02x}" for b in (*_MAC_PREFIX, *vtep.packed))


def device(*, inter_cluster: bool) -> str:
    return VXLAN_TUNNEL if inter_cluster else VX_SUBMARINER
