"""Which namespaces a lab may touch: those it made, proven by the marker on their ``lo``, not by their name.

A namespace is the lab's when it has the lab's prefix (or is recorded in its
state file) and its ``lo`` alias is the lab's marker (``naming.marker``). With a
state file, the marker's token must be the state's token; without one (``up``
crashed before writing it, or someone removed it), any marker of the lab's name
counts. Everything else that has the prefix is a bystander: ``down`` leaves it
and its processes alone, and ``up`` refuses to start next to it.
"""

from __future__ import annotations

import attrs

from magw.lab.build import netns
from magw.lab.build.state import LabState
from magw.lab.spec import naming


@attrs.frozen(kw_only=True)
class Survey:
    """The namespaces of lab ``name`` (``ours``) and those that only look like it (``bystanders``)."""

    name: str
    ours: tuple[str, ...]
    bystanders: tuple[tuple[str, str], ...]  # (namespace, why it is not ours)


def survey(name: str, st: LabState | None) -> Survey:
    """Sort the existing namespaces with the lab's prefix, and those ``st`` records, into ours and bystanders."""
    prefix = naming.ns_prefix(name)
    present = set(netns.list_namespaces())
    recorded = set(st.namespaces) if st is not None else set()
    candidates = sorted(ns for ns in present if ns.startswith(prefix) or ns in recorded)
    ours: list[str] = []
    bystanders: list[tuple[str, str]] = []
    for ns in candidates:
        why = _not_ours(name, st, netns.lo_alias(ns))
        if why is None:
            ours.append(ns)
        else:
            bystanders.append((ns, why))
    return Survey(name=name, ours=tuple(ours), bystanders=tuple(bystanders))


def _not_ours(name: str, st: LabState | None, alias: str | None) -> str | None:
    """None if ``alias`` is lab ``name``'s marker (of the run ``st`` records, if any), else why not."""
    mark = naming.parse_marker(alias)
    if mark is None or mark[0] != name:
        return f"not made by lab {name}"
    if st is not None and mark[1] != st.token:
        return f"made by another run of lab {name}, not the one in its state file"
    return None


def bystander_line(ns: str, why: str) -> str:
    """The line ``down`` prints for a namespace it leaves alone."""
    return f"left alone: {ns} ({why})"
