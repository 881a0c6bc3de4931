"""The egress gateway's pure planners (docs/egress-datapath.md): bindings, datapath, keepalived inputs."""
