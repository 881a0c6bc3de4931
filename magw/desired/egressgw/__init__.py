"""The centralized SNAT egress gateway's pure planners (issue 15): bindings, datapath, keepalived inputs."""
