"""The kernel's checks, for ``FakeNetlink``: what the kernel refuses, with its errno and extack message.

Every message below was read back from kernel 6.18 (``ip`` and hand-packed netlink
messages in a throwaway namespace). Where the errno is not the kernel's own, the
docstring says why (a device name is resolved by the driver before the kernel sees it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address

import attrs

from magw.desired.state import Address, Fdb, Link, Neighbor, NetObject, Nexthop, NexthopGroup, Route, Rule

MTU_MIN = 68  # vxlan min_mtu; below: EINVAL "mtu less than device minimum"
MTU_MAX = 65535  # vxlan max_mtu; above: EINVAL "mtu greater than device maximum"
VNI_MAX = (1 << 24) - 1
VXLAN_DEFAULT_PORT = 8472  # what the kernel reads back for a VXLAN created with port 0 (Linux's own default)
WEIGHT_MAX = 256  # struct nexthop_grp / rtnexthop carry weight - 1 in a u8

_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


class KernelError(Exception):
    """A refusal, printed as ``ERRNAME: message`` (the form ``Failure.error`` carries)."""

    def __init__(self, errname: str, message: str) -> None:
        super().__init__(f"{errname}: {message}")
        self.errname = errname
        self.message = message


@attrs.frozen(kw_only=True)
class ForeignLink:
    """A device magw does not manage (``eth0``, ``cni0``, a bridge): only its name and admin state matter."""

    name: str
    up: bool = True

    @property
    def key(self) -> str:
        return self.name


AnyLink = Link | ForeignLink
AnyNexthop = Nexthop | NexthopGroup

_KINDS: tuple[tuple[type, str], ...] = (
    (Link, "links"),
    (ForeignLink, "links"),
    (Address, "addresses"),
    (Neighbor, "neighbors"),
    (Fdb, "fdb"),
    (Nexthop, "nexthops"),
    (NexthopGroup, "groups"),
    (Route, "routes"),
    (Rule, "rules"),
)


def kind_of(obj: object) -> str:
    """The ``KINDS`` name of an object's type."""
    for cls, kind in _KINDS:
        if isinstance(obj, cls):
            return kind
    raise TypeError(f"not a netlink object: {type(obj).__name__}")


def normalize(obj: NetObject | ForeignLink) -> NetObject | ForeignLink:
    """The object as the kernel reports it back.

    MACs read back in lower case. A VXLAN link asked for port 0 reads back port 8472
    (the kernel's default), so a desired state with port 0 never converges. A plain
    (mpath) group has no buckets or timers: the driver cannot send them
    (``NHA_RES_GROUP`` is for resilient groups), so they read back as 0 and a
    desired state that sets them never converges.
    """
    if isinstance(obj, Link):
        port = obj.port or VXLAN_DEFAULT_PORT
        return attrs.evolve(obj, mac=obj.mac.lower(), port=port)
    if isinstance(obj, Neighbor | Fdb):
        return attrs.evolve(obj, mac=obj.mac.lower())
    if isinstance(obj, NexthopGroup) and obj.type == "mpath":
        return attrs.evolve(obj, buckets=0, idle_timer=0, unbalanced_timer=0)
    return obj


def check_lladdr(mac: str) -> None:
    """EINVAL for a MAC that is not six colon-separated hex octets (the driver cannot pack it)."""
    if not _MAC.match(mac):
        raise KernelError("EINVAL", f"invalid link-layer address {mac!r}")


def check_fdb_mac(fdb: Fdb) -> None:
    """The vxlan driver writes FDB entries with NLM_F_REPLACE, which it refuses for a multicast or all-zero MAC.

    Kernel 6.18 (vxlan_fdb_update_create): EOPNOTSUPP, which Python's errno table names ENOTSUP (same number).
    """
    check_lladdr(fdb.mac)
    if int(fdb.mac[:2], 16) & 1 or fdb.mac == "00:00:00:00:00:00":
        raise KernelError("ENOTSUP", f"Operation not supported (fdb {fdb.mac} dev {fdb.dev}: not a unicast MAC)")


