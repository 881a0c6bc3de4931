"""magw.daemons.globalnet."""
