"""The nftables driver: libnftables JSON through Debian's python3-nftables binding (see docs/nft-driver.md)."""

from magw.drivers.netns import NoSuchNetns
from magw.drivers.nft.driver import NftDriver, transaction
from magw.drivers.nft.libnft import Nft, NftError

__all__ = ["Nft", "NftDriver", "NftError", "NoSuchNetns", "transaction"]
