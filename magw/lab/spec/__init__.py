"""magw.lab.spec."""
