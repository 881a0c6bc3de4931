"""``magw-egress``: the egress gateway controller's process and the seed's HTTP API over EgressVIPs; the
binding rules and statuses are ``magw.controllers.egressgw``. docs/egress-gateway.md."""
