"""Programs that run inside pod namespaces (stdlib only, so they start fast): echo server and probes (traffic),
long-lived TCP connections (tcpkeep), continuous UDP flows with loss windows (losswatch). Kept free of imports here."""
