"""The operator's view (docs/cli.md): what ``magw show``, ``diagnose``, ``verify``, ``benchmark``, ``gather`` and
``top`` compute, one sub-package each; ``magw.cli`` only parses flags and prints."""
