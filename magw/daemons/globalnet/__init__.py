"""``magw-globalnet``: the single-replica Globalnet controller's process (lease, passes, signals); the pass
itself is ``magw.controllers.globalnet``. docs/globalnet.md."""
