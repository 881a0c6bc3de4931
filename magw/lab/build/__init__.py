"""Building and removing a lab: namespaces, links, kube-proxy-like services, processes by PID, the state file,
the ownership marker, and the bounded waits until it carries traffic."""
