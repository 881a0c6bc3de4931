"""The local cluster's Globalnet documents, assembled one at a time as they change.

A Globalnet document (a Namespace, Pod, Service, ServiceExport, one of the Globalnet kinds, or a
GlobalnetStatus) refers to nothing but itself (``magw.sources.file.assemble``, ``_check_globalnet_items``):
whether it is good, and the item it adds to ``Snapshot.globalnet``, depend on it alone and on its own last
good version. A source that knows which documents changed (the Kubernetes source does: one watch event, one
object) can therefore keep the parsed items and the sorted sections of its last pass and redo only the
changed documents: O(changed) Python per event, plus C-speed copies of the sections' tuples, where the whole
assembly parses every pod again (docs/performance.md, row 22c).

The rules are ``assemble()``'s:

- a document of another cluster is not part of the snapshot (and never a problem);
- a bad document is reported (its file, the document, the reason) and left out; if its last good version
  (the one in the last pass that made a snapshot) has other content, that version stays in its place
  (``kept_last_good``);
- ``commit()``, after a pass that made a snapshot, makes what was accepted the last good versions.

Two sides, for a source whose objects change on an event loop while a worker thread assembles:
``ItemSlots`` (the loop's: which documents each object gave, and which changed since the last ``take()``)
and ``GlobalnetItems`` (the worker's: the parsed, sorted sections). ``tests/unit/sources/
test_assembly_incremental.py`` holds their result equal to ``assemble()``'s over random histories.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import attrs

from magw.model.globalnet import Globalnet, Presorted, ref_key
from magw.snapshot.fields import FieldError
from magw.snapshot.globalnet import MODEL_FIELD, SECTION_KEYS, item_parser
from magw.sources.file.assemble import Problem
from magw.sources.file.documents import GLOBALNET_SECTIONS, Document

Ident = tuple[str, ...]
Changes = Mapping[Ident, Document | None]
Slot = TypeVar("Slot", bound=Hashable)

# A section whose changes in one pass exceed this share of its size is sorted again as a whole (the first pass,
# a relist) rather than by one insertion each, which moves the list's tail every time.
_BULK_SHARE = 8
_BULK_MIN = 64


class DuplicateItem(ValueError):
    """A document whose identity another object's document already has; ``str()`` is one line."""


class ItemSlots(Generic[Slot]):
    """Which Globalnet documents each source object (a slot) gave, and the identities changed since ``take()``."""

    def __init__(self) -> None:
        self._slots: dict[Slot, tuple[Document, ...]] = {}
        self._owner: dict[Ident, Slot] = {}
        self._pending: dict[Ident, Document | None] = {}

    def __contains__(self, slot: object) -> bool:
        return slot in self._slots

    def slots(self) -> list[Slot]:
        return list(self._slots)

    def documents(self) -> Iterator[Document]:
        for docs in self._slots.values():
            yield from docs

    def set(self, slot: Slot, docs: tuple[Document, ...]) -> None:
        """``slot``'s documents are now ``docs``; ``DuplicateItem`` (and nothing changed) when one of them has
        the identity of another slot's document."""
        for doc in docs:
            owner = self._owner.get(doc.ident)
            if owner is not None and owner != slot:
                other = next(d for d in self._slots[owner] if d.ident == doc.ident)
                raise DuplicateItem(f"{doc.where}: duplicate {doc.kind} document (also {other.where})")
        kept = {doc.ident for doc in docs}
        for doc in self._slots.get(slot, ()):
            if doc.ident not in kept:
                del self._owner[doc.ident]
                self._pending[doc.ident] = None
        for doc in docs:
            self._owner[doc.ident] = slot
            self._pending[doc.ident] = doc
        self._slots[slot] = docs

    def drop(self, slot: Slot) -> None:
        """The object behind ``slot`` is gone: its documents too."""
        self.set(slot, ())
        del self._slots[slot]

    def take(self) -> dict[Ident, Document | None]:
        """The identities changed since the last ``take()``: their document now, or None when it is gone."""
        pending, self._pending = self._pending, {}
        return pending


