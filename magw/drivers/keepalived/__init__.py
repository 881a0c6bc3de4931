"""keepalived for the egress VIPs (docs/egress-ha.md): the config we render (pure), the process, its notify FIFO."""
