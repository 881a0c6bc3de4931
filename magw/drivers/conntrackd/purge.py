"""Delete the kernel's conntrack entries NATed through VIPs: what a node that holds none of them any more keeps.

A node that was master of a VIP keeps the entries of the flows it NATed for it (egress SNAT to the VIP: the reply
goes to the VIP; ingress DNAT from the VIP: the original goes to it) after the VIP moves. Their packets no longer
reach it, but the entries live on until they time out (an established TCP entry: 5 days), holding table space for
nothing. conntrackd's ``-t`` (in ``primary-backup.sh``) is there to flush them, but it flushes every entry its filter
lets through, which on a node that is also a gateway or runs pods is every NATed flow of the node's own (a pod's
Service connections among them): see docs/egress-ha.md, "Transitions". So the agent deletes exactly the VIPs'
entries itself, with the ``conntrack`` tool in the node's namespace (conntrack-tools, as the soak's and ``magw
gather``'s reads)::

    conntrack -D --reply-dst VIP     # egress: SNATed to the VIP
    conntrack -D --orig-dst VIP      # ingress: DNATed from the VIP

``conntrack -D`` exits 1 when nothing matched; that is not a failure (the count it prints says what it did).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from ipaddress import IPv4Address

import attrs

from magw.drivers.conntrackd.step import Step, run_step

BINARY = "conntrack"
TIMEOUT = 10.0
_DELETED = re.compile(r"(\d+) flow entries have been deleted")
DIRECTIONS = ("--reply-dst", "--orig-dst")  # egress SNAT to the VIP, ingress DNAT from it


def deleted(step: Step) -> int:
    """How many entries a purge step deleted (0 when it failed)."""
    m = _DELETED.search(step.output)
    return int(m.group(1)) if m is not None and step.returncode == 0 else 0


def purge_nat_through(vips: Iterable[IPv4Address], netns: str | None, *, binary: str = BINARY) -> tuple[Step, ...]:
    """Delete the entries NATed through each of ``vips`` in ``netns`` (None: this namespace); one step per VIP and
    direction, each bounded; a step that fails does not stop the next."""
    steps = []
    for vip in sorted(set(vips)):
        for direction in DIRECTIONS:
            option = f"-D {direction} {vip}"
            try:
                step = run_step(option, [binary, "-D", direction, str(vip)], netns, TIMEOUT)
            except FileNotFoundError as exc:
                steps.append(Step(option=option, returncode=-1, output=f"{exc.filename}: not found"))
                continue
            ok = _DELETED.search(step.output) is not None  # "0 flow entries have been deleted" comes with exit status 1
            steps.append(attrs.evolve(step, returncode=0 if ok else (step.returncode or 1)))
    return tuple(steps)
