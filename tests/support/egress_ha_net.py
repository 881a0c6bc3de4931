"""Nodes on one underlay L2 in throwaway namespaces, for the keepalived/conntrackd kernel tests.

A "switch" namespace holds bridge ``br0``; node ``i`` (1-based) is a namespace with ``eth0`` at
172.31.0.i/24 plugged into it. Everything goes when the ExitStack closes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from ipaddress import IPv4Address

import attrs

from tests.support.netns import ip_json, netns, run

SUBNET = "172.31.0"
VIP = IPv4Address(f"{SUBNET}.100")
WAIT = 20.0  # a bound on waits for something that must happen; never a timing assertion


@attrs.frozen
class Underlay:
    switch: str
    nodes: tuple[str, ...]  # namespace names, node i at index i-1

    def ip(self, i: int) -> IPv4Address:
        return IPv4Address(f"{SUBNET}.{i}")

    def port(self, i: int) -> str:
        return f"p{i}"


def build(stack: contextlib.ExitStack, count: int, prefix: str = "magwha") -> Underlay:
    switch = stack.enter_context(netns(f"{prefix}s"))
    run(switch, "ip", "link", "add", "br0", "type", "bridge")
    run(switch, "ip", "link", "set", "br0", "up")
    nodes = []
    for i in range(1, count + 1):
        node = stack.enter_context(netns(f"{prefix}{i}"))
        run(switch, "ip", "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", node)
        run(switch, "ip", "link", "set", f"p{i}", "master", "br0", "up")
        run(node, "ip", "addr", "add", f"{SUBNET}.{i}/24", "dev", "eth0")
        run(node, "ip", "link", "set", "eth0", "up")
        nodes.append(node)
    return Underlay(switch=switch, nodes=tuple(nodes))


def addresses(ns: str, dev: str = "eth0") -> set[str]:
    links = ip_json(ns, "-4", "addr", "show", "dev", dev)
    return {a["local"] for link in links for a in link.get("addr_info", [])}


def holders(net: Underlay, vip: IPv4Address = VIP) -> list[int]:
    """The nodes (1-based) whose eth0 carries ``vip`` now (read from the kernel, not from keepalived)."""
    return [i for i, ns in enumerate(net.nodes, 1) if str(vip) in addresses(ns)]


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.02)
