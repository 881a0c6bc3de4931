"""The nftables driver: libnftables JSON through our own ctypes binding (see docs/nft-driver.md)."""

from magw.drivers.netns import NoSuchNetns
from magw.drivers.nft.driver import NftDriver, transaction
from magw.drivers.nft.libnft import Nft, NftError

__all__ = ["Nft", "NftDriver", "NftError", "NoSuchNetns", "transaction"]
