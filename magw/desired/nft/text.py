"""Print nftables values as nft text: a rule (``rule_text``) and a whole table (``table_text``).

The output is valid ``nft -f`` input (nft 1.0.6) and close to what ``nft list``
prints. Two deliberate differences: chain priorities stay numeric
(``priority 90`` where nft prints ``priority srcnat - 10``) and integers stay
decimal (nft prints marks as ``0x000c0000``). Both parse back to the same rule.

nft 1.0.6 text has no quoting for names: a table, set or chain named after an
nft keyword (``fwd``, ``ct``, ...) cannot be expressed as text at all (``nft -f``
says "unexpected fwd, expecting string"), only as JSON. Our own names are safe.

The printer understands the shapes :mod:`magw.desired.nft.expr` builds; anything
else raises ``ValueError`` naming the unknown key.
"""

from __future__ import annotations

import json
from typing import Any

from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable

# meta keys nft prints without the "meta" prefix.
_BARE_META = frozenset({"iif", "oif", "iifname", "oifname", "iiftype", "oiftype"})
# meta keys whose values are interface names (printed quoted).
_IFNAME_META = frozenset({"iif", "oif", "iifname", "oifname"})
_VERDICTS = frozenset({"accept", "drop", "return", "continue"})


def _operand(expr: Any) -> str:
    if not isinstance(expr, dict) or len(expr) != 1:
        raise ValueError(f"nft expr: operand {expr!r} is not a one-key object")
    ((kind, body),) = expr.items()
    if kind == "payload":
        return f"{body['protocol']} {body['field']}"
    if kind == "meta":
        key = body["key"]
        return key if key in _BARE_META else f"meta {key}"
    if kind in ("ct", "rt"):
        direction = f" {body['dir']}" if "dir" in body else ""  # ct original ip daddr
        return f"{kind}{direction} {body['key']}"
    if kind == "fib":
        return f"fib {' . '.join(body['flags'])} {body['result']}"
    if kind == "numgen":
        offset = f" offset {body['offset']}" if body.get("offset") else ""
        return f"numgen {body['mode']} mod {body['mod']}{offset}"
    if kind == "tcp option":
        return f"tcp option {body['name']} {body['field']}"
    if kind == "|":
        left, bits = body
        return f"{_operand(left)} | {_value(bits)}"
    if kind == "map":
        data = body["data"]
        if isinstance(data, dict) and "set" in data:  # an anonymous map: { 0 : 10.0.0.1, 1 : 10.0.0.2 }
            data = "{ " + ", ".join(f"{_value(k)} : {_value(v)}" for k, v in data["set"]) + " }"
        return f"{_operand(body['key'])} map {data}"
    if kind == "&":
        left, mask = body
        mask_text = "(" + " | ".join(mask) + ")" if isinstance(mask, list) else _value(mask)
        return f"{_operand(left)} & {mask_text}"
    raise ValueError(f"nft expr: unsupported operand {kind!r}")


def _value(value: Any, *, quote: bool = False) -> str:
    if isinstance(value, bool):
        raise ValueError(f"nft expr: boolean value {value!r} has no nft form")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value) if quote else value
    if isinstance(value, list):
        return ",".join(_value(v, quote=quote) for v in value)
    if isinstance(value, dict) and len(value) == 1:
        ((kind, body),) = value.items()
        if kind == "set":
            return "{ " + ", ".join(_value(v, quote=quote) for v in body) + " }"
        if kind == "prefix":
            return f"{body['addr']}/{body['len']}"
        if kind == "range":
            return f"{body[0]}-{body[1]}"
        return _operand(value)
    raise ValueError(f"nft expr: unsupported value {value!r}")


def _is_ifname(left: Any) -> bool:
    return isinstance(left, dict) and "meta" in left and left["meta"].get("key") in _IFNAME_META


