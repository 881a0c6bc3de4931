"""magw.desired.node."""
