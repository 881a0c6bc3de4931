"""magw.snapshot.load."""
