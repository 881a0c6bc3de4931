"""Proving a lab works: the connectivity matrix from inside pods, and the OVN paths with ``ovn-trace``."""
