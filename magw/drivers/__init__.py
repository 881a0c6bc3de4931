"""Drivers carry a ChangeSet out: netlink (pyroute2 + our nexthop messages), nftables, fakes."""
