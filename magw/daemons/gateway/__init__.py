"""magw.daemons.gateway."""
