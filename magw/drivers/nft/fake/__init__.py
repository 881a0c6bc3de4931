"""magw.drivers.nft.fake."""
