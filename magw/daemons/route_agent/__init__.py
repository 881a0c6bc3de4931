"""magw.daemons.route_agent."""
