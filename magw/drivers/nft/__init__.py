"""The nftables driver: libnftables JSON through our own ctypes binding (see docs/nft-driver.md)."""

from magw.drivers.nft.driver import NftDriver, transaction
from magw.drivers.nft.libnft import Nft, NftError
from magw.drivers.nft.nsenter import NoSuchNetns

__all__ = ["Nft", "NftDriver", "NftError", "NoSuchNetns", "transaction"]
