"""``magw show``: what a running clusterset is doing, read from the sources the daemons read (docs/show.md).

``inputs`` is what was read (snapshots, route agents' status files, the nodes' nexthop groups, Gateway
statuses, versions); ``lab_source``, ``broker_source`` and ``kube_source`` read it; ``connections`` and
``topics`` turn it into rows (pure); ``render`` prints rows as tables. ``magw top`` reads through the same code.
"""
