"""The netlink driver: links, addresses, neighbors, FDB, nexthops, groups, routes and rules."""
