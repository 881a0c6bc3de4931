"""conntrackd for the egress VIPs (issue 15): FTFW sync between a node's VIP candidates; config and process."""
