"""magw.daemons."""
