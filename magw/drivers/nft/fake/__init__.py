"""``FakeNft``: nftables tables in memory with the nft driver's API, refusing what nft 1.0.6 and the kernel
refuse (the same contract suite runs against it and the real driver). docs/diff-and-fakes.md."""
