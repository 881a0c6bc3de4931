"""The pure diff of OVN NB rows: ``ovn_diff(desired, observed) -> OvnChangeSet``.

Like the kernel diff (``magw.reconcile.diff``): rows with the same key and other fields are updated in place
(a pinned router moving chassis, a policy's ECMP set losing a gateway); creates come in dependency order
(``OVN_KINDS``), deletes in reverse. Two observed rows with one key (a row of ours drifted in a column of its
key into another's) are one too many: the second is deleted. An empty change set means the NB already holds
exactly our plan, so a sync with nothing to do sends no transaction at all.
"""

from __future__ import annotations

import attrs

from magw.desired.ovn.rows import OVN_KINDS, OvnRow, OvnState


@attrs.frozen
class OvnUpdate:
    old: OvnRow
    new: OvnRow


@attrs.frozen(kw_only=True)
class OvnChangeSet:
    creates: tuple[OvnRow, ...] = ()
    updates: tuple[OvnUpdate, ...] = ()
    deletes: tuple[OvnRow, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.creates or self.updates or self.deletes)

    def __len__(self) -> int:
        return len(self.creates) + len(self.updates) + len(self.deletes)

    def summary(self) -> str:
        return f"{len(self.creates)} create, {len(self.updates)} update, {len(self.deletes)} delete"


def ovn_diff(desired: OvnState, observed: OvnState) -> OvnChangeSet:
    creates: list[OvnRow] = []
    updates: list[OvnUpdate] = []
    deletes: list[OvnRow] = []
    for kind in OVN_KINDS:
        have: dict[object, OvnRow] = {}
        for r in observed.of_kind(kind):
            have.setdefault(r.key, r)
        want = {r.key: r for r in desired.of_kind(kind)}
        for key, row in want.items():
            old = have.get(key)
            if old is None:
                creates.append(row)
            elif old != row:
                updates.append(OvnUpdate(old, row))
    for kind in reversed(OVN_KINDS):
        want_keys = {r.key for r in desired.of_kind(kind)}
        seen: set[object] = set()
        for r in observed.of_kind(kind):
            if r.key not in want_keys or r.key in seen:  # a row no longer planned, or a second one with a key
                deletes.append(r)
            seen.add(r.key)
    return OvnChangeSet(creates=tuple(creates), updates=tuple(updates), deletes=tuple(deletes))
