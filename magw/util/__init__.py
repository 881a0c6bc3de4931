"""magw.util."""
