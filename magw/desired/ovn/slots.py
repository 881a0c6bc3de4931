"""Sticky slots for the active gateways (pure).

A gateway keeps the slot it already has in the NB (read back from our routers' external ids), so a gateway
joining or leaving never renumbers the others' routers: their rows, addresses and flows stay untouched.
A new gateway takes the lowest free slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from magw.desired.ovn.rows import Router
from magw.desired.ovn.topology import MAX_SLOTS


class SlotError(ValueError):
    """More active gateways than the join subnet has router addresses for."""


def assign_slots(gateways: Iterable[str], previous: Mapping[str, int]) -> dict[str, int]:
    """``{gateway: slot}`` for ``gateways``, keeping each one's ``previous`` slot when it is valid and free."""
    wanted = sorted(set(gateways))
    if len(wanted) > MAX_SLOTS:
        raise SlotError(
            f"ovn: {len(wanted)} active gateways ({', '.join(wanted)}), but the join subnet 169.254.254.0/29 "
            f"has router addresses for {MAX_SLOTS}"
        )
    slots: dict[str, int] = {}
    taken: set[int] = set()
    for gw in wanted:
        slot = previous.get(gw)
        if slot is not None and 1 <= slot <= MAX_SLOTS and slot not in taken:
            slots[gw] = slot
            taken.add(slot)
    free = (s for s in range(1, MAX_SLOTS + 1) if s not in taken)
    for gw in wanted:
        if gw not in slots:
            slots[gw] = next(free)
    return slots


def observed_slots(routers: Iterable[Router]) -> dict[str, int]:
    """The slots our routers hold now (``Router.gateway``/``slot``, read back from their external ids)."""
    return {r.gateway: r.slot for r in routers if r.gateway is not None and r.slot is not None}
