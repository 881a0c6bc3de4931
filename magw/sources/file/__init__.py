"""magw.sources.file."""
