"""keepalived for the egress VIPs (issue 15): the config we render (pure), the process, its notify FIFO."""
