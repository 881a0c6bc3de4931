"""nftables values (one table of ours), the rule expression builder, nft text, and the node's ``ip magw`` table
plan. Pure."""
