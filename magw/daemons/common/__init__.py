"""magw.daemons.common."""
