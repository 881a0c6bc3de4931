"""magw.lab.planes."""
