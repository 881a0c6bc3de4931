"""The WireGuard device a gateway should hold, as frozen values (the private key is not one of them: it never
leaves the node's key file, magw.drivers.wireguard.keys)."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs


@attrs.frozen(kw_only=True)
class WgPeer:
    """One remote gateway: its public key, where its device listens, and the one address it may send from."""

    public_key: str
    owner: str  # "<cluster>/<hostname>", for logs and statuses
    endpoint: IPv4Address
    port: int
    allowed_ips: tuple[IPv4Network, ...]

    @property
    def key(self) -> str:
        return self.public_key


def _by_key(peers: Iterable[WgPeer]) -> tuple[WgPeer, ...]:
    return tuple(sorted(peers, key=lambda p: p.public_key))


@attrs.frozen(kw_only=True)
class WgDevice:
    """``magw-wg``: listen port, MTU, this gateway's inner address, and the peers sorted by public key."""

    name: str
    listen_port: int
    mtu: int
    address: IPv4Interface
    peers: tuple[WgPeer, ...] = attrs.field(converter=_by_key)


@attrs.frozen(kw_only=True)
class WgObservedPeer:
    """A peer as the device reports it (``wg show DEV dump``)."""

    public_key: str
    endpoint: str | None  # "IP:PORT", None before the first packet of a peer without one
    allowed_ips: tuple[IPv4Network, ...]
    latest_handshake: int  # seconds since the epoch, 0: never
    rx_bytes: int
    tx_bytes: int


@attrs.frozen(kw_only=True)
class WgObserved:
    """What the device holds. Its private key is not kept: only the public key derived from it."""

    public_key: str | None  # None: no private key set
    listen_port: int
    peers: tuple[WgObservedPeer, ...]


@attrs.frozen(kw_only=True)
class WgChanges:
    """What ``wg set`` must do so the device holds the plan (magw.reconcile.cable)."""

    private_key: bool  # set the private key from the key file
    listen_port: int | None  # set it, or None: it is right
    upsert: tuple[WgPeer, ...]  # add or correct
    remove: tuple[str, ...]  # public keys of peers not planned

    @property
    def empty(self) -> bool:
        return not self.private_key and self.listen_port is None and not self.upsert and not self.remove
