"""magw.daemons.egressgw_agent."""
