"""Which path each of a node's tracked flows took, read from the next hop's own connection tracking. Pure but
for the caller's commands.

The path a flow takes cannot be asked of the node's kernel: ``ip route get`` with the flow's addresses and ports
hashes them, but a forwarded packet that already carries a layer-4 hash (the sending socket's ``sk_txhash``
for TCP and connected UDP in the same kernel, or a NIC's RSS hash) is routed by that hash instead
(``fib_multipath_hash``, policy 1), so the answer is right for about half of such flows on two paths.
What the kernel did is seen one hop on: the gateway a flow went to tracks it. So a node's tracked connections
(``conntrack -L``) toward a remote cluster (original destination in a remote cluster's pod or service CIDR) are
each looked for, as the packets leave the node (after its own NAT: the reply tuple, reversed), among the
tuples (original and reply) the next hop of each path tracks; a flow the next hop no longer tracks is not
counted, so a path's count is a lower bound and ``tracked`` says how many were looked for. At most ``LIMIT``
flows per node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Network

from magw.util.conntrack import Entry, Flow

LIMIT = 2000


def toward(entries: Iterable[Entry], remote: Sequence[IPv4Network], limit: int = LIMIT) -> list[Entry]:
    """The entries whose original destination is in ``remote``, at most ``limit``."""
    out = []
    for e in entries:
        if any(e.original.dst in net for net in remote):
            out.append(e)
            if len(out) >= limit:
                break
    return out


def tracked_tuples(entries: Iterable[Entry]) -> frozenset[Flow]:
    """Both tuples of every entry: a packet in either direction of a connection the node tracks."""
    return frozenset(t for e in entries for t in (e.original, e.reply))


def count_paths(leaving: Iterable[Flow], next_hops: Mapping[str, frozenset[Flow]]) -> dict[str, int]:
    """Path (gateway address) -> how many of the ``leaving`` tuples its next hop tracks."""
    counted: Counter[str] = Counter()
    for flow in leaving:
        for address, seen in next_hops.items():
            if flow in seen:
                counted[address] += 1
    return dict(counted)
