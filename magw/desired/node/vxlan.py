"""The VXLAN meshes of a node: devices, VTEP addresses, and one neighbor + FDB entry per peer.

``vx-submariner`` (every node) joins the nodes of a cluster to their gateways.
``vxlan-tunnel`` (gateways only) joins the gateways of all clusters.

Each peer gets a static neighbor entry (VTEP IP -> MAC) and a unicast FDB entry
(MAC -> underlay IP). There is never an all-zero FDB entry: with one per peer,
the kernel floods every unknown-unicast frame to all of them, so N gateways
would each carry all the traffic (measured: 1002 packets on each of two gateways
for 1000 sent to one).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from ipaddress import IPv4Address

import attrs

from magw.desired.node.memo import PlanMemo
from magw.desired.node.roles import NodeRole
from magw.desired.state import Address, Fdb, Link, Neighbor, SortedObjects
from magw.model import Config, Snapshot
from magw.model.cable import WG_OVERHEAD, Cable, wg_inner_ip
from magw.model.vtep import (
    INTER_PORT,
    INTER_VNI,
    INTRA_PORT,
    INTRA_VNI,
    VX_SUBMARINER,
    VXLAN_OVERHEAD,
    VXLAN_TUNNEL,
    vtep_interface,
    vtep_ip,
    vtep_mac,
)


@attrs.frozen(kw_only=True)
class Peer:
    """A remote end of one of our VXLAN devices."""

    owner: str
    dev: str
    vtep: IPv4Address
    underlay: IPv4Address
    port: int | None = None  # where the peer's VXLAN is reached, when not the device's port (a load balancer's)


@attrs.frozen(kw_only=True)
class VxlanObjects:
    links: tuple[Link, ...]
    addresses: tuple[Address, ...]
    neighbors: tuple[Neighbor, ...]
    fdb: tuple[Fdb, ...]


def _node_peers(snapshot: Snapshot, role: NodeRole, memo: PlanMemo) -> tuple[Peer, ...]:
    """A gateway's peers on vx-submariner, one per other node: the last plan's Peer while the node's name and
    address are equal (a gateway of 5,000 nodes: building 5,000 VTEP addresses was most of a re-plan)."""
    last = memo.carried("node_peers")
    table: dict[tuple[str, int], Peer] = {}
    out = []
    me = role.node.name
    for n in snapshot.nodes:
        if n.name == me:
            continue
        key = (n.name, int(n.ip))
        peer = last.get(key)
        if peer is None:
            peer = Peer(owner=n.name, dev=VX_SUBMARINER, vtep=vtep_ip(n.ip, inter_cluster=False), underlay=n.ip)
        table[key] = peer
        out.append(peer)
    memo.carry("node_peers", table)
    return tuple(out)


def intra_peers(snapshot: Snapshot, role: NodeRole, memo: PlanMemo) -> tuple[Peer, ...]:
    """Peers on vx-submariner: a gateway node peers with every other local node, a worker with every local gateway.

    Every published gateway, not only the active ones, and a standby gateway (single-gateway mode) like an
    active one: the workers probe the standbys too (magw.health), so they know who can take over and see a
    failed gateway come back, and a standby must be able to answer them. Routes still go through the active
    gateways only.
    """
    if role.gateway or role.node.gateway:
        return _node_peers(snapshot, role, memo)
    return tuple(
        Peer(
            owner=e.hostname,
            dev=VX_SUBMARINER,
            vtep=vtep_ip(e.private_ip, inter_cluster=False),
            underlay=e.private_ip,
        )
        for e in snapshot.endpoints_of(snapshot.local_cluster)
        if e.hostname != role.node.name
    )


def inter_peers(snapshot: Snapshot, role: NodeRole) -> tuple[Peer, ...]:
    """Peers on vxlan-tunnel (gateways only): every gateway of every remote cluster (standbys too: magw.health
    probes them, to see them take over or come back; routes go through the active ones only).

    With ``cable: wireguard`` a peer's underlay is its inner address on ``magw-wg`` (magw.model.cable), so the
    VXLAN packets go through WireGuard; a gateway that has not published its key yet is no peer. With the VXLAN
    cable, a peer reached at its public IP on a port of its own (``public_port``: a load balancer's port for it,
    docs/load-balancer.md) gets that port in its FDB entry."""
    if not role.gateway:
        return ()
    wireguard = snapshot.config.cable is Cable.WIREGUARD
    return tuple(
        Peer(
            owner=f"{e.cluster}/{e.hostname}",
            dev=VXLAN_TUNNEL,
            vtep=vtep_ip(e.private_ip, inter_cluster=True),
            underlay=wg_inner_ip(e.private_ip) if wireguard else e.underlay_ip,
            # the device's own port reads back as none from the kernel: plan it so, or every sync replaces it
            port=None if wireguard or e.underlay_port == INTER_PORT else e.underlay_port,
        )
        for cluster in snapshot.remote_clusters
        for e in snapshot.endpoints_of(cluster.id)
        if e.cable_ready(snapshot.config.cable)
    )


def inter_mtu(config: Config) -> int:
    """``vxlan-tunnel``'s MTU: the underlay's less VXLAN's overhead, and less WireGuard's with that cable."""
    wireguard = WG_OVERHEAD if config.cable is Cable.WIREGUARD else 0
    return config.underlay_mtu - VXLAN_OVERHEAD - wireguard


def _links(snapshot: Snapshot, role: NodeRole) -> tuple[Link, ...]:
    mtu = snapshot.config.underlay_mtu - VXLAN_OVERHEAD
    intra = Link(
        name=VX_SUBMARINER,
        vni=INTRA_VNI,
        port=INTRA_PORT,
        mtu=mtu,
        mac=vtep_mac(vtep_ip(role.node.ip, inter_cluster=False)),
        local=role.node.ip,
        learning=False,
    )
    if role.endpoint is None:
        return (intra,)
    inter = Link(
        name=VXLAN_TUNNEL,
        vni=INTER_VNI,
        port=INTER_PORT,
        mtu=inter_mtu(snapshot.config),
        mac=vtep_mac(vtep_ip(role.endpoint.private_ip, inter_cluster=True)),
        local=None,
        learning=False,
    )
    return (intra, inter)


def _addresses(role: NodeRole) -> tuple[Address, ...]:
    intra = Address(dev=VX_SUBMARINER, address=vtep_interface(role.node.ip, inter_cluster=False))
    if role.endpoint is None:
        return (intra,)
    return (intra, Address(dev=VXLAN_TUNNEL, address=vtep_interface(role.endpoint.private_ip, inter_cluster=True)))


def check_unique_vteps(role: NodeRole, peers: Iterable[Peer]) -> None:
    """Raise ValueError when two peers (or a peer and this node) share a VTEP on one device."""
    # Keyed on ints: IPv4Address.__hash__ is Python code (5,000 peers: a tenth of a re-plan).
    seen: dict[tuple[str, int], str] = {
        (VX_SUBMARINER, int(vtep_ip(role.node.ip, inter_cluster=False))): role.node.name,
    }
    if role.endpoint is not None:
        seen[(VXLAN_TUNNEL, int(vtep_ip(role.endpoint.private_ip, inter_cluster=True)))] = role.node.name
    for peer in peers:
        other = seen.setdefault((peer.dev, int(peer.vtep)), peer.owner)
        if other != peer.owner:
            raise ValueError(
                f"endpoints/nodes: {other!r} and {peer.owner!r} map to the same VTEP {peer.vtep} on {peer.dev} "
                "(their IPs differ only in the first octet, or are equal)"
            )


_Entries = tuple[tuple[str, int], Neighbor, Fdb]  # (sort key, neighbor, FDB entry) of one peer


def _peer_entries(memo: PlanMemo, peers: tuple[Peer, ...]) -> list[_Entries]:
    """Each peer's neighbor and FDB entry with their sort key: the last plan's objects for a peer whose VTEP
    and underlay address did not change. Reused objects let the diff pass them over by identity
    (magw.reconcile.diff). Keyed on ints: ``IPv4Address.__hash__`` is Python code and was most of a
    5,000-peer plan in the profile."""
    last = memo.carried("peer_entries")
    table: dict[tuple[str, int, int, int], _Entries] = {}
    out = []
    for p in peers:
        vtep = int(p.vtep)
        key = (p.dev, vtep, int(p.underlay), p.port or 0)
        entries = last.get(key)
        if entries is None:
            mac = vtep_mac(p.vtep)
            fdb = Fdb(dev=p.dev, mac=mac, dst=p.underlay, port=p.port)
            entries = ((p.dev, vtep), Neighbor(dev=p.dev, ip=p.vtep, mac=mac), fdb)
        table[key] = entries
        out.append(entries)
    memo.carry("peer_entries", table)
    return out


def _sorted_entries(entries: list[_Entries]) -> tuple[SortedObjects, SortedObjects]:
    """The neighbors and the FDB entries, each in ``DesiredState``'s order, with one sort on precomputed
    keys: a neighbor sorts by (dev, VTEP), an FDB entry by (dev, MAC), and the MAC is the VTEP's bytes in
    fixed-width hex after a fixed prefix (``vtep_mac``), so both orders are the (dev, VTEP as int) order."""
    ordered = sorted(entries, key=operator.itemgetter(0))
    return SortedObjects(e[1] for e in ordered), SortedObjects(e[2] for e in ordered)


def plan_vxlan(snapshot: Snapshot, role: NodeRole, memo: PlanMemo) -> VxlanObjects:
    """Devices, addresses, neighbors and FDB entries of the node.

    Through ``memo``, a peer's two entries are the last plan's while its VTEP and underlay address are equal,
    and so are the sorted tuples while every entry is: on a gateway of a 5,000-node cluster one node joining
    makes two entries, not 10,000 (``benchmarks/node_scale.py``).
    """
    peers = (*intra_peers(snapshot, role, memo), *inter_peers(snapshot, role))
    check_unique_vteps(role, peers)
    entries = _peer_entries(memo, peers)
    neighbors, fdb = memo.get("entries", tuple(e[1] for e in entries), lambda: _sorted_entries(entries))
    return VxlanObjects(links=_links(snapshot, role), addresses=_addresses(role), neighbors=neighbors, fdb=fdb)
