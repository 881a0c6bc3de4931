"""``magw-gateway``: publish this gateway's Endpoint document (see magw.agent.gateway and docs/daemons.md)."""

from __future__ import annotations

import sys

from magw.agent.gateway import main

if __name__ == "__main__":
    sys.exit(main())
