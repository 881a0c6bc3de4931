"""Reading a running lab: ``magw lab status``, gateway health as each cluster sees it, Globalnet allocations,
how flows spread over gateways, which gateways each flow crosses, conntrackd's sync."""