def check_fdb_port(fdb: Fdb) -> None:
    """EINVAL for a port that is not a u16: NDA_PORT cannot carry it (the netlink driver refuses it unsent)."""
    if fdb.port is not None and not 0 <= fdb.port <= 0xFFFF:
        raise KernelError("EINVAL", f"invalid fdb destination port {fdb.port} (fdb {fdb.mac} dev {fdb.dev})")


def fdb_as_reported(fdb: Fdb, link: AnyLink) -> Fdb:
    """``fdb`` as a dump reports it: the kernel sends NDA_PORT only when it is neither 0 nor the port of the
    VXLAN device (vxlan_fdb_info, 6.18), so an entry written with either reads back with port None."""
    if fdb.port is not None and (fdb.port == 0 or (isinstance(link, Link) and fdb.port == link.port)):
        return attrs.evolve(fdb, port=None)
    return fdb


def check_link(link: Link, links: Iterable[AnyLink]) -> None:
    """A VXLAN link's attributes, and its (vni, port) against every other VXLAN link of the namespace."""
    if link.mtu < MTU_MIN:
        raise KernelError("EINVAL", f"mtu less than device minimum ({link.name} mtu {link.mtu})")
    if link.mtu > MTU_MAX:
        raise KernelError("EINVAL", f"mtu greater than device maximum ({link.name} mtu {link.mtu})")
    if not 0 <= link.vni <= VNI_MAX:
        raise KernelError("ERANGE", f"VXLAN ID must be lower than 16777216 ({link.name} id {link.vni})")
    if not 0 <= link.port <= 65535:  # 0 never gets here: normalize() makes it 8472, as the kernel does
        raise KernelError("EINVAL", f"invalid VXLAN destination port {link.port} ({link.name})")
    if link.gpe and not link.external:
        raise KernelError("EINVAL", f"Unsupported VXLAN option: GPE needs external ({link.name})")
    if link.gpe:  # VXLAN-GPE carries no Ethernet header: the device has no MAC (ARPHRD_NONE)
        if link.mac:
            raise KernelError("EOPNOTSUPP", f"Operation not supported ({link.name} is GPE: no address {link.mac})")
    else:
        check_lladdr(link.mac)
        first = int(link.mac[:2], 16)
        if first & 1 or link.mac == "00:00:00:00:00:00":
            raise KernelError("EADDRNOTAVAIL", f"Cannot assign requested address ({link.name} address {link.mac})")
    for other in links:
        if isinstance(other, Link) and other.name != link.name and (other.vni, other.port) == (link.vni, link.port):
            raise KernelError("EEXIST", f"A VXLAN device with the specified VNI already exists ({other.name})")


def find_dev(dev: str, links: Mapping[str, AnyLink]) -> AnyLink:
    """ENODEV: the driver resolves the name to an ifindex and finds none."""
    link = links.get(dev)
    if link is None:
        raise KernelError("ENODEV", f"Cannot find device {dev!r}")
    return link


def _on_link(via: IPv4Address, dev: str, addresses: Iterable[Address]) -> bool:
    return any(a.dev == dev and via in a.address.network for a in addresses)


def check_nexthop(nh: Nexthop, links: Mapping[str, AnyLink], addresses: Iterable[Address]) -> None:
    """ENODEV; ENETDOWN "Nexthop device is not up"; ENETUNREACH "Nexthop has invalid gateway" (not on-link)."""
    if not find_dev(nh.dev, links).up:
        raise KernelError("ENETDOWN", f"Nexthop device is not up (nexthop {nh.id} dev {nh.dev})")
    if not _on_link(nh.via, nh.dev, addresses):
        raise KernelError("ENETUNREACH", f"Nexthop has invalid gateway (nexthop {nh.id} via {nh.via} dev {nh.dev})")


