"""NftTable <-> libnftables JSON: the one-transaction replace document, and observe's normalization.

The transaction for ``NftChange(table=T)`` is ONE JSON document, so ONE netlink
batch, so one kernel transaction (all or nothing)::

    add table; delete table; add table      # replace, whether or not it existed
    add chain ...                           # every chain first: verdict maps may jump to them
    add set ... (with elements)
    add map ... (with elements)
    add rule ...                            # in table.rules order

and for ``NftChange(table=None)``: ``add table; delete table`` (deleting a missing
table succeeds). nft 1.0.6 has no ``destroy``. Chains go first because nft 1.0.6
fails the whole batch with "Could not process rule: No such file or directory"
when a verdict-map element jumps to a chain added later in the same batch.

Chains are added in name order (``NftTable.chains`` is sorted); the kernel lists
them in the order they were added and rules grouped by chain in that order, so
the read-back comes out in the same order as ``NftTable`` keeps them.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import structlog

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import elements

log = structlog.get_logger(__name__)

_MODELLED = ("metainfo", "table", "set", "map", "chain", "rule")


# ---- NftTable -> JSON commands ------------------------------------------------------------------------------


def _ref(table: NftTable) -> dict[str, str]:
    return {"family": table.family, "table": table.name}


def chain_json(table: NftTable, c: NftChain) -> dict[str, Any]:
    body: dict[str, Any] = {**_ref(table), "name": c.name}
    if c.hook is not None:
        body.update(type=c.type, hook=c.hook, prio=c.priority)
        if c.policy is not None:
            body["policy"] = c.policy
    return {"add": {"chain": body}}


def _set_json(table: NftTable, s: NftSet, *, with_elements: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {**_ref(table), "name": s.name, "type": elements.type_to_json(s.type)}
    interval = "interval" in s.flags
    if s.flags:
        body["flags"] = list(s.flags)
    if s.elements and with_elements:
        body["elem"] = elements.many_to_json(s.elements, s.type, interval=interval)
    return {"add": {"set": body}}


def set_text(table: NftTable, s: NftSet, *, checked: bool) -> str:
    """``json.dumps(_set_json(table, s))`` with the elements written as text directly (no dict per element)."""
    body = json.dumps(_set_json(table, s, with_elements=False)["add"]["set"])
    if s.elements:
        elem = elements.many_to_json_text(s.elements, s.type, interval="interval" in s.flags, checked=checked)
        body = f'{body[:-1]}, "elem": {elem}}}'
    return f'{{"add": {{"set": {body}}}}}'


def map_text(table: NftTable, m: NftMap, *, checked: bool) -> str:
    """``json.dumps(_map_json(table, m))``; a checked ``ipv4_addr : ipv4_addr`` map's elements written as text.

    Shaped for speed (docs/performance.md): a Globalnet gateway's maps hold an element per pod, and converting 100k
    pairs one by one through ``elements.to_json`` was most of the apply. Canonical plain addresses (the
    preflight checked them) are their own JSON strings.
    """
    plain = checked and m.type == "ipv4_addr" and m.map == "ipv4_addr" and "interval" not in m.flags
    if not plain or not m.elements:
        return json.dumps(_map_json(table, m))
    body = json.dumps(_map_json(table, attrs.evolve(m, elements=()))["add"]["map"])
    elem = "[" + ", ".join(f'["{k}", "{v}"]' for k, v in m.elements) + "]"
    return f'{{"add": {{"map": {body[:-1]}, "elem": {elem}}}}}}}'


def _map_json(table: NftTable, m: NftMap) -> dict[str, Any]:
    body: dict[str, Any] = {
        **_ref(table),
        "name": m.name,
        "type": elements.type_to_json(m.type),
        "map": elements.type_to_json(m.map),
    }
    interval = "interval" in m.flags
    if m.flags:
        body["flags"] = list(m.flags)
    if m.elements:
        body["elem"] = [
            [elements.to_json(k, m.type, interval=interval), elements.to_json(v, m.map)] for k, v in m.elements
        ]
    return {"add": {"map": body}}


def rule_json(table: NftTable, r: NftRule) -> dict[str, Any]:
    body: dict[str, Any] = {**_ref(table), "chain": r.chain, "expr": json.loads(r.expr)}
    if r.comment is not None:
        body["comment"] = r.comment
    return {"add": {"rule": body}}


def delete_commands(family: str, name: str) -> list[dict[str, Any]]:
    """Delete ``family name`` whether or not it exists (``add`` is idempotent, so ``delete`` always finds it)."""
    t = {"table": {"family": family, "name": name}}
    return [{"add": t}, {"delete": t}]


def replace_commands(table: NftTable) -> list[dict[str, Any]]:
    """The commands that make the kernel's table exactly ``table``."""
    return [
        *delete_commands(table.family, table.name),
        {"add": {"table": {"family": table.family, "name": table.name}}},
        *(chain_json(table, c) for c in table.chains),
        *(_set_json(table, s) for s in table.sets),
        *(_map_json(table, m) for m in table.maps),
        *(rule_json(table, r) for r in table.rules),
    ]


