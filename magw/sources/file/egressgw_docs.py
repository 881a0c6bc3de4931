"""The egress gateway's broker documents of one cluster, checked among themselves before assembly.

``EgressConfig``, ``EgressVIP`` and ``EgressVIPStatus`` refer to nothing outside the egress section (a VIP
must lie in the config's ranges and have a name, vrid and address of its own), so a bad one can be found
here, with the egress documents alone, and left out without sending the whole document set through
``magw.sources.file.assemble``'s walk, which re-parses the snapshot once per document (thousands with Globalnet).

The walk here is the same as that one, on the egress documents only: the config first, then the VIPs and
statuses, documents unchanged since the last good snapshot before changed or new ones (so that an edit that
conflicts with an established VIP is the one left out); a refused document's last good version stays in
its place when it still fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from magw.snapshot.egressgw import parse_egressgw
from magw.snapshot.fields import FieldError
from magw.sources.file.documents import EGRESSGW_SECTIONS, Document

Ident = tuple[str, ...]
# (file, "where: reason", kept_last_good): assemble makes its Problem of it.
EgressProblem = tuple[str, str, bool]


def egressgw_section(docs: Sequence[Document]) -> dict[str, Any]:
    """The snapshot's ``egress:`` section made of broker documents (their ``cluster`` field left out)."""
    out: dict[str, Any] = {}
    for doc in docs:
        body = {k: v for k, v in doc.fields.items() if k != "cluster"}
        if doc.kind == "EgressConfig":
            out["config"] = body
        else:
            out.setdefault(EGRESSGW_SECTIONS[doc.kind], []).append(body)
    return out


def _error(accepted: Sequence[Document], doc: Document) -> str | None:
    """None when ``doc`` fits after ``accepted``; else the reason, its path relative to ``doc``."""
    for other in accepted:
        if other.ident == doc.ident:
            return f"duplicate {doc.kind} document (also {other.where})"
    try:
        parse_egressgw(egressgw_section([*accepted, doc]), "")
    except FieldError as exc:
        prefix = "config"
        if doc.kind != "EgressConfig":
            position = sum(1 for d in accepted if d.kind == doc.kind)
            prefix = f"{EGRESSGW_SECTIONS[doc.kind]}[{position}]"
        path = exc.path
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            path = path[len(prefix) :].lstrip(".")
        return f"{path}: {exc.reason}" if path else exc.reason
    return None


def check_egressgw_docs(
    local: str, docs: Sequence[Document], last_good: Mapping[Ident, Document]
) -> tuple[list[Document], list[EgressProblem]]:
    """``docs`` without the egress documents of ``local`` that do not fit (each reported once)."""
    mine = [d for d in docs if d.kind in EGRESSGW_SECTIONS and d.fields.get("cluster") == local]
    if not mine:
        return list(docs), []
    others = [d for d in docs if not (d.kind in EGRESSGW_SECTIONS and d.fields.get("cluster") == local)]

    def key(doc: Document) -> tuple[int, int, str, int]:
        good = last_good.get(doc.ident)
        unchanged = 0 if good is not None and good.same_content(doc) else 1
        return (0 if doc.kind == "EgressConfig" else 1, unchanged, doc.file, doc.index)

    accepted: list[Document] = []
    problems: list[EgressProblem] = []
    for doc in sorted(mine, key=key):
        reason = _error(accepted, doc)
        if reason is None:
            accepted.append(doc)
            continue
        good = last_good.get(doc.ident)
        kept = good is not None and not good.same_content(doc) and _error(accepted, good) is None
        if kept and good is not None:
            accepted.append(good)
        problems.append((doc.file, f"{doc.where}: {reason}", kept))
    return [*others, *accepted], problems
