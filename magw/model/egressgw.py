"""Centralized SNAT egress gateway values (docs/egress-gateway.md, seed centralized-snat-gateway.zh.md): pure.

An ``EgressVIP`` is one virtual IP held by one of its candidate nodes at a time (keepalived, one VRRP
instance per VIP). The pods behind the Services bound to it leave the cluster through its holder, SNATed
to the VIP; outside clients reach those Services through the VIP.

Binding, as in the seed:

- ``EgressBinding(namespace="shop")`` (``service == ""``): the VIP is *shared* by every Service of the
  namespace;
- ``EgressBinding(namespace="shop", service="web")``: the VIP is that Service's alone (*exclusive*).

The seed keeps this in annotations of helper Services; here it is an object of its own (a CRD in
Kubernetes, a document in the file broker). Its status is kept apart (``EgressVIPStatus``), written by the
controller and the agents, as Kubernetes' spec/status split does.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network

import attrs

EGRESS_VIP = "EgressVIP"

# VRRP's virtual router id is one byte; 0 is reserved (RFC 5798 5.2.3).
MIN_VRID = 1
MAX_VRID = 255
# VRRPv3 carries advert_int in centiseconds (RFC 5798 5.2.7): 0.01 s .. 40.95 s.
MIN_ADVERT_INT = 0.01
MAX_ADVERT_INT = 40.95
DEFAULT_ADVERT_INT = 1.0


@attrs.frozen(order=True)
class EgressBinding:
    """One binding of a VIP: a namespace (shared by its Services) or one Service of it (exclusive)."""

    namespace: str
    service: str = ""

    @property
    def shared(self) -> bool:
        return not self.service

    def __str__(self) -> str:
        return f"namespace {self.namespace}" if self.shared else f"service {self.namespace}/{self.service}"


def _bindings(value: Iterable[EgressBinding]) -> tuple[EgressBinding, ...]:
    return tuple(sorted(set(value)))


@attrs.frozen(kw_only=True)
class EgressVIP:
    """One VIP. ``candidates`` are node names in priority order (the first is the preferred holder).

    ``vrid`` is its VRRP virtual router id, unique among the VIPs of one underlay L2.
    """

    name: str
    vip: IPv4Address
    vrid: int
    candidates: tuple[str, ...]
    bindings: tuple[EgressBinding, ...] = attrs.field(default=(), converter=_bindings)


def _sorted_names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(value))


@attrs.frozen(kw_only=True)
class EgressVIPStatus:
    """Who holds a VIP and who uses it.

    ``holder`` is the node that is VRRP master ("" when none is known), ``since`` when it became so (RFC
    3339 UTC), ``services`` the Services ("namespace/name") whose pods leave through the VIP, sorted.
    ``conflicts``: the ports two of those Services claim, one line each (the first by name keeps the port, the
    other's is ignored: ``magw.desired.egressgw.ports``), sorted.
    """

    holder: str = ""
    since: str = ""
    services: tuple[str, ...] = attrs.field(default=(), converter=_sorted_names)
    conflicts: tuple[str, ...] = attrs.field(default=(), converter=_sorted_names)


@attrs.frozen(kw_only=True)
class EgressConfig:
    """Cluster-wide settings. ``vip_ranges``: every VIP must lie in one of them (empty refuses all VIPs).

    ``advert_int``: keepalived's VRRP advertisement interval in seconds (VRRPv3, so below one second is
    allowed). ``conntrack_sync``: run conntrackd between a VIP's candidates so established flows survive.
    """

    vip_ranges: tuple[IPv4Network, ...] = ()
    advert_int: float = DEFAULT_ADVERT_INT
    conntrack_sync: bool = True


def _by_name(value: Iterable[EgressVIP]) -> tuple[EgressVIP, ...]:
    return tuple(sorted(value, key=lambda v: v.name))


def _status_items(value: Iterable[tuple[str, EgressVIPStatus]]) -> tuple[tuple[str, EgressVIPStatus], ...]:
    return tuple(sorted(value, key=lambda p: p[0]))


@attrs.frozen(kw_only=True)
class EgressGateway:
    """Everything the egress gateway reads besides the workloads: its config, its VIPs, their statuses."""

    config: EgressConfig = EgressConfig()
    vips: tuple[EgressVIP, ...] = attrs.field(default=(), converter=_by_name)
    statuses: tuple[tuple[str, EgressVIPStatus], ...] = attrs.field(default=(), converter=_status_items)

    def vip(self, name: str) -> EgressVIP | None:
        for v in self.vips:
            if v.name == name:
                return v
        return None

    def status_of(self, name: str) -> EgressVIPStatus | None:
        for n, s in self.statuses:
            if n == name:
                return s
        return None
