"""``magw-route-agent``: program this node's plan (see magw.agent.route_agent and docs/daemons.md)."""

from __future__ import annotations

import sys

from magw.agent.route_agent import main

if __name__ == "__main__":
    sys.exit(main())
