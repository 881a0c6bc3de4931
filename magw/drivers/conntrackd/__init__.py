"""conntrackd for the egress VIPs (docs/egress-ha.md): FTFW sync between a node's VIP candidates; config and process."""
