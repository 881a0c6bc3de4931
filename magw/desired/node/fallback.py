"""Which spreading strategy a node can actually use, given what its kernel supports.

Pure: the caller detects the capabilities (``magw.drivers.netlink.capabilities``)
and logs a fallback (event ``capabilities.strategy_fallback``).

Order of preference: resilient -> group -> multipath. A kernel without resilient
groups (< 5.13) gets plain groups; a kernel without nexthop objects (< 5.3) gets
classic multipath routes. A fallback never goes up: asking for ``group`` on a
kernel with resilient groups gives ``group``.
"""

from __future__ import annotations

from magw.model import Strategy


def effective_strategy(requested: Strategy, *, nexthops: bool, resilient: bool) -> Strategy:
    """The best strategy not above ``requested`` that the kernel supports."""
    if requested is Strategy.RESILIENT and nexthops and resilient:
        return Strategy.RESILIENT
    if requested in (Strategy.RESILIENT, Strategy.GROUP) and nexthops:
        return Strategy.GROUP
    return Strategy.MULTIPATH
