"""NftDriver: observe and replace our nftables tables, each in ONE kernel transaction.

- ``observe()`` lists our table (``nft -j list table``) and normalizes it into an
  ``NftTable``: no handles, set elements as our strings, rule expressions as
  ``json.dumps(expr, sort_keys=True)`` with counters zeroed, comments apart.
- ``apply(changes)``: each ``NftChange`` is one transaction, one netlink batch,
  all or nothing (see ``codec`` for its shape). A table replace goes in nft syntax
  when the table can be written in it (``textcmds``: faster, and about 55 MB less
  at 100k set elements), else, or when libnftables refuses the text before it
  reaches the kernel, as the JSON document (a kernel refusal of the text is the
  result: JSON would make the same batch). A change with ``update`` changes the table in place
  (``updatecmds``: kept chains and sets untouched, so no packet passes between two rule sets), and falls back to
  the whole replace when the kernel refuses it (the table was not the one observed). ``table=None`` deletes the
  table, and deleting a missing table succeeds. A change with ``elements`` sends only element deletes and adds, an
  empty one nothing: as nfnetlink messages of our own (``nfelems``, ``nfnl``)
  when it can be written so, which spares libnftables' cache of every interval
  set's elements (2 s at 100k prefixes), else as ``delete element``/``add
  element`` commands through libnftables (``elemcmds``).
- Only the tables named in ``tables`` are ever touched: never ``flush ruleset``,
  never another table. A change for any other table is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Literal

import structlog

from magw.desired.nft.values import NftTable
from magw.drivers.heap import give_back_heap
from magw.drivers.nft import codec, elemcmds, nfelems, preflight, textcmds, updatecmds
from magw.drivers.nft.libnft import Nft, NftError
from magw.drivers.nft.nfnl import NfnlSocket
from magw.drivers.nft.preflight import NODE_TABLES, TableKey, change_refusal
from magw.drivers.nft.rawobserve import observe_raw
from magw.reconcile.changeset import NftChange
from magw.reconcile.driver import ApplyResult, Failure
from magw.reconcile.nftdelta import NftElementDelta

log = structlog.get_logger(__name__)

TRIM_BEFORE_BYTES = 1 << 20  # a transaction this large (about 15k set elements) hands the free heap back first


def transaction(change: NftChange) -> dict[str, object]:
    """The libnftables JSON document that carries out ``change`` (one kernel transaction).

    An element change is element commands only (``elemcmds``): never ``add``/``delete table`` or a rule.
    """
    if change.table is None:
        return codec.document(codec.delete_commands(change.family, change.name))
    if change.elements is not None:
        return codec.document(elemcmds.element_commands(change.family, change.name, change.elements))
    return codec.document(codec.replace_commands(change.table))


def transaction_text(change: NftChange, *, checked: bool = False) -> str:
    """``transaction(change)`` as JSON text, built without a dict per set element (what the driver sends).

    ``checked``: the table (or the delta's elements) passed preflight, so elements need no second reading.
    """
    if change.table is None or (change.elements is not None and not checked):
        return json.dumps(transaction(change))
    if change.elements is not None:
        return elemcmds.element_document_text(change.family, change.name, change.elements)
    return codec.replace_document_text(change.table, checked=checked)


# libnftables' words (src/mnl.c, nft 1.0.6) for a batch it parsed and sent and the kernel refused, as against
# its own syntax and evaluation errors, where nothing reached the kernel.
KERNEL_REFUSED = "Could not process rule"


class NftDriver:
    """Our nftables tables in namespace ``netns`` (None: the current one), through libnftables.

    ``element_socket``: where element changes go as our own nfnetlink messages (default: a new ``NfnlSocket`` in
    ``netns``); ``raw_elements=False`` sends them through libnftables too.
    """

    def __init__(
        self,
        netns: str | None = None,
        tables: Iterable[TableKey] = NODE_TABLES,
        *,
        nft: Nft | None = None,
        raw_elements: bool = True,
        element_socket: NfnlSocket | None = None,
    ) -> None:
        self.netns = netns
        self.tables: tuple[TableKey, ...] = tuple(tables)
        if not self.tables:
            raise ValueError("tables: give at least one (family, name) we own")
        self._nft = nft if nft is not None else Nft(netns)
        self._nfnl = element_socket if element_socket is not None or not raw_elements else NfnlSocket(netns)

    def close(self) -> None:
        self._nft.close()
        if self._nfnl is not None:
            self._nfnl.close()

    def __enter__(self) -> NftDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def observe_table(self, family: str, name: str) -> NftTable | None:
        """One table, normalized; None when it does not exist.

        With the element socket, and when every set and map of the table is one ``nfdump`` reads (IPv4), the
        table's shape and rules come from a terse ruleset listing and the elements from our own dumps
        (``observe_raw``); otherwise, or when that read fails, from libnftables' listing of the table.
        """
        if self._nfnl is not None:
            try:
                found = observe_raw(self._nft, self._nfnl, family, name)
            except (OSError, NftError, ValueError) as exc:  # ValueError: a listing or message we cannot read
                log.warning("nft.observe_raw_failed", netns=self.netns, family=family, table=name, error=str(exc))
            else:
                if found is not False:
                    return found
        text = self._list_table_text(family, name)
        give_back_heap()  # before json.loads builds its dicts on top of what libnftables freed (drivers.heap)
        if text is None:
            return None
        doc = json.loads(text) if text.strip() else {}
        del text
        return codec.parse_table(doc, family, name)

    def _list_table_text(self, family: str, name: str) -> str | None:
        """``nft -j list table`` as text (``Nft.list_table_json`` without parsing); None when it is missing."""
        try:
            return self._nft.run(json.dumps({"nftables": [{"list": {"table": {"family": family, "name": name}}}]}))
        except NftError:
            # nft 1.0.6 words a missing table as "No such file or directory"; ask rather than parse the wording.
            if name not in self._nft.table_names(family):
                return None
            raise

    def observe(self) -> NftTable | None:
        """Our first table (the node's ``ip magw``), None when it does not exist."""
        return self.observe_table(*self.tables[0])

    def observe_all(self) -> tuple[NftTable, ...]:
        """Every table of ours that exists."""
        found = (self.observe_table(family, name) for family, name in self.tables)
        return tuple(t for t in found if t is not None)

    def _transaction(self, change: NftChange) -> tuple[str | None, str]:
        """Run ``change``: its error (None when applied), and how it went: delete, elements, update (in place) or
        replace (also an update the kernel refused, then replaced whole)."""
        how = "delete" if change.table is None else "elements" if change.elements is not None else "replace"
        reason = change_refusal(change, self.tables)
        if reason is None and change.elements is not None:
            errors = elemcmds.delta_errors(change.elements)  # the changed elements only: the rest is in the kernel
            reason = "; ".join(errors) if errors else None
            if reason is None and not change.elements:
                return None, how  # nothing to send (nft refuses an empty element list)
            if reason is None and change.table is not None:
                sent = self._send_elements(change.table, change.elements)
                if sent is not False:
                    return sent, how
        elif reason is None and change.table is not None:
            errors = preflight.table_errors(change.table)
            reason = "; ".join(errors) if errors else None
        if reason is not None:
            return reason, how
        if change.update is not None and change.table is not None and change.elements is None:
            error = self._run(updatecmds.update_document_text(change.table, change.update, checked=True))
            if error is None:
                return None, "update"
            # the kernel's table is not the one the update was computed from (changed under us, or gone): the
            # batch changed nothing, and the whole replace below makes the table right whatever it holds
            log.warning("nft.update_refused", netns=self.netns, family=change.family, table=change.name,
                        update=change.update.describe(), error=error)  # fmt: skip
        text = textcmds.replace_text(change.table) if change.table is not None and change.elements is None else None
        if text is not None:
            error = self._run(text)
            if error is None or KERNEL_REFUSED in error:
                # Parsed and sent, and the kernel said no: the JSON document makes the same batch (the contract of
                # tests/kernel/test_nft_textcmds.py), so it would be refused too; run the failing transaction once only.
                return error, how
            # nft syntax refused (e.g. a name that is an nft keyword): nothing reached the kernel, JSON says it all
            log.warning("nft.text_refused", netns=self.netns, family=change.family, table=change.name, error=error)
        return self._run(transaction_text(change, checked=True)), how

    def _send_elements(self, table: NftTable, delta: NftElementDelta) -> str | Literal[False] | None:
        """The element change as our own nfnetlink batch: its error, None when applied; False when it cannot be sent
        so (no socket, a set type ``nfelems`` does not write, or too large), and libnftables should."""
        if self._nfnl is None or not nfelems.expressible(table, delta):
            return False
        requests = nfelems.requests(table.family, table.name, delta)
        if not self._nfnl.fits(requests):
            return False
        return self._nfnl.transaction(requests)

    def _run(self, text: str) -> str | None:
        """Run one transaction; its error, None when it was applied.

        As bytes only, not the text too (6 MB each at 100k elements), and before a large one the free heap handed
        back: libnftables' 80-135 MB for a 100k-element set comes on top (drivers.heap). Not before the small
        element changes of events: they gain nothing from it.
        """
        command = text.encode()
        del text
        if len(command) >= TRIM_BEFORE_BYTES:
            give_back_heap()
        try:
            self._nft.run(command)
        except NftError as exc:
            return exc.message
        return None

    def apply(self, changes: Sequence[NftChange]) -> ApplyResult:
        """Carry out each change as one transaction; a failed one leaves its table as it was."""
        applied: list[NftChange] = []
        failed: list[Failure] = []
        for change in changes:
            start = time.monotonic()
            error, how = self._transaction(change)
            took_ms = round((time.monotonic() - start) * 1000, 2)
            if error is None:
                applied.append(change)
                log.info(
                    "nft.apply_done",
                    netns=self.netns,
                    family=change.family,
                    table=change.name,
                    delete=change.table is None,
                    how=how,
                    rules=0 if change.table is None or change.elements is not None else len(change.table.rules),
                    elements=None if change.elements is None else change.elements.describe(),
                    took_ms=took_ms,
                )
            else:
                failed.append(Failure(op=change, error=error))
                log.warning("nft.apply_failed", netns=self.netns, family=change.family, table=change.name, error=error)
        return ApplyResult(applied=tuple(applied), failed=tuple(failed))
