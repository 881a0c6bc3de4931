"""``magw-egress-agent``: one node's egress gateway HA: keepalived and conntrackd kept running, VRRP events
to master state, a status endpoint. docs/egress-ha.md."""
