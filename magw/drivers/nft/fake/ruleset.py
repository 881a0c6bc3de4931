"""FakeNft: nftables tables in memory, with NftDriver's API, failing where the kernel fails.

State is a dict of whole ``NftTable`` values, ours and foreign ones. Each
``NftChange`` is one transaction, as in the kernel: the new table is built and
checked completely (``preflight`` like the real driver, then ``kernel_checks``
and ``fake_nft_checks``, the fake's model of what nft 1.0.6 and the kernel
refuse), and committed only if every check passes. A refused change leaves the
old table exactly as it was. An element change is carried out on the STORED
table (``fake_nft_elements``: deletes, then adds, refusing a missing element or a
map key with another value), not copied from ``change.table``: like the kernel,
the fake does not know what the reconciler believed it held. The same suite (tests/kernel/test_nft_contract.py) runs
against this fake and the real driver in a throwaway namespace.

Not modelled, on purpose (``NOT_MODELLED``; tests/unit/drivers/test_fake_nft.py pins the list):
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs
import structlog

from magw.desired.nft.text import rule_text
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.nft import elemcmds, preflight
from magw.drivers.nft.fake import checks as fake_nft_checks
from magw.drivers.nft.fake import kernel_checks
from magw.drivers.nft.fake.elements import ElementRefused, with_elements
from magw.drivers.nft.preflight import NODE_TABLES, TableKey, change_refusal
from magw.reconcile.changeset import NftChange
from magw.reconcile.driver import ApplyResult, Failure

log = structlog.get_logger(__name__)

# What nft or the kernel refuse that the fake deliberately lets through; rendered into the doc above.
NOT_MODELLED: tuple[str, ...] = (
    "datatypes of expressions other than ip/ip6 addresses, ports, ether addresses, ip protocol,"
    " meta mark/iifname/oifname/l4proto, ct mark and their concatenations",
    "payload fields, ct keys and other expressions nft does not know (only statements and meta keys are checked)",
    "malformed arguments of a known statement (nft refuses {'counter': 5}; the fake takes it)",
    "kernel limits: jump depth beyond loops (16 levels), set sizes, rules per chain",
    "nft's exact error texts: the fake names the same cause, mostly in nft's words",
)
__doc__ = (__doc__ or "") + "".join(f"\n- {item}" for item in NOT_MODELLED) + "\n"


def _table_errors(table: NftTable) -> list[str]:
    """Everything the fake refuses in a table, in the order nft meets it: preflight, then the kernel's checks."""
    return preflight.table_errors(table) or kernel_checks.table_errors(table) or fake_nft_checks.table_errors(table)


@attrs.define
class FakeNft:
    """In-memory nftables of one namespace. ``tables``: the (family, name) we own, the first is observe()'s."""

    tables: tuple[TableKey, ...] = NODE_TABLES
    _state: dict[TableKey, NftTable] = attrs.field(factory=dict, init=False)

    def add_foreign(self, table: NftTable) -> None:
        """Install a table that is not ours (a CNI's, kube-proxy's); it must be valid like any other."""
        errors = _table_errors(table)
        if errors:
            raise ValueError(f"foreign table {table.family} {table.name}: {errors[0]}")
        self._state[table.key] = table

    def table(self, family: str, name: str) -> NftTable | None:
        """Any table, ours or foreign (for tests)."""
        return self._state.get((family, name))

    def observe(self) -> NftTable | None:
        """Our first table as it is now, None when it does not exist."""
        return self._state.get(self.tables[0])

    def observe_all(self) -> tuple[NftTable, ...]:
        """Every table of ours that exists."""
        return tuple(self._state[k] for k in self.tables if k in self._state)

    def _transaction(self, change: NftChange) -> str | None:
        reason = change_refusal(change, self.tables)
        if reason is not None:
            return reason
        if change.table is None:
            self._state.pop((change.family, change.name), None)
            return None
        table = change.table
        if change.elements is not None:
            delta_errors = elemcmds.delta_errors(change.elements)  # what the real driver checks before sending
            if delta_errors or not change.elements:
                return "; ".join(delta_errors) or None
            try:
                table = with_elements(self._state.get(table.key), change.family, change.name, change.elements)
            except ElementRefused as exc:
                return str(exc)
        errors = _table_errors(table)
        if errors:
            return "; ".join(errors)
        self._state[table.key] = table
        return None

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
        """Run each change as one all-or-nothing transaction; a failed one does not stop the next."""
        applied: list[NftChange] = []
        failed: list[Failure] = []
        for change in changes:
            error = self._transaction(change)
            if error is None:
                applied.append(change)
                log.debug("fake_nft.applied", change=change.describe())
            else:
                failed.append(Failure(op=change, error=error))
                log.info("fake_nft.apply_failed", family=change.family, table=change.name, error=error)
        return ApplyResult(applied=tuple(applied), failed=tuple(failed))

    def dump(self) -> str:
        """Every table (ours and foreign), sorted, one object per line: for golden tests and readable diffs."""
        lines: list[str] = []
        for key in sorted(self._state):
            lines += _table_lines(self._state[key])
        return "\n".join(lines) + ("\n" if lines else "")


def _rule_line(rule: NftRule) -> str:
    try:
        text = rule_text(rule)
    except ValueError:  # a shape the printer does not know: the canonical JSON is still exact
        text = rule.expr + (f" comment {json.dumps(rule.comment)}" if rule.comment is not None else "")
    return f"    {text}"


def _set_line(s: NftSet | NftMap) -> str:
    if isinstance(s, NftMap):
        head = f"  map {s.name} type {s.type} : {s.map}"
        items = [f"{k} : {v}" for k, v in s.elements]
    else:
        head = f"  set {s.name} type {s.type}"
        items = list(s.elements)
    flags = f" flags {','.join(s.flags)}" if s.flags else ""
    return f"{head}{flags} elements {{ {', '.join(items)} }}" if items else head + flags


def _chain_line(c: NftChain) -> str:
    if c.hook is None:
        return f"  chain {c.name}"
    return f"  chain {c.name} type {c.type} hook {c.hook} priority {c.priority} policy {c.policy}"


def _table_lines(table: NftTable) -> list[str]:
    lines = [f"table {table.family} {table.name}"]
    lines += [_set_line(s) for s in table.sets]
    lines += [_set_line(m) for m in table.maps]
    for chain in table.chains:
        lines.append(_chain_line(chain))
        lines += [_rule_line(r) for r in table.rules if r.chain == chain.name]
    return lines
