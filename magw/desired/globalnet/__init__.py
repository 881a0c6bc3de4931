"""magw.desired.globalnet.plan."""
