"""``magw-egress``: the egress gateway controller (see magw.controllers.egress.daemon and docs/egress-gateway.md)."""

from __future__ import annotations

import sys

from magw.controllers.egress.daemon import main

if __name__ == "__main__":
    sys.exit(main())
