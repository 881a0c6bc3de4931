"""Pure planners: (snapshot, node) -> DesiredState. No I/O, no clock, no randomness."""
