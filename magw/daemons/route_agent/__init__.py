"""``magw-route-agent``: keeps one node's whole plan in its kernel (and, hosted, OVN's rows). docs/daemons.md."""
