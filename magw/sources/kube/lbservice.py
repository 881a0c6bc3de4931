"""A gateway's public address and port from the ``LoadBalancer`` Service that fronts it (docs/load-balancer.md).

``magw-gateway --source kube --public-service NAME`` reads Service NAME in magw's namespace. The cloud's
controller writes the load balancer's address in ``status.loadBalancer.ingress``: the first entry's ``ip``, or
its ``hostname`` resolved to an IPv4 address (AWS gives hostnames). The port: the Service's port named
``magw-<node>`` (design B: one Service, a port per gateway), else its only port (design A: a Service per
gateway). A Service without an address yet, or without such a port, is a reason to wait, not an error: the
gateway publishes nothing until the load balancer is ready.
"""

from __future__ import annotations

import asyncio
import socket
from ipaddress import IPv4Address, ip_address
from typing import Any

import attrs

Obj = dict[str, Any]


@attrs.frozen(kw_only=True)
class Fronted:
    """What the Service says: the address and port remote clusters reach this gateway at."""

    ip: IPv4Address
    port: int


def port_name(node: str) -> str:
    """The name of gateway ``node``'s port on a shared Service (Kubernetes port names: at most 15 characters,
    so a long node name is cut; two gateways whose names share their first 10 characters need a Service each)."""
    return f"magw-{node}"[:15].rstrip("-")


def _port(service: Obj, node: str) -> int | str:
    ports = [p for p in (service.get("spec") or {}).get("ports") or [] if isinstance(p, dict)]
    want = port_name(node)
    named = [p for p in ports if p.get("name") == want]
    chosen = named[0] if named else ports[0] if len(ports) == 1 else None
    if chosen is None:
        return f"has {len(ports)} ports and none named {want!r}"
    if str(chosen.get("protocol") or "TCP").upper() != "UDP":
        return f"port {chosen.get('name') or chosen.get('port')!r} is not UDP (the cable is)"
    port = chosen.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        return f"port {port!r} is not a port number"
    return port


def ingress(service: Obj) -> tuple[str, str] | str:
    """("ip"|"hostname", value) of the first load balancer ingress, or why there is none."""
    entries = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    first = entries[0] if entries and isinstance(entries[0], dict) else {}
    if first.get("ip"):
        return "ip", str(first["ip"])
    if first.get("hostname"):
        return "hostname", str(first["hostname"])
    return "has no load balancer address yet (status.loadBalancer.ingress is empty)"


def _ipv4(text: str) -> IPv4Address | None:
    try:
        addr = ip_address(text)
    except ValueError:
        return None
    return addr if isinstance(addr, IPv4Address) else None


def fronted(service: Obj, node: str, resolved: IPv4Address | None = None) -> Fronted | str:
    """The Service's address and ``node``'s port, or why not (``resolved``: its hostname, already resolved)."""
    name = (service.get("metadata") or {}).get("name", "?")
    spec_type = (service.get("spec") or {}).get("type")
    if spec_type != "LoadBalancer":
        return f"Service {name}: type is {spec_type!r}, not 'LoadBalancer'"
    port = _port(service, node)
    if isinstance(port, str):
        return f"Service {name}: {port}"
    where = ingress(service)
    if isinstance(where, str):
        return f"Service {name}: {where}"
    kind, value = where
    ip = _ipv4(value) if kind == "ip" else resolved
    if ip is None:
        what = "is not an IPv4 address" if kind == "ip" else "does not resolve to an IPv4 address"
        return f"Service {name}: load balancer {kind} {value!r} {what}"
    return Fronted(ip=ip, port=port)


async def resolve(hostname: str) -> IPv4Address | None:
    """The first IPv4 address of ``hostname`` (None when it has none)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(hostname, None, family=socket.AF_INET)
    except OSError:
        return None
    return next((a for a in (_ipv4(str(i[4][0])) for i in infos) if a is not None), None)
