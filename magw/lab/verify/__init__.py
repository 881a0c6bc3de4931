"""magw.lab.verify."""
