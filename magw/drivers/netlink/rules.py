"""IPv4 policy rules at the priorities we own (``constants.OWNED_RULE_PRIORITIES``).

A priority of ours holds exactly one rule, ``from all lookup TABLE``,
``from all iif DEV lookup TABLE`` (OVN's table 149) or ``from all fwmark M/MASK
lookup TABLE`` (the egress gateway's steering), written with protocol
RTPROT_MAGW. Anything else found at such a priority (a rule with other
selectors, another action, or several rules) is observed as ``Rule(table=0)``,
which never equals a planned rule, so the next sync clears the priority and
writes ours. Rules cannot be replaced in place: replace = delete what is at the
priority, then add.

Kernel note (6.18): RTM_DELRULE with only a priority deletes the first rule at
that priority whatever its selectors, so "clear a priority" is a bounded loop of
such deletes until ENOENT.

At a *shared* priority (``constants.SHARED_RULE_PRIORITIES``) only rules with
protocol RTPROT_MAGW are ours: others are neither observed nor deleted, and a
clear sends the protocol along (the kernel then deletes only rules carrying it).
"""

from __future__ import annotations

import socket
from typing import Any

import attrs

from magw.desired.state import Rule
from magw.drivers.netlink.constants import OWNED_RULE_PRIORITIES, RTPROT_MAGW, SHARED_RULE_PRIORITIES
from magw.drivers.netlink.session import OpError, error_code

_EPERM = 1
_ENOENT = 2
_EBUSY = 16
_FR_ACT_TO_TBL = 1
# More rules than this at one priority means something keeps adding them: stop and report.
_MAX_RULES_PER_PRIORITY = 64
# Attributes that make a rule more specific than "from all" (iif and fwmark are read, see ``_is_plain``).
_READ = ("FRA_IIFNAME", "FRA_FWMARK", "FRA_FWMASK")
_SELECTORS = (
    "FRA_FWMARK",
    "FRA_FWMASK",
    "FRA_IIFNAME",
    "FRA_OIFNAME",
    "FRA_UID_RANGE",
    "FRA_IP_PROTO",
    "FRA_SPORT_RANGE",
    "FRA_DPORT_RANGE",
    "FRA_L3MDEV",
    "FRA_GOTO",
)


def _is_plain(msg: Any) -> bool:
    """True for ``from all [iif DEV] [fwmark M/MASK] lookup TABLE`` with no other selector (read by ``_fields``)."""
    if msg["action"] != _FR_ACT_TO_TBL or msg["src_len"] or msg["dst_len"] or msg["tos"]:
        return False
    return all(msg.get(name) is None for name in _SELECTORS if name not in _READ)


def _fwmark(msg: Any) -> tuple[int | None, int | None]:
    mark = msg.get("FRA_FWMARK")
    if not mark and not msg.get("FRA_FWMASK"):
        return None, None
    mask = msg.get("FRA_FWMASK")
    return int(mark or 0), (int(mask) if mask is not None else 0xFFFFFFFF)


def _rule_of(priority: int, msg: Any) -> Rule:
    mark, mask = _fwmark(msg)
    return Rule(priority=priority, table=_table(msg), iif=_iif(msg), fwmark=mark, fwmask=mask)


def _iif(msg: Any) -> str | None:
    name = msg.get("FRA_IIFNAME")
    return str(name) if name else None


def _table(msg: Any) -> int:
    return int(msg.get("FRA_TABLE") or msg["table"])


def _ours(priority: int, msg: Any) -> bool:
    """Every rule at an owned priority is ours, except at a shared one, where only RTPROT_MAGW's are."""
    return priority not in SHARED_RULE_PRIORITIES or msg.get("FRA_PROTOCOL") == RTPROT_MAGW


def _require_owned(priority: int) -> None:
    if priority not in OWNED_RULE_PRIORITIES:
        owned = ", ".join(str(p) for p in sorted(OWNED_RULE_PRIORITIES))
        raise OpError(_EPERM, f"rule priority {priority} is not one of ours ({owned})")


@attrs.define
class RuleIO:
    """Observe and write the rules at our priorities."""

    ipr: Any

    def _at(self, priority: int) -> list[Any]:
        rules = self.ipr.get_rules(family=socket.AF_INET)
        return [m for m in rules if m.get("FRA_PRIORITY") == priority and _ours(priority, m)]

    def observe(self) -> list[Rule]:
        """One dump, grouped by priority (the egress gateway owns 255 priorities: one dump each was wasteful)."""
        by_priority: dict[int, list[Any]] = {}
        for m in self.ipr.get_rules(family=socket.AF_INET):
            priority = m.get("FRA_PRIORITY")
            if priority in OWNED_RULE_PRIORITIES and _ours(int(priority), m):
                by_priority.setdefault(int(priority), []).append(m)
        out = []
        for priority, msgs in sorted(by_priority.items()):
            if len(msgs) == 1 and _is_plain(msgs[0]):
                out.append(_rule_of(priority, msgs[0]))
            else:
                out.append(Rule(priority=priority, table=0))
        return out

    def ensure(self, rule: Rule) -> None:
        _require_owned(rule.priority)
        msgs = self._at(rule.priority)
        if len(msgs) == 1 and _is_plain(msgs[0]) and _rule_of(rule.priority, msgs[0]) == rule:
            return
        self._clear(rule.priority)
        extra: dict[str, Any] = {"iifname": rule.iif} if rule.iif is not None else {}
        if rule.fwmark is not None:
            extra["fwmark"] = rule.fwmark
            extra["fwmask"] = rule.fwmask if rule.fwmask is not None else 0xFFFFFFFF
        self.ipr.rule(
            "add", family=socket.AF_INET, priority=rule.priority, table=rule.table, protocol=RTPROT_MAGW, **extra
        )

    def delete(self, rule: Rule) -> None:
        _require_owned(rule.priority)
        self._clear(rule.priority)

    def _clear(self, priority: int) -> None:
        mine: dict[str, Any] = {"protocol": RTPROT_MAGW} if priority in SHARED_RULE_PRIORITIES else {}
        for _ in range(_MAX_RULES_PER_PRIORITY):
            try:
                self.ipr.rule("del", family=socket.AF_INET, priority=priority, **mine)
            except Exception as exc:
                if error_code(exc) == _ENOENT:
                    return
                raise
        raise OpError(_EBUSY, f"more than {_MAX_RULES_PER_PRIORITY} rules at priority {priority}")
