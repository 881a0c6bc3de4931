"""The control planes a lab runs: the file broker's documents and the real daemons (daemons), the API server
emulators (kube*), OVN's servers and topology (ovn*), the egress gateway's daemons (egressgw*), Globalnet's objects."""
