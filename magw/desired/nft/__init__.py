"""magw.desired.nft.values."""
