"""The transaction of an element change: ``delete element`` and ``add element`` commands, nothing else.

For ``NftChange(elements=delta)`` the driver sends ONE document, so one kernel transaction::

    delete element ...      # per set/map with deletes: a map's keys only (the kernel deletes by key)
    add element ...         # per set/map with adds

No table, chain, set or rule command: the table, its rules and the other elements stay as they are,
and a failure (an element already gone, a map key with another value) leaves everything as it was.
Deletes come first, measured on nft 1.0.6 / kernel 6.18: a map key added with another value than
the one it has is "File exists", and an interval added over one still there is "interval overlaps
with an existing one"; deleting the old element earlier in the same batch makes both valid
(``10.0.0.0/16`` -> ``10.0.0.0/15``, a map value change). Deleting an element that is not there is
"No such file or directory" (the whole batch fails), adding one that is there (same value) succeeds.
An ``add element`` with an empty list is refused ("Invalid set."), so an empty side sends nothing.
"""

from __future__ import annotations

import json
from typing import Any

from magw.desired.nft.values import NftMap, NftSet
from magw.drivers.nft import elements, preflight
from magw.reconcile.nftdelta import MapDelta, NftElementDelta, SetDelta


def delta_errors(delta: NftElementDelta) -> list[str]:
    """Why libnftables must not see these elements (preflight's checks, on the changed elements only).

    An element nft cannot parse is looked up as a host name (DNS) and a non-canonical one would be
    sent again on every sync; the unchanged elements were checked when the table was created whole.
    """
    errors: list[str] = []
    for s in delta.sets:
        flags = ("interval",) if s.interval else ()
        errors += preflight.set_errors(NftSet(name=s.name, type=s.type, flags=flags, elements=(*s.add, *s.delete)))
    for m in delta.maps:
        flags = ("interval",) if m.interval else ()
        for pairs in (m.add, m.delete):  # apart: a changed value has its key on both sides
            errors += preflight.map_errors(NftMap(name=m.name, type=m.type, map=m.map, flags=flags, elements=pairs))
    return errors


def _body(family: str, table: str, name: str) -> dict[str, Any]:
    return {"family": family, "table": table, "name": name}


def _set_elem(d: SetDelta, items: tuple[str, ...]) -> list[Any]:
    return elements.many_to_json(items, d.type, interval=d.interval)


def _map_pairs(d: MapDelta) -> list[Any]:
    return [[elements.to_json(k, d.type, interval=d.interval), elements.to_json(v, d.map)] for k, v in d.add]


def _map_keys(d: MapDelta) -> list[Any]:
    return elements.many_to_json([k for k, _ in d.delete], d.type, interval=d.interval)


def element_commands(family: str, table: str, delta: NftElementDelta) -> list[dict[str, Any]]:
    """Every delete, then every add; a set or map with nothing on one side has no command for it."""
    deletes = [(d.name, _set_elem(d, d.delete)) for d in delta.sets if d.delete]
    deletes += [(d.name, _map_keys(d)) for d in delta.maps if d.delete]
    adds = [(d.name, _set_elem(d, d.add)) for d in delta.sets if d.add]
    adds += [(d.name, _map_pairs(d)) for d in delta.maps if d.add]
    return [
        *({"delete": {"element": {**_body(family, table, name), "elem": elem}}} for name, elem in deletes),
        *({"add": {"element": {**_body(family, table, name), "elem": elem}}} for name, elem in adds),
    ]


def _command_text(verb: str, family: str, table: str, name: str, elem: str) -> str:
    return f'{{"{verb}": {{"element": {json.dumps(_body(family, table, name))[:-1]}, "elem": {elem}}}}}}}'


def element_document_text(family: str, table: str, delta: NftElementDelta) -> str:
    """``json.dumps(document(element_commands(...)))`` up to spacing, set elements written as text directly.

    What the driver sends; the elements must have passed ``delta_errors`` (so they are canonical).
    """
    parts = [*delete_command_texts(family, table, delta), *add_command_texts(family, table, delta)]
    return '{"nftables": [' + ", ".join(parts) + "]}"


def delete_command_texts(family: str, table: str, delta: NftElementDelta) -> list[str]:
    """The ``delete element`` commands of ``delta`` as JSON texts (checked elements, as above)."""
    parts = [_command_text("delete", family, table, d.name, _set_text(d, d.delete)) for d in delta.sets if d.delete]
    parts += [_command_text("delete", family, table, d.name, json.dumps(_map_keys(d))) for d in delta.maps if d.delete]
    return parts


def add_command_texts(family: str, table: str, delta: NftElementDelta) -> list[str]:
    """The ``add element`` commands of ``delta`` as JSON texts (checked elements, as above)."""
    parts = [_command_text("add", family, table, d.name, _set_text(d, d.add)) for d in delta.sets if d.add]
    parts += [_command_text("add", family, table, d.name, json.dumps(_map_pairs(d))) for d in delta.maps if d.add]
    return parts


def _set_text(d: SetDelta, items: tuple[str, ...]) -> str:
    return elements.many_to_json_text(items, d.type, interval=d.interval, checked=True)
