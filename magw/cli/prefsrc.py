"""Routes the kernel will refuse for their ``src``, found before anything is applied (``magw apply --dry-run``).

The kernel refuses a route whose preferred source is not an address of the namespace
(``EINVAL``, "Invalid prefsrc address"). A node's routes to remote clusters carry the node's
``cni_ip`` as ``src``; the CNI puts that address on its bridge (``cni0``) and magw never
creates it. A dry run reads the namespace's IPv4 addresses and names each such route
(docs/commands.md, "Dry run"), so a clean dry run is not followed by routes that fail.

Such a route can be neither in the kernel already (removing an address flushes the routes
that use it as their source) nor created, so every one named here is a change that would fail.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from ipaddress import IPv4Address

from magw.desired.render import object_line
from magw.desired.state import DesiredState, Route
from magw.drivers.netlink.session import open_iproute
from magw.drivers.netns import run_in_netns


def sourceless_routes(desired: DesiredState, local: Iterable[IPv4Address]) -> list[Route]:
    """The routes of ``desired`` whose ``src`` is neither in ``local`` nor an address the plan itself adds."""
    have = {*local, *(a.address.ip for a in desired.addresses)}
    return [r for r in desired.routes if r.src is not None and r.src not in have]


def prefsrc_line(route: Route) -> str:
    """The one dry-run line for a route that would fail for its ``src``."""
    return (
        f"dry run: would fail: {object_line('routes', route)}: {route.src} is not an address in this namespace"
        " (kernel: Invalid prefsrc address; it is the node's cni_ip, which belongs on its CNI bridge, cni0)"
    )


def _addresses() -> list[IPv4Address]:
    """This thread's namespace's IPv4 addresses: one RTM_GETADDR dump (the socket the driver uses, not the
    pyroute2 package's: magw.cli.pyroute2_light)."""
    ipr = open_iproute(None)
    try:
        return [IPv4Address(m.get("IFA_LOCAL") or m.get("IFA_ADDRESS")) for m in ipr.get_addr(family=socket.AF_INET)]
    finally:
        ipr.close()


def prefsrc_lines(desired: DesiredState, netns: str | None) -> list[str]:
    """One line per route of ``desired`` that ``netns`` (None: the current one) would refuse for its ``src``.

    Only reads: one address dump, in that namespace."""
    return [prefsrc_line(route) for route in sourceless_routes(desired, run_in_netns(netns, _addresses))]
