"""The replace transaction in nft's own syntax, when the table can be written in it (docs/performance.md).

libnftables reads nft syntax faster and in less memory than the same transaction as JSON: for the
100k-element ``remote_cidrs`` set of a 100k-route gateway, 1.0-1.16 s and about 78 MB against 1.33-1.41 s
and about 130 MB (measured in process on the same table, same namespace kind; the read-back is the same
table). So the driver sends a table replace as these commands, in the order of the JSON document
(``magw.drivers.nft.codec``)::

    add table ip magw
    delete table ip magw
    add table ip magw
    add chain ip magw NAME { type nat hook postrouting priority 90; policy accept; }
    add set ip magw NAME { type ipv4_addr; flags interval; elements = { ... }; }
    add map ip magw NAME { type ipv4_addr : ipv4_addr; elements = { K : V, ... }; }
    add rule ip magw CHAIN EXPR comment "..."

One buffer is one netlink batch, so one kernel transaction, as with JSON. The rule expressions come from
``magw.desired.nft.text`` (the printer of ``magw plan``), whose text reads back as the same rules
(tests/kernel/test_nft_roundtrip.py, tests/kernel/test_planner_nft_kernel.py).

nft syntax cannot say everything JSON can: it has no quoting for names (a name that is an nft keyword does not
parse) and no escapes in strings, and a value holding a blank, a ``;`` or a brace would end or split a command.
:func:`replace_text` returns None, and the driver sends JSON, when a name or a chain's type, hook or policy is
not a plain identifier, a set or map holds anything but IPv4 addresses, a string value of a rule is not a
single token, or a comment would need an escape. A name that passes but is a keyword makes libnftables refuse
the text before anything reaches the kernel; the driver then sends the JSON document (``NftDriver``).
"""

from __future__ import annotations

import json
import re

from magw.desired.nft import text as nfttext
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import elements

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
# A string value inside a rule expression that nft syntax reads back as the same single token: addresses,
# prefixes, names, ``@set`` references, operators. No blank, quote, brace, ``;`` or ``#``, which would end or
# split the command; a value with any of them goes as JSON.
_TOKEN = re.compile(r"[A-Za-z0-9_.:/@*=!<>&|-]+\Z")
_CT_ADDRESS_KEY = re.compile(r"ip6? (?:saddr|daddr)\Z")
# A string nft syntax can hold between double quotes as it is (the scanner knows no escapes).
_QUOTABLE = re.compile(r"[ !#-\[\]-~]*\Z")
_V4 = "ipv4_addr"


def _chain(ref: str, chain: NftChain) -> str:
    if chain.hook is None:
        return f"add chain {ref} {chain.name}"
    return f"add chain {ref} {chain.name} {{ {nfttext.base_chain_text(chain)} }}"


def _set(ref: str, s: NftSet) -> str:
    flags = f" flags {','.join(s.flags)};" if s.flags else ""
    found = f" elements = {{ {', '.join(elements.checked_v4_in_address_order(s.elements))} }};" if s.elements else ""
    return f"add set {ref} {s.name} {{ type {_V4};{flags}{found} }}"


def _map(ref: str, m: NftMap) -> str:
    found = f" elements = {{ {', '.join(f'{k} : {v}' for k, v in m.elements)} }};" if m.elements else ""
    return f"add map {ref} {m.name} {{ type {_V4} : {_V4};{found} }}"


def _plain(value: object) -> bool:
    """Every string value in ``value`` (a parsed rule expression; object keys are nft's own) is one token, but a
    conntrack expression's two-word address key (``ct original ip daddr``)."""
    if isinstance(value, str):
        return _TOKEN.match(value) is not None
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain_ct(v) if k == "ct" else _plain(v) for k, v in value.items())
    return True


def _plain_ct(body: object) -> bool:
    if not isinstance(body, dict):
        return _plain(body)
    key = body.get("key")
    two_words = isinstance(key, str) and _CT_ADDRESS_KEY.match(key) is not None
    return all(_plain(v) for k, v in body.items() if not (k == "key" and two_words))


def _rule(ref: str, rule: NftRule) -> str | None:
    try:
        if not _plain(json.loads(rule.expr)):
            return None
        text = nfttext.expr_text(rule.expr)
    except ValueError:  # not JSON, or a shape the printer does not know: the JSON path words it
        return None
    if "\\" in text:  # the printer quoted an interface name with a JSON escape: nft syntax has none
        return None
    if rule.comment is not None:
        if not _QUOTABLE.match(rule.comment):
            return None
        text += f' comment "{rule.comment}"'
    return f"add rule {ref} {rule.chain} {text}"


def _expressible(table: NftTable) -> bool:
    names = [table.name, *(c.name for c in table.chains), *(s.name for s in table.sets), *(m.name for m in table.maps)]
    chain_words = [w for c in table.chains for w in (c.type, c.hook, c.policy) if w is not None]
    if not all(_NAME.match(word) for word in [*names, *chain_words]) or table.family not in ("ip", "ip6", "inet"):
        return False
    if any(c.priority is not None and type(c.priority) is not int for c in table.chains):
        return False
    if any(s.type != _V4 or not set(s.flags) <= {"interval"} for s in table.sets):
        return False
    return all(m.type == _V4 and m.map == _V4 and not m.flags for m in table.maps)


def replace_text(table: NftTable) -> str | None:
    """The commands that make the kernel's table exactly ``table``, in nft syntax; None when it cannot be said so.

    The table must have passed ``preflight.table_errors``: its elements are canonical, written as they are.
    """
    if not _expressible(table):
        return None
    ref = f"{table.family} {table.name}"
    rules = [_rule(ref, r) for r in table.rules]
    if any(r is None for r in rules):
        return None
    lines = [f"add table {ref}", f"delete table {ref}", f"add table {ref}"]
    lines += [_chain(ref, c) for c in table.chains]  # chains first, as in the JSON document (codec)
    lines += [_set(ref, s) for s in table.sets]
    lines += [_map(ref, m) for m in table.maps]
    lines += [r for r in rules if r is not None]
    return "\n".join(lines) + "\n"
