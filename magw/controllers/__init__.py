"""Cluster-wide controllers that write statuses, not datapath (Globalnet IPAM, egress gateway VIPs)."""
