"""VXLAN links we own: observe them, create, change in place or re-create, delete.

A link is ours by name (``constants.OWNED_LINKS``). ``mtu``, ``mac`` and ``up``
change in place. The kernel refuses to change a VXLAN's VNI or port on a live
device (kernel 6.18: EOPNOTSUPP "Cannot change VNI"), so a change of ``vni``,
``port``, ``local`` or ``learning`` deletes the device and creates it again. The
kernel drops everything that hung on the old device with it (addresses,
neighbors, FDB entries, nexthops and the routes using them); the next sync sees
them missing and re-creates them.
"""

from __future__ import annotations

import socket
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog

from magw.desired.state import Link
from magw.drivers.netlink.constants import OWNED_LINKS
from magw.drivers.netlink.linktable import LinkTable
from magw.drivers.netlink.session import OpError, error_code
from magw.drivers.netlink.sysctl import write_sysctl

log = structlog.get_logger(__name__)

_ENODEV = 19
_EPERM = 1
_IFF_UP = 0x1
_NUD_PERMANENT = 0x80


def _vxlan_data(msg: Any) -> Any | None:
    info = msg.get("IFLA_LINKINFO")
    if info is None or info.get("IFLA_INFO_KIND") != "vxlan":
        return None
    return info.get("IFLA_INFO_DATA")


def link_from_msg(msg: Any) -> Link | None:
    """The Link for an RTM_NEWLINK message of a device we own, None for any other device.

    A device with our name that is not a VXLAN is reported with vni 0 and port 0: it
    never equals a planned link, so the next sync replaces it by ours.
    """
    name = msg.get("IFLA_IFNAME")
    if name not in OWNED_LINKS:
        return None
    mtu = int(msg.get("IFLA_MTU") or 0)
    mac = str(msg.get("IFLA_ADDRESS") or "").lower()
    up = bool(msg["flags"] & _IFF_UP)
    data = _vxlan_data(msg)
    if data is None:
        return Link(name=name, vni=0, port=0, mtu=mtu, mac=mac, up=up)
    local = data.get("IFLA_VXLAN_LOCAL")
    external = bool(data.get("IFLA_VXLAN_COLLECT_METADATA"))
    return Link(
        name=name,
        vni=int(data.get("IFLA_VXLAN_ID") or 0),
        port=int(data.get("IFLA_VXLAN_PORT") or 0),
        mtu=mtu,
        mac=mac,
        local=IPv4Address(local) if local else None,
        learning=bool(data.get("IFLA_VXLAN_LEARNING")),
        up=up,
        external=external,
        gpe=data.get("IFLA_VXLAN_GPE") is not None,
    )


def _immutable(link: Link) -> tuple[int, int, IPv4Address | None, bool, bool, bool]:
    return (link.vni, link.port, link.local, link.learning, link.external, link.gpe)


def _require_owned(name: str) -> None:
    if name not in OWNED_LINKS:
        raise OpError(_EPERM, f"link {name} is not one of ours ({', '.join(sorted(OWNED_LINKS))})")


def _permanent_neighbors(ipr: Any, index: int) -> list[tuple[str, str]]:
    """(ip, mac) of the IPv4 ``nud permanent`` neighbors on link ``index``."""
    return [
        (str(m.get("NDA_DST")), str(m.get("NDA_LLADDR")))
        for m in ipr.get_neighbours(family=socket.AF_INET, ifindex=index)
        if m["ifindex"] == index and m["state"] & _NUD_PERMANENT and m.get("NDA_LLADDR")
    ]


