"""Bring ``ovn-k8s-sub0`` up in the current namespace once ovs-vswitchd has made it.

ovs-vswitchd creates an internal port's device (a tap with the userspace datapath) down; the address and the
table 149 routes of magw.desired.ovn.node need it up (the kernel refuses a gateway on a down link). The device
appears asynchronously, so the wait is bounded.
"""

from __future__ import annotations

import time

from pyroute2.iproute import IPRoute  # not the package: magw.cli.pyroute2_light

WAIT = 5.0


def link_up(name: str, *, wait: float = WAIT) -> bool:
    """Set ``name`` up; True when it changed something. OSError when the device does not appear in ``wait`` s."""
    deadline = time.monotonic() + wait
    with IPRoute() as ipr:
        while True:
            index = ipr.link_lookup(ifname=name)
            if index:
                break
            if time.monotonic() >= deadline:
                raise OSError(f"device {name} did not appear within {wait:g} s")
            time.sleep(0.05)
        (link,) = ipr.get_links(index[0])
        if link["flags"] & 1:  # IFF_UP
            return False
        ipr.link("set", index=index[0], state="up")
        return True
