"""Small helpers with no dependency of their own, shared by every layer: asyncio waits (aio), no cyclic GC while
large acyclic structures are built (gcpause), and the logging set-up of the CLI and the daemons (logsetup)."""