def _match(body: dict[str, Any]) -> str:
    left, op, right = body["left"], body["op"], body["right"]
    if isinstance(left, dict) and "&" in left and isinstance(left["&"][1], list) and op == "==":
        # Flag masks print in nft's "VALUE / MASK" form: "tcp flags syn / syn,rst".
        inner, mask = left["&"]
        return f"{_operand(inner)} {_value(right)} / {_value(mask)}"
    rendered = _value(right, quote=_is_ifname(left))
    if op in ("==", "in") and not (isinstance(left, dict) and "&" in left):
        return f"{_operand(left)} {rendered}"
    return f"{_operand(left)} {op} {rendered}"


def _nat(kind: str, body: dict[str, Any]) -> str:
    text = f"{kind} to"
    if "addr" in body:
        text += f" {_value(body['addr'])}"
    if "port" in body:
        text += f":{body['port']}" if "addr" in body else f" :{body['port']}"
    return text


def _statement(stmt: Any) -> str:
    if not isinstance(stmt, dict) or len(stmt) != 1:
        raise ValueError(f"nft expr: statement {stmt!r} is not a one-key object")
    ((kind, body),) = stmt.items()
    if kind == "match":
        return _match(body)
    if kind in _VERDICTS or kind == "masquerade":
        return str(kind)
    if kind in ("jump", "goto"):
        return f"{kind} {body['target']}"
    if kind in ("snat", "dnat"):
        return _nat(kind, body)
    if kind in ("counter", "notrack"):
        return str(kind)
    if kind == "mangle":
        return f"{_operand(body['key'])} set {_value(body['value'])}"
    raise ValueError(f"nft expr: unsupported statement {kind!r}")


def expr_text(expr: str) -> str:
    """The nft text of a canonical expression list (an ``NftRule.expr``)."""
    statements = json.loads(expr)
    if not isinstance(statements, list):
        raise ValueError(f"nft expr: {expr!r} is not a JSON list")
    return " ".join(_statement(s) for s in statements)


def rule_text(rule: NftRule) -> str:
    """``ip saddr @local_cidrs ip daddr @remote_cidrs snat to ip saddr comment "..."``."""
    text = expr_text(rule.expr)
    if rule.comment is not None:
        text += f" comment {json.dumps(rule.comment)}"
    return text


def _collection_lines(
    keyword: str, name: str, type_text: str, flags: tuple[str, ...], elements: list[str]
) -> list[str]:
    """A set or a map block: ``keyword name { type ...; flags ...; elements = { ... } }``."""
    lines = [f"  {keyword} {name} {{", f"    type {type_text}"]
    if flags:
        lines.append(f"    flags {','.join(flags)}")
    if elements:
        lines.append(f"    elements = {{ {', '.join(elements)} }}")
    lines.append("  }")
    return lines


def _set_lines(s: NftSet) -> list[str]:
    return _collection_lines("set", s.name, s.type, s.flags, list(s.elements))


def base_chain_text(chain: NftChain) -> str:
    """A base chain's ``type nat hook postrouting priority 90; policy accept;`` (the chain must have a hook)."""
    policy = f" policy {chain.policy};" if chain.policy is not None else ""
    return f"type {chain.type} hook {chain.hook} priority {chain.priority};{policy}"


def _chain_lines(chain: NftChain, rules: list[NftRule]) -> list[str]:
    lines = [f"  chain {chain.name} {{"]
    if chain.hook is not None:
        lines.append(f"    {base_chain_text(chain)}")
    lines.extend(f"    {rule_text(r)}" for r in rules)
    lines.append("  }")
    return lines


def _map_lines(m: NftMap) -> list[str]:
    return _collection_lines("map", m.name, f"{m.type} : {m.map}", m.flags, [f"{k} : {v}" for k, v in m.elements])


def table_text(table: NftTable) -> str:
    """The whole table in ``nft list`` layout (sets, maps, then chains with their rules in order)."""
    lines = [f"table {table.family} {table.name} {{"]
    for s in table.sets:
        lines.extend(_set_lines(s))
    for m in table.maps:
        lines.extend(_map_lines(m))
    for chain in table.chains:
        lines.extend(_chain_lines(chain, [r for r in table.rules if r.chain == chain.name]))
    lines.append("}")
    return "\n".join(lines) + "\n"
