"""The pure diff of a WireGuard device: the plan (magw.desired.cable) against what ``wg show`` reports."""

from __future__ import annotations

from magw.desired.cable.values import WgChanges, WgDevice, WgObserved


def diff_wireguard(desired: WgDevice, observed: WgObserved, own_public_key: str) -> WgChanges:
    """What to set so ``observed`` holds ``desired`` with the private key whose public key is ``own_public_key``.

    A peer is corrected when its endpoint or allowed IPs differ (``wg set ... peer K endpoint E allowed-ips A``
    replaces the allowed IPs); peers that are not planned are removed. A peer whose endpoint the device learnt
    from its packets (roaming) but that equals the plan's is left alone.
    """
    have = {p.public_key: p for p in observed.peers}
    upsert = []
    for peer in desired.peers:
        got = have.get(peer.public_key)
        want_endpoint = f"{peer.endpoint}:{peer.port}"
        if got is None or got.endpoint != want_endpoint or set(got.allowed_ips) != set(peer.allowed_ips):
            upsert.append(peer)
    planned = {p.public_key for p in desired.peers}
    remove = tuple(sorted(k for k in have if k not in planned))
    return WgChanges(
        private_key=observed.public_key != own_public_key,
        listen_port=None if observed.listen_port == desired.listen_port else desired.listen_port,
        upsert=tuple(upsert),
        remove=remove,
    )
