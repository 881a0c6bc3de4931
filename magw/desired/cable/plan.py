"""``plan_wireguard(snapshot, role)``: the WireGuard device of a gateway with ``cable: wireguard``. Pure.

One device per gateway, one peer per remote gateway that publishes a public key (standbys too: the probes
reach them, to see them take over). A peer's allowed IPs are its inner /32 only, so the device hands the
VXLAN packets ``vxlan-tunnel`` sends to that address to that peer, and accepts from that peer only packets from
it (magw.model.cable). Workers and VXLAN clustersets get None.
"""

from __future__ import annotations

from magw.desired.cable.values import WgDevice, WgPeer
from magw.desired.node.roles import NodeRole
from magw.model import Snapshot
from magw.model.cable import WG_DEVICE, WG_OVERHEAD, Cable, wg_allowed, wg_inner_interface


def wireguard_mtu(underlay_mtu: int) -> int:
    """The device's MTU: the underlay's less WireGuard's IPv4 overhead."""
    return underlay_mtu - WG_OVERHEAD


def plan_wireguard(snapshot: Snapshot, role: NodeRole) -> WgDevice | None:
    """The gateway's ``magw-wg``, or None (a worker, or a VXLAN cable)."""
    config = snapshot.config
    if config.cable is not Cable.WIREGUARD or role.endpoint is None:
        return None
    peers = [
        WgPeer(
            public_key=e.public_key,
            owner=f"{e.cluster}/{e.hostname}",
            endpoint=e.underlay_ip,
            # a load balancer's port for this gateway on its public IP (docs/load-balancer.md), else the cable's
            port=e.underlay_port if e.underlay_port is not None else config.wireguard_port,
            allowed_ips=(wg_allowed(e.private_ip),),
        )
        for cluster in snapshot.remote_clusters
        for e in snapshot.endpoints_of(cluster.id)
        if e.public_key is not None and e.cable_ready(Cable.WIREGUARD)
    ]
    _check_unique_keys(role, peers)
    return WgDevice(
        name=WG_DEVICE,
        listen_port=config.wireguard_port,
        mtu=wireguard_mtu(config.underlay_mtu),
        address=wg_inner_interface(role.endpoint.private_ip),
        peers=tuple(peers),
    )


def _check_unique_keys(role: NodeRole, peers: list[WgPeer]) -> None:
    """ValueError when two gateways publish one public key: WireGuard knows a peer by its key alone."""
    own = role.endpoint.public_key if role.endpoint is not None else None
    seen: dict[str, str] = (
        {} if own is None else {own: f"{role.endpoint.cluster}/{role.endpoint.hostname}" if role.endpoint else ""}
    )
    for peer in peers:
        other = seen.setdefault(peer.public_key, peer.owner)
        if other != peer.owner:
            raise ValueError(f"endpoints: {other!r} and {peer.owner!r} publish the same WireGuard public key")
