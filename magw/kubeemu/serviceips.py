"""ClusterIP allocation (``--service-ip-range CIDR``): a Service created without ``spec.clusterIP`` gets the first free
address of the range, as a real API server allocates one from its service CIDR; ``None`` (headless) and
``ExternalName`` Services get none, and a given address is kept (422 when another Service has it). Without a range
nothing is allocated (the emulator's default: the lab's Services come with their addresses)."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Network
from typing import Any

from magw.kubeemu.errors import ApiError


def allocate(body: Any, taken: Iterable[str], pool: IPv4Network) -> None:
    """Give ``body`` (a Service being created) a ClusterIP of ``pool`` not in ``taken``, in place."""
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        return
    spec = body["spec"]
    used = set(taken)
    given = spec.get("clusterIP")
    if given not in (None, ""):
        spec.setdefault("clusterIPs", [given])
        if given != "None" and given in used:
            raise ApiError(422, "Invalid", f'Service "{body.get("metadata", {}).get("name")}" is invalid: '
                                           f"spec.clusterIPs: Invalid value: {given}: provided IP is already "
                                           "allocated")  # fmt: skip
        return
    if spec.get("type") == "ExternalName":
        return
    for ip in pool.hosts():
        if str(ip) not in used:
            spec["clusterIP"] = str(ip)
            spec["clusterIPs"] = [str(ip)]
            return
    raise ApiError(500, "InternalError", f"Internal error occurred: failed to allocate a serviceIP: {pool} is full")


def cluster_ips(services: Iterable[dict[str, Any]]) -> set[str]:
    return {str(s.get("spec", {}).get("clusterIP")) for s in services if isinstance(s.get("spec"), dict)}


def parse_range(value: str) -> IPv4Network:
    net = IPv4Network(value, strict=False)
    if net.num_addresses < 4:
        raise ValueError(f"{value}: too small a range")
    return net

