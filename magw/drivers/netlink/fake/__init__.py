"""magw.drivers.netlink.fake."""
