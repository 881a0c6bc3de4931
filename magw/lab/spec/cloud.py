"""The topology's ``load_balancer:`` section: the lab emulates a cloud in front of each cluster's gateways.

``load_balancer: {health_interval: 5, unhealthy_threshold: 2, healthy_threshold: 2, peered: false}`` (each key optional;
``load_balancer: true`` takes every default; ``magw lab up --load-balancer`` the same). Each cluster then gets a
``cloud`` namespace on its underlay and on the WAN which does what a cloud load balancer and NAT gateway do
(docs/load-balancer.md, design B: one public IP per cluster, one port per gateway):

- it holds the cluster's one public address, ``198.18.0.(200 + cluster index)``; the gateways get no WAN link
  and no public address of their own, and reach the WAN through it;
- a listener per gateway: UDP to (public IP, ``45000 + k``) is DNATed to gateway ``k``'s private (underlay)
  address and the cable's port, while the cloud's health check finds that gateway healthy;
- everything leaving is SNATed to the cloud's NAT address, ``198.18.0.(210 + cluster index)``, UDP and TCP with
  port rewriting (20000-40000, random), as a cloud NAT gateway beside the load balancer does: another address than
  the load balancer's, which the gateways publish as ``natSourceIP`` so remote gateways admit it;
- a health check of its own (``magw.lab.payload.cloudlb``): a TCP connect to each gateway's metrics port every
  ``health_interval`` s; a backend leaves its listener after ``unhealthy_threshold`` failures in a row and comes
  back after ``healthy_threshold`` successes, as clouds' network load balancers do.

Each gateway publishes the public address and its port (``--public-ip``, ``--public-port``), so remote clusters
keep one nexthop per gateway and magw's probes, not the cloud's health check, move flows off a dead gateway.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs

from magw.lab.spec.parser import Parser

LB_KEYS = frozenset({"health_interval", "unhealthy_threshold", "healthy_threshold", "peered"})
PUBLIC_HOST_BASE = 200  # cluster i's public address: the WAN's .(200 + i) (gateways' own WAN IPs stay below .100)
NAT_HOST_BASE = 210  # cluster i's NAT address (what leaving packets carry): the WAN's .(210 + i)
CLOUD_UNDERLAY_HOST = 254  # the cloud's address on the cluster's underlay (the gateways' route to the WAN)
PUBLIC_PORT_BASE = 45000  # gateway k's listener: public port 45000 + k
NAT_PORTS = (20000, 40000)  # the source ports the cloud's NAT rewrites to (below the listeners' 45001-45008)
MAX_INTERVAL = 60.0
DEFAULT_INTERVAL = 5.0


@attrs.frozen(kw_only=True)
class LoadBalancerSpec:
    """The cloud's health check. Clouds' network load balancers check every 5-30 s and act after 2-3 results."""

    health_interval: float = DEFAULT_INTERVAL
    unhealthy_threshold: int = 2
    healthy_threshold: int = 2
    # The clouds' networks are peered (one VPC, or peered VPCs): each routes the others' underlays over the WAN
    # without NAT, so gateways of different clusters reach each other at their private addresses too, and NAT
    # discovery (magw.health.natdisc) finds that path.
    peered: bool = False

    def to_doc(self) -> dict[str, Any]:
        return attrs.asdict(self)


def parse_load_balancer(p: Parser, value: object, path: str = "load_balancer") -> LoadBalancerSpec | None:
    """``false``/absent: no cloud; ``true``: the defaults; a mapping: the keys it sets."""
    if value is None or value is False:
        return None
    if value is True:
        return LoadBalancerSpec()
    doc = p.mapping(value, path, LB_KEYS)
    interval = doc.get("health_interval", DEFAULT_INTERVAL)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0.5 <= interval <= MAX_INTERVAL:
        raise p.fail(f"{path}.health_interval", f"must be seconds from 0.5 to {MAX_INTERVAL:g}, got {interval!r}")
    return LoadBalancerSpec(
        health_interval=float(interval),
        unhealthy_threshold=p.integer(doc.get("unhealthy_threshold", 2), f"{path}.unhealthy_threshold", 1, 10),
        healthy_threshold=p.integer(doc.get("healthy_threshold", 2), f"{path}.healthy_threshold", 1, 10),
        peered=p.boolean(doc.get("peered", False), f"{path}.peered"),
    )


@attrs.frozen(kw_only=True)
class CloudLayout:
    """A cluster's cloud: its namespace, public address (on the WAN) and address on the cluster's underlay."""

    namespace: str
    public_ip: IPv4Address  # the load balancer's
    nat_ip: IPv4Address  # the NAT gateway's: the source of everything leaving
    underlay_ip: IPv4Address


def cloud_layout(namespace: str, index: int, wan: IPv4Network, underlay: IPv4Network) -> CloudLayout:
    return CloudLayout(
        namespace=namespace,
        public_ip=wan.network_address + PUBLIC_HOST_BASE + index,
        nat_ip=wan.network_address + NAT_HOST_BASE + index,
        underlay_ip=underlay.network_address + CLOUD_UNDERLAY_HOST,
    )


def public_port(gateway_index: int) -> int:
    """The listener port of a cluster's gateway ``k`` (1-based) on the cluster's public address."""
    return PUBLIC_PORT_BASE + gateway_index
