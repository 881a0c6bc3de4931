"""magw.daemons.egressgw."""