class _Section:
    """One section's accepted items in the order ``Globalnet`` keeps them (``bisect``: one memmove per change)."""

    def __init__(self) -> None:
        self.items: dict[Any, Any] = {}
        self._keys: list[Any] = []
        self._values: list[Any] = []
        self._tuple: tuple[Any, ...] | None = ()

    def update(self, touched: Mapping[Any, Any]) -> None:
        """``touched``: key -> the item now, or None when it is gone."""
        if not touched:
            return
        self._tuple = None
        for key, item in touched.items():
            if item is None:
                self.items.pop(key, None)
            else:
                self.items[key] = item
        if len(touched) > max(_BULK_MIN, len(self._keys) // _BULK_SHARE):
            self._keys = sorted(self.items)
            self._values = [self.items[k] for k in self._keys]
            return
        keys, values = self._keys, self._values
        for key, item in touched.items():
            at = bisect_left(keys, key)
            present = at < len(keys) and keys[at] == key
            if item is None:
                if present:
                    del keys[at], values[at]
            elif present:
                values[at] = item
            else:
                keys.insert(at, key)
                values.insert(at, item)

    def ordered(self) -> tuple[Any, ...]:
        if self._tuple is None:
            self._tuple = tuple(self._values)
        return self._tuple


def _key(section: str, item: Any) -> Any:
    """The order within a section: ``Globalnet``'s (statuses by their reference, ``ObjectRef``'s field order)."""
    if section == "statuses":
        ref = item[0]
        return (ref.kind, ref.namespace, ref.name)
    return ref_key(item)


def parse_item(doc: Document) -> tuple[Any, str | None]:
    """(the item, None) or (None, the reason it is bad), as ``assemble()`` words it."""
    try:
        fields = {k: v for k, v in doc.fields.items() if k != "cluster"}
        return item_parser(GLOBALNET_SECTIONS[doc.kind])(fields, ""), None
    except FieldError as exc:
        return None, f"{exc.path}: {exc.reason}" if exc.path else exc.reason


@attrs.frozen
class _Accepted:
    doc: Document
    section: str
    key: Any


class GlobalnetItems:
    """The local cluster's Globalnet documents, parsed and sorted, changed one document at a time.

    Not thread-safe: one pass at a time (the sources hold their lock)."""

    def __init__(self, local: str) -> None:
        self.local = local
        self._given: dict[Ident, Document] = {}
        self._accepted: dict[Ident, _Accepted] = {}
        self._last_good: dict[Ident, Document] = {}
        self._uncommitted: set[Ident] = set()
        self._problems: dict[Ident, Problem] = {}
        self._sections = {section: _Section() for section in SECTION_KEYS}
        self._globalnet: Globalnet | None = Globalnet()
        self._whole = True  # the parsed state holds every given document (False after a pass that raised)
        self.decided = 0  # documents decided since the start (for the tests that count the work)

    @property
    def accepted(self) -> int:
        return len(self._accepted)

    def problems(self) -> tuple[Problem, ...]:
        return tuple(self._problems.values())

    def apply(self, changes: Changes) -> None:
        """Take the changed documents (None: gone). An exception half-way forgets the parsed state: the next
        call decides every document again, so no pass builds on half of one."""
        for ident, doc in changes.items():
            if doc is None:
                self._given.pop(ident, None)
            else:
                self._given[ident] = doc
        idents: Iterable[Ident] = changes.keys() if self._whole else list(self._given)
        try:
            self._decide(idents)
        except Exception:
            self._forget()
            raise
        self._whole = True

    def _forget(self) -> None:
        self._uncommitted.update(self._accepted)
        self._uncommitted.update(self._last_good)  # whatever the next decisions say, they are booked at commit
        self._accepted.clear()
        self._problems.clear()
        self._sections = {section: _Section() for section in SECTION_KEYS}
        self._globalnet = None
        self._whole = False

    def _decide(self, idents: Iterable[Ident]) -> None:
        touched: dict[str, dict[Any, Any]] = {}
        for ident in idents:
            self.decided += 1
            self._uncommitted.add(ident)
            self._problems.pop(ident, None)
            doc = self._given.get(ident)
            new: tuple[Document, Any] | None = None
            if doc is not None and doc.fields.get("cluster") == self.local:
                item, error = parse_item(doc)
                new = (doc, item) if error is None else self._fallback(ident, doc, error)
            old = self._accepted.pop(ident, None)
            if old is not None:
                touched.setdefault(old.section, {})[old.key] = None
            if new is not None:
                section = GLOBALNET_SECTIONS[new[0].kind]
                key = _key(section, new[1])
                self._accepted[ident] = _Accepted(doc=new[0], section=section, key=key)
                touched.setdefault(section, {})[key] = new[1]
        for section, changed in touched.items():
            self._sections[section].update(changed)
        if touched:
            self._globalnet = None

    def _fallback(self, ident: Ident, doc: Document, error: str) -> tuple[Document, Any] | None:
        good = self._last_good.get(ident)
        new: tuple[Document, Any] | None = None
        if good is not None and not good.same_content(doc):
            item, good_error = parse_item(good)
            if good_error is None:
                new = (good, item)
        self._problems[ident] = Problem(file=doc.file, error=f"{doc.where}: {error}", kept_last_good=new is not None)
        return new

    def globalnet(self) -> Globalnet:
        """The accepted items as ``Snapshot.globalnet`` (the same object while nothing changed)."""
        if self._globalnet is None:
            values = {MODEL_FIELD[s]: Presorted(self._sections[s].ordered()) for s in SECTION_KEYS}
            self._globalnet = Globalnet(**values)
        return self._globalnet

    def commit(self) -> None:
        """The pass made a snapshot: what it accepted are now the last good versions."""
        for ident in self._uncommitted:
            accepted = self._accepted.get(ident)
            if accepted is None:
                self._last_good.pop(ident, None)
            else:
                self._last_good[ident] = accepted.doc
        self._uncommitted.clear()
