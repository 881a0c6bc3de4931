"""Open vSwitch on the node: the OVN mode's ``br-submariner`` bridge (magw.drivers.ovs.bridge)."""
