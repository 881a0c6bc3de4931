"""magw.lab.observe."""
