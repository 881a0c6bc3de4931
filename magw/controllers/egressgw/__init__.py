"""The egress gateway's controller (docs/egress-gateway.md): bindings, statuses and the seed's HTTP API; no datapath.

``ops`` is pure (model and the binding resolver only); ``controller`` writes statuses and VIPs into the
broker; ``api`` is the seed's HTTP API over them (docs/egress-gateway.md).
"""
