"""This network namespace's own IPv4 addresses, by interface (the route agent's CNI address on Kubernetes)."""

from __future__ import annotations

import socket
from ipaddress import IPv4Address


def local_addresses() -> list[tuple[str, IPv4Address]]:
    """(interface, IPv4 address) of this network namespace."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        return [
            (str(names.get(a["index"], "")), IPv4Address(a.get_attr("IFA_ADDRESS")))
            for a in ipr.get_addr(family=socket.AF_INET)
        ]
