"""The OVN Northbound plan: the rows magw owns in OVN-Kubernetes' logical topology (docs/ovn.md)."""