@attrs.define
class LinkIO:
    """Observe and change the links we own through one pyroute2 session in namespace ``netns``."""

    ipr: Any
    table: LinkTable
    netns: str | None

    def observe(self) -> list[Link]:
        links = (link_from_msg(m) for m in self.ipr.get_links())
        return [link for link in links if link is not None]

    def current(self, name: str) -> Link | None:
        """What the kernel has under ``name`` right now (None: no such device)."""
        self.table.invalidate()  # the index we use next (``_set``) must be as fresh as what we read here
        for msg in self.ipr.get_links():
            if msg.get("IFLA_IFNAME") == name:
                return link_from_msg(msg)
        return None

    def ensure(self, link: Link) -> None:
        """Create ``link`` or bring the existing device to it (create and replace are the same)."""
        _require_owned(link.name)
        try:
            old = self.current(link.name)
            if old is None:
                self._add(link)
            elif old.port == 0 or _immutable(old) != _immutable(link):  # port 0: not a VXLAN (link_from_msg)
                log.info("netlink.link_recreate", link=link.name, old_vni=old.vni, vni=link.vni)
                self._delete(link.name)
                self._add(link)
            elif old != link:
                self._set(old, link)
        finally:
            self.table.invalidate()

    def delete(self, link: Link) -> None:
        """Delete our link; a missing link is success."""
        _require_owned(link.name)
        try:
            self._delete(link.name)
        finally:
            self.table.invalidate()

    def _add(self, link: Link) -> None:
        extra: dict[str, object] = {"vxlan_local": str(link.local)} if link.local is not None else {}
        if link.mac:
            extra["address"] = link.mac
        if link.external:
            extra["vxlan_collect_metadata"] = 1
        else:
            extra["vxlan_id"] = link.vni
        if link.gpe:
            extra["vxlan_gpe"] = True
        self.ipr.link(
            "add",
            ifname=link.name,
            kind="vxlan",
            vxlan_port=link.port,
            vxlan_learning=int(link.learning),
            mtu=link.mtu,
            state="up" if link.up else "down",
            **extra,
        )
        if link.gpe:
            # The egress gateway's device receives pods' packets whose source routes back through the underlay:
            # loose reverse-path filtering on the device (the effective value is max(all, device), so this holds
            # whatever the host's ``all`` is; docs/egress-datapath.md). Only our device's own sysctl.
            write_sysctl(self.netns, f"net.ipv4.conf.{link.name}.rp_filter", "2")
        # Kernel 6.18 (promote_secondaries=0 by default): deleting a link's primary address deletes its
        # secondaries too, and losing the last address flushes the link's neighbors. Our address changes
        # create the new address before deleting the old one, so the new one must survive: promote it.
        write_sysctl(self.netns, f"net.ipv4.conf.{link.name}.promote_secondaries", "1")

    def _set(self, old: Link, link: Link) -> None:
        """Change mtu, MAC and up/down in place, sending only what differs."""
        index = self.table.index(link.name)
        changes: dict[str, object] = {}
        if old.mtu != link.mtu:
            changes["mtu"] = link.mtu
        if old.up != link.up:
            changes["state"] = "up" if link.up else "down"
        if old.mac != link.mac and link.mac:
            self._set_mac(index, link.mac)
        if changes:
            self.ipr.link("set", index=index, **changes)

    def _set_mac(self, index: int, mac: str) -> None:
        """Change the MAC and put back the link's static neighbors.

        Kernel 6.18: a MAC change (NETDEV_CHANGEADDR) flushes every neighbor entry of the device,
        ``nud permanent`` ones too (neigh_changeaddr). A link replace keeps its dependents, so we
        re-add the permanent entries we saw just before.
        """
        kept = _permanent_neighbors(self.ipr, index)
        self.ipr.link("set", index=index, address=mac)
        for ip, lladdr in kept:
            self.ipr.neigh("replace", ifindex=index, dst=ip, lladdr=lladdr, state=_NUD_PERMANENT)

    def _delete(self, name: str) -> None:
        self.table.refresh()
        if not self.table.has(name):
            return
        try:
            self.ipr.link("del", index=self.table.index(name))
        except Exception as exc:
            if error_code(exc) != _ENODEV:  # gone since we looked: fine
                raise