def check_group(group: NexthopGroup, ids: Mapping[int, AnyNexthop]) -> None:
    """The kernel's checks of NHA_GROUP (all EINVAL) and of a resilient group's bucket count."""
    if not group.members:
        raise KernelError("EINVAL", f"Invalid length for nexthop group attribute (group {group.id} is empty)")
    seen: set[int] = set()
    for member in group.members:
        if member.id in seen:
            raise KernelError("EINVAL", f"Nexthop id can not be used twice in a group (group {group.id})")
        seen.add(member.id)
        found = ids.get(member.id)
        if found is None:
            raise KernelError("EINVAL", f"Invalid nexthop id (group {group.id} member {member.id} does not exist)")
        if isinstance(found, NexthopGroup):
            raise KernelError("EINVAL", f"A group can not be a nexthop within a group (member {member.id})")
        if not 1 <= member.weight <= WEIGHT_MAX:
            raise KernelError("EINVAL", f"Invalid value for weight (group {group.id} member {member.id})")
    if group.type == "resilient" and group.buckets == 0:
        raise KernelError("EINVAL", f"Number of buckets needs to be non-0 (group {group.id})")


def check_id_replace(old: AnyNexthop, new: AnyNexthop) -> None:
    """What NLM_F_REPLACE of a nexthop id refuses (EINVAL). A gateway nexthop in a group may be replaced."""
    if isinstance(old, Nexthop) and isinstance(new, NexthopGroup):
        raise KernelError("EINVAL", f"Can not replace a nexthop with a nexthop group (id {new.id})")
    if isinstance(old, NexthopGroup) and isinstance(new, Nexthop):
        raise KernelError("EINVAL", f"Can not replace a nexthop group with a nexthop (id {new.id})")
    if isinstance(old, NexthopGroup) and isinstance(new, NexthopGroup):
        if old.type != new.type:
            raise KernelError(
                "EINVAL", f"Can not replace a nexthop group with one of a different type (group {new.id})"
            )
        if new.type == "resilient" and old.buckets != new.buckets:
            raise KernelError(
                "EINVAL", f"Can not change number of buckets of a resilient nexthop group (group {new.id})"
            )


def check_route(
    route: Route,
    links: Mapping[str, AnyLink],
    addresses: Iterable[Address],
    ids: Mapping[int, AnyNexthop],
    local_ips: set[IPv4Address] | None,
) -> None:
    """A route's nexthop (nhid or inline paths) and its ``src``. ``local_ips`` None: no prefsrc check."""
    addresses = tuple(addresses)
    if route.type == "unreachable":
        if route.nhid is not None or route.nexthops:
            raise KernelError("EINVAL", f"an unreachable route has no nexthop (route {route.dst})")
        return
    if route.nhid is not None and route.nexthops:
        raise KernelError("EINVAL", f"Nexthop specification and nexthop id are mutually exclusive ({route.dst})")
    if route.nhid is None and not route.nexthops:
        raise KernelError("ENODEV", f"No such device: route {route.dst} has neither nhid nor nexthops")
    if route.nhid is not None and route.nhid not in ids:
        raise KernelError("EINVAL", f"Nexthop id does not exist (route {route.dst} nhid {route.nhid})")
    for path in route.nexthops:
        link = find_dev(path.dev, links)
        device_route = not int(path.via)  # no gateway: ``dev DEV`` only (the egress gateway's encap routes)
        if not link.up or not (device_route or _on_link(path.via, path.dev, addresses)):
            raise KernelError(
                "ENETUNREACH", f"Nexthop has invalid gateway (route {route.dst} via {path.via} dev {path.dev})"
            )
        if not 1 <= path.weight <= WEIGHT_MAX:
            raise KernelError("EINVAL", f"Invalid value for weight (route {route.dst} via {path.via})")
    if route.src is not None and local_ips is not None and route.src not in local_ips:
        raise KernelError("EINVAL", f"Invalid prefsrc address (route {route.dst} src {route.src})")
