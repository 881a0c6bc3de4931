"""Assemble broker documents into one cluster's Snapshot, leaving out the bad ones.

The snapshot of local cluster L holds every Cluster, the Config, L's Nodes, every
Endpoint and the Health document, in the format of ``magw.snapshot.load``, which
validates it. When the whole set is valid (the usual case) that is one parse.
Otherwise documents are added one at a time (runs of them by bisection where
that gives the same result, ``_Walk.add_run``), and each one whose addition makes
the snapshot invalid is reported (file, document, field, reason) and left out;
if an earlier version of the same document was part of the last good snapshot,
that version stays in its place, so a broken edit never withdraws state.

Order of that walk: L's Cluster first, then other Clusters, Config, Nodes,
Endpoints, Health (each may refer only to what comes before); inside a kind the
documents unchanged since the last good snapshot come before changed or new
ones, so a change that conflicts with established state is the one left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from magw.model import Snapshot
from magw.snapshot.cache import SnapshotParser
from magw.snapshot.fields import FieldError
from magw.snapshot.globalnet import item_parser
from magw.snapshot.load import SnapshotError, parse_snapshot
from magw.sources.file.documents import EGRESSGW_SECTIONS, GLOBALNET_SECTIONS, NODE_EXTRA_KEYS, Document
from magw.sources.file.egressgw_docs import check_egressgw_docs, egressgw_section

Ident = tuple[str, ...]
Parse = Callable[..., Snapshot]

_RANK = {
    "Cluster": 0,
    "Config": 1,
    "Node": 2,
    "Endpoint": 3,
    "Health": 4,
    **dict.fromkeys(GLOBALNET_SECTIONS, 5),
    "EgressConfig": 6,  # before the VIPs: their addresses must lie in its ranges
    "EgressVIP": 7,
    "EgressVIPStatus": 7,
    "Lease": 8,
}
_SECTION = {"Cluster": "clusters", "Node": "nodes", "Endpoint": "endpoints"}
# Up to Health, a document refers only to documents of lower ranks and every other check is between two
# documents (duplicates, overlaps, VTEPs): in walk order, if a list of documents is valid so is each of
# its prefixes. The walk takes runs of these kinds in a few parses (``_Walk.add_run``).
_HEREDITARY = _RANK["Health"]


@attrs.frozen(kw_only=True)
class Problem:
    """A document left out (or replaced by its last good version)."""

    file: str
    error: str
    kept_last_good: bool = False


@attrs.frozen(kw_only=True)
class Assembly:
    snapshot: Snapshot | None
    accepted: tuple[Document, ...]
    problems: tuple[Problem, ...] = ()
    missing: str | None = None


def _in_snapshot(doc: Document, local: str) -> bool:
    if doc.kind == "Lease":
        return False
    if doc.kind == "Node" or doc.kind in GLOBALNET_SECTIONS or doc.kind in EGRESSGW_SECTIONS:
        return doc.fields.get("cluster") == local
    return True


def snapshot_dict(local: str, docs: Sequence[Document]) -> dict[str, Any]:
    """The documents as one snapshot document (``magw.snapshot.load`` format)."""
    out: dict[str, Any] = {"local_cluster": local, "clusters": [], "nodes": [], "endpoints": []}
    egress: list[Document] = []
    for doc in docs:
        if doc.kind == "Config":
            out.update(doc.fields)
        elif doc.kind == "Health":
            out["health"] = dict(doc.fields)
        elif doc.kind == "Node":
            if doc.fields.get("cluster") == local:
                out["nodes"].append({k: v for k, v in doc.fields.items() if k not in ("cluster", *NODE_EXTRA_KEYS)})
        elif doc.kind in GLOBALNET_SECTIONS:
            if doc.fields.get("cluster") == local:
                section = out.setdefault("globalnet", {}).setdefault(GLOBALNET_SECTIONS[doc.kind], [])
                section.append({k: v for k, v in doc.fields.items() if k != "cluster"})
        elif doc.kind in EGRESSGW_SECTIONS:
            if doc.fields.get("cluster") == local:
                egress.append(doc)
        elif doc.kind == "Lease":
            continue
        else:
            out[_SECTION[doc.kind]].append(dict(doc.fields))
    if egress:
        out["egress"] = egressgw_section(egress)
    return out


def _reason(exc: SnapshotError, doc: Document, accepted: Sequence[Document], local: str) -> str:
    """The parser's error with the path made relative to ``doc`` when it points into it."""
    prefix = ""
    if doc.kind in _SECTION:
        position = sum(1 for d in accepted if d.kind == doc.kind and _in_snapshot(d, local))
        prefix = f"{_SECTION[doc.kind]}[{position}]"
    elif doc.kind == "Health":
        prefix = "health"
    elif doc.kind in GLOBALNET_SECTIONS:
        position = sum(1 for d in accepted if d.kind == doc.kind and _in_snapshot(d, local))
        prefix = f"globalnet.{GLOBALNET_SECTIONS[doc.kind]}[{position}]"
    elif doc.kind == "EgressConfig":
        prefix = "egress.config"
    elif doc.kind in EGRESSGW_SECTIONS:
        position = sum(1 for d in accepted if d.kind == doc.kind and _in_snapshot(d, local))
        prefix = f"egress.{EGRESSGW_SECTIONS[doc.kind]}[{position}]"
    path = exc.path
    if prefix and (path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")):
        path = path[len(prefix) :].lstrip(".")
    return f"{path}: {exc.reason}" if path else exc.reason


def _conflict(accepted: Sequence[Document], doc: Document) -> str | None:
    for other in accepted:
        if other.ident == doc.ident:
            return f"duplicate {doc.kind} document (also {other.where})"
    return None


@attrs.define
class _Walk:
    local: str
    parse: Parse
    accepted: list[Document] = attrs.field(factory=list)
    problems: list[Problem] = attrs.field(factory=list)

    def fits(self, doc: Document) -> str | None:
        """None when ``doc`` can join the accepted documents, else the reason it cannot."""
        conflict = _conflict(self.accepted, doc)
        if conflict is not None or not _in_snapshot(doc, self.local):
            return conflict
        try:
            self.parse(snapshot_dict(self.local, [*self.accepted, doc]), source=doc.file)
        except SnapshotError as exc:
            return _reason(exc, doc, self.accepted, self.local)
        return None

    def add_run(self, run: Sequence[Document], last_good: Mapping[Ident, Document]) -> None:
        """``add`` each document of ``run`` (all of kinds up to Health), in O(log n) parses per bad document.

        Shaped for speed (docs/performance.md): adding documents one at a time parses the snapshot once per document;
        with one bad Endpoint among 100 Clusters of 100k CIDRs that took minutes (with the parse cache of
        ``magw.snapshot.cache`` still 0.15 s and quadratic in the number of documents). Since the prefixes
        of a valid run are valid (``_HEREDITARY``), the documents ``add`` would accept before the first one
        it refuses are the longest valid prefix, found by bisection; that one goes through ``add``.
        """
        while run:
            taken = self._valid_prefix(run)
            self.accepted.extend(run[:taken])
            if taken == len(run):
                return
            self.add(run[taken], last_good.get(run[taken].ident))
            run = run[taken + 1 :]

    def _valid_prefix(self, run: Sequence[Document]) -> int:
        """How many documents at the start of ``run`` join the accepted ones (which are valid) one by one."""
        seen = {d.ident for d in self.accepted}
        stop = len(run)
        for i, doc in enumerate(run):  # a duplicate is refused without a parse: the run stops before it
            if doc.ident in seen:
                stop = i
                break
            seen.add(doc.ident)
        if self._valid(run[:stop]):
            return stop
        good, bad = 0, stop  # accepted + run[:good] is valid, accepted + run[:bad] is not
        while bad - good > 1:
            middle = (good + bad) // 2
            if self._valid(run[:middle]):
                good = middle
            else:
                bad = middle
        return good

    def _valid(self, docs: Sequence[Document]) -> bool:
        try:
            self.parse(snapshot_dict(self.local, [*self.accepted, *docs]), source="broker")
        except SnapshotError:
            return False
        return True

    def add(self, doc: Document, fallback: Document | None) -> None:
        reason = self.fits(doc)
        if reason is None:
            self.accepted.append(doc)
            return
        kept = fallback is not None and not fallback.same_content(doc) and self.fits(fallback) is None
        if kept and fallback is not None:
            self.accepted.append(fallback)
        self.problems.append(Problem(file=doc.file, error=f"{doc.where}: {reason}", kept_last_good=kept))


def _order(local: str, docs: Sequence[Document], last_good: Mapping[Ident, Document]) -> list[Document]:
    def key(doc: Document) -> tuple[int, int, int, str, int]:
        local_first = 0 if doc.ident == ("Cluster", local) else 1
        good = last_good.get(doc.ident)
        unchanged = 0 if good is not None and good.same_content(doc) else 1
        return (_RANK[doc.kind], local_first, unchanged, doc.file, doc.index)

    return sorted(docs, key=key)


CONFIG_REFUSED = (
    "the Config was refused and no earlier one was good: not planning with the defaults, which could turn an "
    "encrypted cable (cable: wireguard) into plain VXLAN"
)


def assemble(
    local: str,
    docs: Sequence[Document],
    last_good: Mapping[Ident, Document],
    *,
    parse: Parse = parse_snapshot,
    config_refused: bool = False,
) -> Assembly:
    """The snapshot of ``local`` from ``docs``; ``last_good`` holds the documents of the last good snapshot.

    A ``SnapshotParser`` given as ``parse`` keeps afterwards only what this pass used (its ``collect``):
    memory stays that of one snapshot, whichever source assembles.

    Fail closed on the Config: when a Config document was given but refused (or, ``config_refused``, the source
    could not even make one) and no earlier good one stands in, there is no snapshot (``missing`` says why)
    rather than one planned with the default settings, whose cable is plain VXLAN.
    """
    assembly = _assemble(local, docs, last_good, parse)
    given = config_refused or any(d.kind == "Config" for d in docs)
    if assembly.snapshot is not None and given and not any(d.kind == "Config" for d in assembly.accepted):
        assembly = Assembly(snapshot=None, accepted=(), problems=assembly.problems, missing=CONFIG_REFUSED)
    if isinstance(parse, SnapshotParser):
        parse.collect()
    return assembly


def _assemble(local: str, docs: Sequence[Document], last_good: Mapping[Ident, Document], parse: Parse) -> Assembly:
    ordered = _order(local, docs, last_good)
    if not any(d.ident == ("Cluster", local) for d in ordered):
        return Assembly(snapshot=None, accepted=(), missing=f"no Cluster document with id {local!r}")
    idents = [d.ident for d in ordered]
    unique = len(set(idents)) == len(idents)
    if unique:  # the usual case: everything valid, one parse
        try:
            snap = parse(snapshot_dict(local, ordered), source="broker")
        except SnapshotError:
            pass
        else:
            return Assembly(snapshot=snap, accepted=tuple(ordered))
    docs, bad = _check_globalnet_items(local, ordered, last_good)
    docs, bad_egress = check_egressgw_docs(local, docs, last_good)
    bad = [*bad, *(Problem(file=f, error=e, kept_last_good=k) for f, e, k in bad_egress)]
    ordered = _order(local, docs, last_good)
    if unique and bad:  # the bad Globalnet documents were all that was wrong: still no walk
        try:
            snap = parse(snapshot_dict(local, ordered), source="broker")
        except SnapshotError:
            pass
        else:
            return Assembly(snapshot=snap, accepted=tuple(ordered), problems=tuple(bad))
    walk = _Walk(local=local, parse=parse)
    at = 0
    while at < len(ordered):
        doc = ordered[at]
        if walk.accepted and _RANK[doc.kind] <= _HEREDITARY:
            end = at
            while end < len(ordered) and _RANK[ordered[end].kind] <= _HEREDITARY:
                end += 1
            walk.add_run(ordered[at:end], last_good)
            at = end
            continue
        walk.add(doc, last_good.get(doc.ident))
        at += 1
        if doc.kind == "Cluster" and not walk.accepted:
            # Without the local cluster nothing else can be judged: stop here rather than blame everything.
            return Assembly(
                snapshot=None,
                accepted=(),
                problems=tuple(walk.problems),
                missing=f"no valid Cluster document with id {local!r}",
            )
    snap = parse(snapshot_dict(local, walk.accepted), source="broker")
    return Assembly(snapshot=snap, accepted=tuple(walk.accepted), problems=(*bad, *walk.problems))


def _item_error(doc: Document) -> str | None:
    try:
        item_parser(GLOBALNET_SECTIONS[doc.kind])({k: v for k, v in doc.fields.items() if k != "cluster"}, "")
    except FieldError as exc:
        return f"{exc.path}: {exc.reason}" if exc.path else exc.reason
    return None


def _check_globalnet_items(
    local: str, docs: Sequence[Document], last_good: Mapping[Ident, Document]
) -> tuple[list[Document], list[Problem]]:
    """Globalnet documents of ``local`` checked one by one (they refer to nothing but themselves), so that a
    bad one is left out here and never sends the whole set of thousands of documents through the walk
    below, which re-parses the snapshot once per document."""
    out: list[Document] = []
    problems: list[Problem] = []
    for doc in docs:
        if doc.kind not in GLOBALNET_SECTIONS or doc.fields.get("cluster") != local:
            out.append(doc)
            continue
        error = _item_error(doc)
        if error is None:
            out.append(doc)
            continue
        good = last_good.get(doc.ident)
        kept = good is not None and not good.same_content(doc) and _item_error(good) is None
        if kept and good is not None:
            out.append(good)
        problems.append(Problem(file=doc.file, error=f"{doc.where}: {error}", kept_last_good=kept))
    return out, problems
