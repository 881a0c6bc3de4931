"""magw.lab.build."""
