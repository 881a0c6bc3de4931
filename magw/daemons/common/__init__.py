"""What every daemon shares: flag validation with one-line errors (flags) and the runner (signals, metrics
endpoint, atomic status files)."""
