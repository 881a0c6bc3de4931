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

from collections.abc import Iterable
from ipaddress import IPv4Address

from magw.desired.render import object_line
from magw.desired.state import DesiredState, Route
from magw.drivers.netlink.local import local_addresses
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


def prefsrc_lines(desired: DesiredState, netns: str | None) -> list[str]:
    """One line per route of ``desired`` that ``netns`` (None: the current one) would refuse for its ``src``.

    Only reads: one RTM_GETLINK and one RTM_GETADDR dump."""
    local = [address for _, address in run_in_netns(netns, local_addresses)]
    return [prefsrc_line(route) for route in sourceless_routes(desired, local)]
