"""magw.lab.scenarios."""
