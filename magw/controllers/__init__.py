"""Cluster-wide controllers that write statuses, not datapath (Globalnet IPAM; later egress VIPs)."""
