"""Foreign routes, rules and nft chains that would shadow magw's (verdicts only).

- routes: for each of magw's routes to a remote CIDR, what the kernel resolves for an address in it
  (``ip route get ADDR from SRC``). Another device or table than ours means a rule or route before ours wins.
- rules: a foreign ``ip rule`` at a priority before ours (100) is listed (warn), since it may send some
  traffic elsewhere; whether it does is what the route resolution shows.
- nft: a foreign base chain on a hook our traffic crosses that drops it (policy drop with no accept rule: fail;
  drop/reject rules: warn), or a foreign NAT chain at postrouting before ours that masquerades (fail: pod
  sources are rewritten before magw's null SNAT keeps them).
"""

from __future__ import annotations

from typing import Any

import attrs

from magw.desired.node.paths import GATEWAY_RULE_PRIORITY
from magw.ops.diagnose.verdict import Check, failed, passed, warned

TOPIC = "shadow"
OUR_PROTOCOL = "157"
OUR_TABLE_PREFIX = "magw"
_HOOKS = ("prerouting", "input", "forward", "output", "postrouting")


@attrs.frozen(kw_only=True)
class Resolution:
    """One of our routes (``cidr`` via ``dev`` in ``table``) and what ``ip route get`` answers for ``probe``."""

    cidr: str
    dev: str
    table: str
    probe: str
    source: str | None
    got_dev: str | None
    got_table: str | None
    got_type: str | None = None


def route_checks(resolutions: list[Resolution], prefix: str) -> list[Check]:
    out = []
    for r in resolutions:
        name = f"route {r.cidr}"
        got = f"dev {r.got_dev} table {r.got_table or 'main'}" + (f" ({r.got_type})" if r.got_type else "")
        if r.got_dev == r.dev and (r.got_table or "main") == r.table:
            out.append(passed(TOPIC, name, f"{r.probe} resolves to ours: {got}"))
            continue
        src = f" from {r.source}" if r.source else ""
        out.append(failed(TOPIC, name, f"{r.probe}{src} resolves to {got}, not ours (dev {r.dev} table {r.table})",
                          f"remove the rule or route that wins: {prefix}ip rule show; "
                          f"{prefix}ip route show table all {r.cidr}"))
    return out


def _protocol(rule: dict[str, Any]) -> str:
    return str(rule.get("protocol", ""))


def rule_checks(rules: list[dict[str, Any]], prefix: str) -> list[Check]:
    out = []
    for rule in rules:
        prio = int(rule.get("priority", 0))
        if prio == 0 or prio >= GATEWAY_RULE_PRIORITY or _protocol(rule) in (OUR_PROTOCOL, "magw"):
            continue
        text = _rule_text(rule)
        out.append(warned(TOPIC, f"rule {prio}", f"foreign rule before ours ({GATEWAY_RULE_PRIORITY}): {text}",
                          f"check it is meant to win over magw's: {prefix}ip rule del priority {prio}"))
    if not out:
        out.append(passed(TOPIC, "rules", f"no foreign rule before priority {GATEWAY_RULE_PRIORITY}"))
    return out


def _rule_text(rule: dict[str, Any]) -> str:
    parts = [f"from {rule.get('src', 'all')}"]
    if "srclen" in rule:
        parts[0] += f"/{rule['srclen']}"
    for key in ("dst", "iif", "oif", "fwmark"):
        if key in rule:
            parts.append(f"{key} {rule[key]}" + (f"/{rule['dstlen']}" if key == "dst" and "dstlen" in rule else ""))
    parts.append(f"lookup {rule.get('table', rule.get('action', '?'))}")
    return " ".join(parts)


def _verbs(rule: dict[str, Any]) -> set[str]:
    verbs: set[str] = set()
    for expr in rule.get("expr", []):
        if isinstance(expr, dict):
            verbs.update(k for k in expr if k in ("drop", "reject", "accept", "masquerade", "snat"))
    return verbs


def nft_checks(ruleset: list[dict[str, Any]], prefix: str) -> list[Check]:
    """Verdicts on the foreign base chains of ``nft -j list ruleset``'s items (each ``{"chain": ...}`` etc.)."""
    chains: dict[tuple[str, str, str], dict[str, Any]] = {}
    verbs: dict[tuple[str, str, str], set[str]] = {}
    for item in ruleset:
        if "chain" in item and "hook" in item["chain"]:
            c = item["chain"]
            chains[(c["family"], c["table"], c["name"])] = c
        elif "rule" in item:
            r = item["rule"]
            verbs.setdefault((r["family"], r["table"], r["chain"]), set()).update(_verbs(r))
    ours_nat = [int(c.get("prio", 0)) for (_, t, _), c in chains.items()
                if t.startswith(OUR_TABLE_PREFIX) and c.get("hook") == "postrouting" and c.get("type") == "nat"]
    our_nat_prio = min(ours_nat) if ours_nat else None
    out: list[Check] = []
    for key, c in sorted(chains.items()):
        family, table, name = key
        if table.startswith(OUR_TABLE_PREFIX) or family not in ("ip", "inet") or c.get("hook") not in _HOOKS:
            continue
        seen = verbs.get(key, set())
        label = f"nft {family} {table} {name}"
        where = f"hook {c['hook']} priority {c.get('prio')}"
        fix = f"{prefix}nft list chain {family} {table} {name}"
        if c.get("type") == "nat" and c["hook"] == "postrouting" and seen & {"masquerade", "snat"}:
            if our_nat_prio is not None and int(c.get("prio", 0)) < our_nat_prio:
                out.append(failed(TOPIC, label, f"{where} NATs before magw's (priority {our_nat_prio}): pod "
                                  "sources are rewritten before the null SNAT keeps them",
                                  f"give it a priority after {our_nat_prio}, or exclude remote CIDRs; {fix}"))
            continue
        if c.get("policy") == "drop" and "accept" not in seen:
            out.append(failed(TOPIC, label, f"{where} policy drop, no accept rule: drops magw's traffic",
                              f"accept the pod/service CIDRs and the cable ports there; {fix}"))
        elif c.get("policy") == "drop" or seen & {"drop", "reject"}:
            how = "policy drop" if c.get("policy") == "drop" else "drop/reject rules"
            out.append(warned(TOPIC, label, f"{where} can drop ({how}): check it accepts the remote CIDRs "
                              "and the cable ports", fix))
    if not out:
        out.append(passed(TOPIC, "nft", "no foreign chain drops or NATs before magw's"))
    return out
