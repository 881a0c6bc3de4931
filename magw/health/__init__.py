"""Gateway failure detection in the data plane: probes, the up/down state machine, the liveness set.

See docs/health.md. Pure parts (``params``, ``statemachine``, ``echoids``,
``targets``, ``book``, ``view``) take values and return values; ``probe``
(ICMP ping sockets), ``liveness`` (the ``ip magw_health`` nft table) and
``monitor`` (the asyncio loop that ties them together) do the I/O.
"""
