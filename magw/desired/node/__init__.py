"""The routing planner of one node: roles, paths to each remote cluster, VXLAN meshes, nexthop ids, the memo
of the last plan, and the strategy fallback. Pure."""