def document(commands: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nftables": commands}


def replace_document_text(table: NftTable, *, checked: bool = False) -> str:
    """``json.dumps(document(replace_commands(table)))`` up to key order, built without the elements' dicts.

    What the driver sends: at 100k set elements the dict document cost ~45 MB and a ``json.dumps``.
    ``checked``: ``preflight.table_errors(table)`` found nothing, so the set elements are canonical.
    """
    head = [
        *delete_commands(table.family, table.name),
        {"add": {"table": {"family": table.family, "name": table.name}}},
    ]
    parts = [json.dumps(c) for c in [*head, *(chain_json(table, c) for c in table.chains)]]
    parts += [set_text(table, s, checked=checked) for s in table.sets]
    parts += [map_text(table, m, checked=checked) for m in table.maps]
    parts += [json.dumps(rule_json(table, r)) for r in table.rules]
    return '{"nftables": [' + ", ".join(parts) + "]}"


# ---- JSON listing -> NftTable -------------------------------------------------------------------------------


def _zero_counters(node: Any) -> Any:
    """Counters count packets; observe reports them as a fresh counter so a rule compares equal to its plan."""
    if isinstance(node, dict):
        return {
            k: ({"packets": 0, "bytes": 0} if k == "counter" and isinstance(v, dict) else _zero_counters(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_zero_counters(v) for v in node]
    return node


def canonical_expr(expr: Any) -> str:
    """The string form of a rule expression kept in ``NftRule.expr``."""
    return json.dumps(_zero_counters(expr), sort_keys=True)


def _parse_set(body: dict[str, Any]) -> NftSet:
    return NftSet(
        name=body["name"],
        type=elements.type_from_json(body["type"]),
        flags=tuple(sorted(body.get("flags", ()))),
        elements=tuple(elements.from_json(e) for e in body.get("elem", ())),
    )


def _parse_map(body: dict[str, Any]) -> NftMap:
    return NftMap(
        name=body["name"],
        type=elements.type_from_json(body["type"]),
        map=elements.type_from_json(body["map"]),
        flags=tuple(sorted(body.get("flags", ()))),
        elements=tuple((elements.from_json(k), elements.from_json(v)) for k, v in body.get("elem", ())),
    )


def _parse_chain(body: dict[str, Any]) -> NftChain:
    return NftChain(
        name=body["name"],
        type=body.get("type"),
        hook=body.get("hook"),
        priority=body.get("prio"),
        policy=body.get("policy"),
    )


def _parse_rule(body: dict[str, Any]) -> NftRule:
    return NftRule(chain=body["chain"], expr=canonical_expr(body.get("expr", [])), comment=body.get("comment"))


class ListingError(ValueError):
    """An ``nft -j`` listing we cannot read; ``str()`` is one line: ``nft -j list table ip magw: reason``."""


def parse_table(doc: dict[str, Any], family: str, name: str) -> NftTable:
    """The table ``family name`` of an ``nft -j list table`` document, without handles or counter values.

    A document not shaped as libnftables writes one raises ``ListingError`` (a ``ValueError``), one line.
    """
    try:
        return _parse_table(doc, family, name)
    except (LookupError, TypeError, AttributeError, ValueError, RecursionError) as exc:  # a missing key or index,
        # a list for a dict, an expression nested deeper than the interpreter's stack (atheris: [[[...]]] in a rule)
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise ListingError(f"nft -j list table {family} {name}: not a listing libnftables writes ({reason})") from None


def _parse_table(doc: dict[str, Any], family: str, name: str) -> NftTable:
    sets, maps, chains, rules = [], [], [], []
    for item in doc.get("nftables", ()):
        ((kind, body),) = item.items()
        if kind == "metainfo" or (body.get("family"), body.get("table", body.get("name"))) != (family, name):
            continue
        if kind == "set":
            sets.append(_parse_set(body))
        elif kind == "map":
            maps.append(_parse_map(body))
        elif kind == "chain":
            chains.append(_parse_chain(body))
        elif kind == "rule":
            rules.append(_parse_rule(body))
        elif kind not in _MODELLED:
            log.warning("nft.observe_unmodelled", family=family, table=name, kind=kind, name=body.get("name"))
    return NftTable(family=family, name=name, sets=sets, maps=maps, chains=chains, rules=rules)
