"""Which Service a VIP's port leads to (pure): the one rule for port conflicts, shared by every reader.

A VIP carries each (protocol, port) for one Service: the planner DNATs ``VIP:port`` to that Service's backends
(``magw.desired.egressgw.plan``). When two Services that use one VIP (``bindings.resolve``) have the same port,
the first by name ("namespace/name") keeps it and the other's port is ignored; a port that is neither TCP nor
UDP is ignored too. ``vip_ports`` says so in one line per problem; the same lines are what the route agent
logs (``route_agent.egress_problem``), what the controller writes into the VIP's status (``conflicts``), what
``magw egress show`` prints, and the controller's API refuses a binding that would add a ``PortClash``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from magw.desired.egressgw.bindings import Resolution
from magw.model.egressgw import EgressGateway
from magw.model.globalnet import Service

PROTOCOLS = ("tcp", "udp")


@attrs.frozen(kw_only=True)
class VipPort:
    """``VIP:port/protocol`` leads to ``service``'s ``target_port``."""

    protocol: str  # "tcp" or "udp"
    port: int
    target_port: int
    service: str  # "namespace/name"


@attrs.frozen(kw_only=True)
class PortClash:
    """``service`` has ``port/protocol`` on VIP ``vip`` too, but ``owner`` (first by name) keeps it."""

    vip: str
    protocol: str
    port: int
    service: str
    owner: str

    def describe(self) -> str:
        """The line without the VIP's name (the VIP's status says whose it is)."""
        return f"{self.port}/{self.protocol} of {self.service} is already {self.owner}'s; ignored"

    def __str__(self) -> str:
        return f"VIP {self.vip}: {self.describe()}"


@attrs.frozen(kw_only=True)
class VipPorts:
    """One VIP's ports in the planner's order, the clashes among its Services, and one line per problem."""

    ports: tuple[VipPort, ...] = ()
    clashes: tuple[PortClash, ...] = ()
    problems: tuple[str, ...] = ()


def vip_ports(vip: str, users: Iterable[str], services: Mapping[str, Service]) -> VipPorts:
    """The ports of VIP ``vip`` used by the Services ``users`` ("namespace/name", in the resolver's sorted
    order; ``services`` by that key, a name missing there is skipped), each Service's ports by (protocol, port)."""
    ports: list[VipPort] = []
    clashes: list[PortClash] = []
    problems: list[str] = []
    claimed: dict[tuple[str, int], str] = {}
    for name in users:
        svc = services.get(name)
        if svc is None:
            continue
        for port in sorted(svc.ports, key=lambda p: (p.protocol, p.port)):
            proto = port.protocol.lower()
            if proto not in PROTOCOLS:
                problems.append(f"VIP {vip}: {name} port {port.port}/{port.protocol} is not TCP or UDP")
                continue
            first = claimed.setdefault((proto, port.port), name)
            if first != name:
                clash = PortClash(vip=vip, protocol=proto, port=port.port, service=name, owner=first)
                clashes.append(clash)
                problems.append(str(clash))
                continue
            target = port.target_port or port.port
            ports.append(VipPort(protocol=proto, port=port.port, target_port=target, service=name))
    return VipPorts(ports=tuple(ports), clashes=tuple(clashes), problems=tuple(problems))


def services_by_name(services: Iterable[Service]) -> dict[str, Service]:
    return {f"{s.namespace}/{s.name}": s for s in services}


def port_clashes(egress: EgressGateway, resolution: Resolution, services: Iterable[Service]) -> tuple[PortClash, ...]:
    """Every VIP's clashes (VIPs by name), whichever node holds it."""
    by_name = services_by_name(services)
    return tuple(
        clash for v in egress.vips for clash in vip_ports(v.name, resolution.of(v.name).services, by_name).clashes
    )
