"""The Globalnet controller (magw-globalnet): IPAM and statuses, no datapath (docs/globalnet.md)."""
