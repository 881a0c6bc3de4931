"""magw.lab.payload."""
