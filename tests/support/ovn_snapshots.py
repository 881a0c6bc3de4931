"""Snapshots of an OVN-Kubernetes cluster ``east`` and its remote clusters, for the OVN planner and trace tests."""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network

from magw.model import Cluster, Config, Endpoint, Health, Node, Snapshot

EAST_PODS = "10.128.0.0/14"
EAST_SERVICES = "10.96.0.0/16"
WEST_PODS = "10.200.0.0/16"
WEST_SERVICES = "10.201.0.0/16"
NORTH_PODS = "10.210.0.0/16"
NORTH_SERVICES = "10.211.0.0/16"


def _nets(*cidrs: str) -> tuple[IPv4Network, ...]:
    return tuple(IPv4Network(c) for c in cidrs)


def east_snapshot(
    gateways: Sequence[str] = ("gw1", "gw2", "gw3"),
    workers: Sequence[str] = ("node1", "node2"),
    *,
    multi_active: bool = True,
    down: Sequence[str] = (),
    reach: Sequence[tuple[str, Sequence[str]]] = (),
    globalnet: bool = False,
    north: bool = False,
) -> Snapshot:
    """East (OVN) with ``gateways`` published, west (and north) remote with one gateway each."""
    clusters = [
        Cluster(
            id="east",
            pod_cidrs=_nets(EAST_PODS),
            service_cidrs=_nets(EAST_SERVICES),
            global_cidrs=_nets("242.0.0.0/16") if globalnet else (),
        ),
        Cluster(
            id="west",
            pod_cidrs=_nets(EAST_PODS if globalnet else WEST_PODS),
            service_cidrs=_nets(EAST_SERVICES if globalnet else WEST_SERVICES),
            global_cidrs=_nets("242.1.0.0/16") if globalnet else (),
        ),
    ]
    if north:
        clusters.append(
            Cluster(
                id="north",
                pod_cidrs=_nets(EAST_PODS if globalnet else NORTH_PODS),
                service_cidrs=_nets(EAST_SERVICES if globalnet else NORTH_SERVICES),
                global_cidrs=_nets("242.2.0.0/16") if globalnet else (),
            )
        )
    names = [*workers, *gateways]
    nodes = [
        Node(name=n, ip=IPv4Address(f"172.18.0.{i + 2}"), cni_ip=IPv4Address(f"10.128.{i}.2"), gateway=n in gateways)
        for i, n in enumerate(names)
    ]
    endpoints = [Endpoint(cluster="east", hostname=n.name, private_ip=n.ip) for n in nodes if n.name in gateways] + [
        Endpoint(cluster="west", hostname="west-gw1", private_ip=IPv4Address("172.19.0.2"))
    ]
    if north:
        endpoints.append(Endpoint(cluster="north", hostname="north-gw1", private_ip=IPv4Address("172.20.0.2")))
    return Snapshot(
        local_cluster="east",
        clusters=clusters,
        nodes=nodes,
        endpoints=endpoints,
        config=Config(multi_active=multi_active),
        health=Health(down=frozenset(down), reach=tuple((g, frozenset(c)) for g, c in reach)),
    )


def chassis_of(hosts: Sequence[str]) -> dict[str, str]:
    """SB chassis names as tests/ovn_fixture.build_ovnk makes them."""
    return {h: f"chassis-{h}" for h in hosts}
