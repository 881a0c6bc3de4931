"""The pure diff of a WireGuard device: the plan (magw.desired.cable) against what ``wg show`` reports."""

from __future__ import annotations

from collections.abc import Mapping

from magw.desired.cable.values import WgChanges, WgDevice, WgObserved, WgObservedPeer

# Seconds after which a session is dead (WireGuard's REJECT_AFTER_TIME): a roamed endpoint whose latest handshake
# is older than this no longer proves that the peer is there.
ROAM_FRESH = 180


def roamed(got: WgObservedPeer, want: str, placed: str | None, now: float) -> bool:
    """True when the device moved the peer away from the endpoint we set (``placed`` == ``want``) to the address
    the peer's own authenticated packets came from, and a handshake within ``ROAM_FRESH`` s says it works there."""
    return (
        placed == want
        and got.endpoint not in (None, want)
        and got.latest_handshake > 0
        and now - got.latest_handshake <= ROAM_FRESH
    )


def diff_wireguard(
    desired: WgDevice,
    observed: WgObserved,
    own_public_key: str,
    *,
    placed: Mapping[str, str] | None = None,
    now: float = 0.0,
) -> WgChanges:
    """What to set so ``observed`` holds ``desired`` with the private key whose public key is ``own_public_key``.

    A peer is corrected when its endpoint or allowed IPs differ (``wg set ... peer K endpoint E allowed-ips A``
    replaces the allowed IPs); peers that are not planned are removed.

    Roaming: ``placed`` maps a peer's public key to the endpoint ("IP:PORT") this device was last given for it
    (the driver remembers it; empty after a restart). A peer whose endpoint differs from the plan's only because it
    roamed (``roamed``: we set the planned endpoint, then the device followed the peer's packets, and the session is
    fresh at ``now``) is left alone. Behind a NAT that rewrites ports the peer's packets come from an address the
    NAT chose; setting the plan back on every replan would move the cable to a new NAT mapping each time and undo
    what WireGuard learnt, for nothing. A roamed peer whose session went stale is set back to the plan: the
    published address is the way back.
    """
    placed = placed or {}
    have = {p.public_key: p for p in observed.peers}
    upsert = []
    for peer in desired.peers:
        got = have.get(peer.public_key)
        want = f"{peer.endpoint}:{peer.port}"
        moved = got is not None and got.endpoint != want and not roamed(got, want, placed.get(peer.public_key), now)
        if got is None or moved or set(got.allowed_ips) != set(peer.allowed_ips):
            upsert.append(peer)
    planned = {p.public_key for p in desired.peers}
    remove = tuple(sorted(k for k in have if k not in planned))
    return WgChanges(
        private_key=observed.public_key != own_public_key,
        listen_port=None if observed.listen_port == desired.listen_port else desired.listen_port,
        upsert=tuple(upsert),
        remove=remove,
    )
