"""``magw-globalnet``: the Globalnet controller (see magw.controllers.globalnet.daemon and docs/daemons.md)."""

from __future__ import annotations

import sys

from magw.controllers.globalnet.daemon import main

if __name__ == "__main__":
    sys.exit(main())
