"""``assemble()`` for a source that knows what changed: the Globalnet items one by one, the rest as a whole.

The documents split in two:

- the **core** (Clusters, the Config, Nodes, Endpoints, Health, the egress gateway's kinds): few, and related
  to each other (a Node's CIDR inside its cluster's, overlaps between clusters, egress VIPs inside the
  EgressConfig's ranges). They go through ``assemble()`` as before, and only when one of them changed;
- the local cluster's **Globalnet documents** (``magw.sources.file.items``): 100k pods in a big cluster,
  each independent of every other document. Only the changed ones are parsed again.

The snapshot is the core's with the Globalnet items put in. A pass where only pods changed costs
O(changed pods) in Python; the sections' tuples are copied in C and the core's snapshot is reused. Fail
closed as ``assemble()``: without a core snapshot (no local Cluster, a refused Config) there is none.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from magw.model import Snapshot
from magw.snapshot.load import parse_snapshot
from magw.sources.file.assemble import CONFIG_REFUSED, Assembly, Ident, Parse, assemble
from magw.sources.file.documents import Document
from magw.sources.file.items import Changes, GlobalnetItems


def _unchanged(old: Sequence[Document], new: Sequence[Document]) -> bool:
    """The same documents: the very objects, or equal ones whose values have the same types (``1 == True``, but
    a Node's ``gateway: 1`` is refused where ``gateway: true`` is not). A Kubernetes Node's status heartbeat
    maps to an equal document: the core is not judged again for it."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new, strict=True):
        if a is not b and (a != b or any(type(v) is not type(b.fields[k]) for k, v in a.fields.items())):
            return False
    return True


@attrs.frozen
class _Core:
    docs: Sequence[Document]
    config_refused: bool
    assembly: Assembly


class IncrementalAssembly:
    """One source's assembly across passes. ``assemble()`` takes the core documents (all of them, as they are
    now) and the Globalnet documents changed since the last pass. Not thread-safe: one pass at a time."""

    def __init__(self, local: str, *, parse: Parse = parse_snapshot) -> None:
        self.local = local
        self.parse = parse
        self.items = GlobalnetItems(local)
        self.core_passes = 0  # how often the core went through assemble() (for the tests that count the work)
        self._last_good: dict[Ident, Document] = {}  # the core's, of the last pass that made a snapshot
        self._core: _Core | None = None
        self._snapshot: tuple[Snapshot, Snapshot, object] | None = None  # (core's, with the items, their Globalnet)

    @property
    def last_good(self) -> dict[Ident, Document]:
        """The core documents of the last snapshot (the Globalnet ones are ``items``'s own)."""
        return self._last_good

    def assemble(self, core: Sequence[Document], changes: Changes, *, config_refused: bool = False) -> Assembly:
        """The snapshot now; ``Assembly.accepted`` holds the core documents (the items: ``items.accepted``)."""
        self.items.apply(changes)
        done = self._core
        # Judged again only when a core document changed. Not when only the last good versions did (after
        # every pass that changed the core): ``assemble()`` on the documents it accepted gives the same result
        # again (those documents come first and fit together; a refused one conflicts with some of them
        # still; a refused one's kept version is its last good one), and the property test agrees.
        if done is None or done.config_refused != config_refused or not _unchanged(done.docs, core):
            assembly = assemble(self.local, core, self._last_good, parse=self.parse, config_refused=config_refused)
            done = self._core = _Core(docs=tuple(core), config_refused=config_refused, assembly=assembly)
            self.core_passes += 1
        if done.assembly.snapshot is None:
            if done.assembly.missing != CONFIG_REFUSED:  # no local Cluster: nothing else was judged
                return done.assembly
            return attrs.evolve(done.assembly, problems=(*done.assembly.problems, *self.items.problems()))
        problems = (*done.assembly.problems, *self.items.problems())
        snapshot = self._with_items(done.assembly.snapshot)
        self._last_good = {d.ident: d for d in done.assembly.accepted}  # a new dict: the source reads the old
        self.items.commit()
        return Assembly(snapshot=snapshot, accepted=done.assembly.accepted, problems=problems)

    def _with_items(self, core: Snapshot) -> Snapshot:
        globalnet = self.items.globalnet()
        last = self._snapshot
        if last is not None and last[0] is core and last[2] is globalnet:
            return last[1]
        snapshot = attrs.evolve(core, globalnet=globalnet)
        self._snapshot = (core, snapshot, globalnet)
        return snapshot
