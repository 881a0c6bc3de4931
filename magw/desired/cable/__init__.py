"""The inter-cluster cable's own piece of a gateway's plan: the WireGuard device and its peers."""
