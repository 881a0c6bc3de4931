"""The inter-cluster cable: plain VXLAN, or VXLAN carried through one WireGuard device per gateway.

With ``cable: wireguard`` every gateway runs one WireGuard device, ``magw-wg``, with one peer per remote
gateway. Each gateway has an inner address on it, 242/8 with the low three octets of its private IP (as the
VTEPs of magw.model.vtep), and a peer's allowed IPs are that peer's inner /32 only. ``vxlan-tunnel`` then sends
to a remote gateway's inner address instead of its public one, so WireGuard picks the peer by the VXLAN
packet's outer destination: every remote gateway is reachable through the one device, the nexthop groups,
probes and failover stay the VXLAN ones, and the host needs one UDP port (docs/cables.md says why not one
device per remote gateway).
"""

from __future__ import annotations

import base64
import binascii
import enum
from ipaddress import IPv4Address, IPv4Interface, IPv4Network


class Cable(enum.Enum):
    """How gateways of different clusters reach each other."""

    VXLAN = "vxlan"
    WIREGUARD = "wireguard"


WG_DEVICE = "magw-wg"
WG_PORT = 51820  # WireGuard's usual port; config.wireguard_port overrides it clusterset-wide
WG_OCTET = 242
WG_PREFIXLEN = 8
WG_OVERHEAD = 60  # outer IPv4 (20) + UDP (8) + WireGuard data header (16) + authentication tag (16)
KEY_BYTES = 32
PUBLIC_KEY_FIELD = "publicKey"  # the Endpoint's backend_config key, as Submariner names it
NAT_SOURCE_FIELD = "natSourceIP"  # backend_config: the address a NAT other than public_ip's gives its cable packets
PUBLIC_PORT_FIELD = "publicPort"  # backend_config: the port the cable is reached at on the public IP (a string)


def wg_inner_ip(private_ip: IPv4Address) -> IPv4Address:
    """A gateway's address on ``magw-wg``: ``private_ip`` with its first octet replaced by 242."""
    return IPv4Address((WG_OCTET << 24) | (int(private_ip) & 0x00FFFFFF))


def wg_inner_interface(private_ip: IPv4Address) -> IPv4Interface:
    """The device address: the inner IP with its /8 (every remote gateway's inner address is on-link)."""
    return IPv4Interface(f"{wg_inner_ip(private_ip)}/{WG_PREFIXLEN}")


def wg_allowed(private_ip: IPv4Address) -> IPv4Network:
    """A peer's allowed IPs: its inner address, a /32."""
    return IPv4Network(f"{wg_inner_ip(private_ip)}/32")


def check_public_key(value: str) -> str | None:
    """None when ``value`` is a WireGuard public key (base64 of 32 bytes, 44 characters), else why not."""
    if len(value) != 44:
        return f"a WireGuard key is 44 base64 characters, not {len(value)}"
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return "not base64"
    if len(raw) != KEY_BYTES:
        return f"decodes to {len(raw)} bytes, not {KEY_BYTES}"
    if base64.b64encode(raw).decode() != value:  # unused bits set in the last character: wg refuses it
        return "not the canonical base64 of 32 bytes (wg would refuse it)"
    return None
