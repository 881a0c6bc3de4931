"""The daemons' logic: the route agent (programs a node) and the gateway (publishes its Endpoint).

The console scripts ``magw-route-agent`` and ``magw-gateway`` are thin entry points
in the top-level ``daemons`` package; everything they do lives here.
"""
