"""``magw-egress-agent``: one node's egress gateway HA (see magw.agent.egress_agent and docs/egress-gateway.md)."""

from __future__ import annotations

import sys

from magw.agent.egress_agent import main

if __name__ == "__main__":
    sys.exit(main())
