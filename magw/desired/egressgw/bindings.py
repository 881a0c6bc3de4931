"""Which Services and pods use which egress VIP (pure): the seed's binding rules, resolved.

- A VIP bound to a namespace (shared) is used by every Service of that namespace.
- A VIP bound to a namespace and a Service (exclusive) is that Service's alone, and it wins over a shared
  VIP of the Service's namespace: the more specific binding is the one a user asked for last.
- A pod uses a VIP when it is a Running, non-host-network backend with an IP of a Service that uses it.

Conflicts (a namespace shared-bound by two VIPs, a Service exclusive-bound by two, a pod behind two
Services that use different VIPs) are not resolved silently: the first VIP by name wins, so every node
computes the same answer, and each conflict is reported in one line. The controller's API refuses the
bindings that would create the first two; the third comes from pod labels and can only be reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address

import attrs

from magw.model.egressgw import EgressGateway, EgressVIP
from magw.model.globalnet import Pod, PodPhase, Service


@attrs.frozen(kw_only=True)
class VipUsers:
    """The users of one VIP: Services as "namespace/name", and pod IPs, both sorted."""

    services: tuple[str, ...] = ()
    pods: tuple[IPv4Address, ...] = ()


@attrs.frozen(kw_only=True)
class Resolution:
    """Per VIP name, its users (every VIP has an entry, perhaps empty); ``conflicts``: one line each."""

    users: tuple[tuple[str, VipUsers], ...]
    conflicts: tuple[str, ...] = ()

    def of(self, vip_name: str) -> VipUsers:
        return dict(self.users).get(vip_name, VipUsers())


def _backends(service: Service, pods: Iterable[Pod]) -> set[IPv4Address]:
    if service.selector is None:
        return set(service.endpoint_addresses)
    wanted = service.selector
    found: set[IPv4Address] = set()
    for pod in pods:
        if pod.ip is None or pod.host_network or pod.phase is not PodPhase.RUNNING:
            continue
        labels = pod.label_map
        if pod.namespace == service.namespace and all(labels.get(k) == v for k, v in wanted):
            found.add(pod.ip)
    return found


def _claims(vips: Iterable[EgressVIP], conflicts: list[str]) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """(namespace -> VIP name, (namespace, service) -> VIP name), first VIP by name winning."""
    claims: dict[tuple[str, str], str] = {}  # (namespace, service or "") -> VIP name
    for vip in sorted(vips, key=lambda v: v.name):
        for b in vip.bindings:
            key = (b.namespace, b.service)
            if key in claims:
                conflicts.append(f"{b} is bound to VIPs {claims[key]} and {vip.name}; {claims[key]} is used")
            else:
                claims[key] = vip.name
    shared = {ns: name for (ns, svc), name in claims.items() if not svc}
    exclusive = {key: name for key, name in claims.items() if key[1]}
    return shared, exclusive


def resolve(egress: EgressGateway, services: Iterable[Service], pods: Iterable[Pod]) -> Resolution:
    conflicts: list[str] = []
    shared, exclusive = _claims(egress.vips, conflicts)
    pod_list = list(pods)
    by_vip: dict[str, tuple[set[str], set[IPv4Address]]] = {v.name: (set(), set()) for v in egress.vips}
    pod_vip: dict[IPv4Address, str] = {}
    for svc in sorted(services, key=lambda s: (s.namespace, s.name)):
        vip_name = exclusive.get((svc.namespace, svc.name)) or shared.get(svc.namespace)
        if vip_name is None:
            continue
        by_vip[vip_name][0].add(f"{svc.namespace}/{svc.name}")
        for ip in sorted(_backends(svc, pod_list)):
            other = pod_vip.setdefault(ip, vip_name)
            if other != vip_name:
                first, second = sorted((other, vip_name))
                conflicts.append(f"pod {ip} is behind Services of VIPs {first} and {second}; {first} is used")
                pod_vip[ip] = first
    for ip, vip_name in pod_vip.items():
        by_vip[vip_name][1].add(ip)
    users = tuple(
        (name, VipUsers(services=tuple(sorted(s)), pods=tuple(sorted(p)))) for name, (s, p) in sorted(by_vip.items())
    )
    return Resolution(users=users, conflicts=tuple(sorted(set(conflicts))))


def service_backends(service: Service, pods: Iterable[Pod]) -> tuple[IPv4Address, ...]:
    """A Service's backend pod IPs, sorted, by the same rule ``resolve`` uses (the egress planner's DNAT targets)."""
    return tuple(sorted(_backends(service, pods)))
