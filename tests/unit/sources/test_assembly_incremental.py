"""The incremental assembly (magw.sources.file.incremental and .items) against ``assemble()``.

Random histories of documents (good, bad and missing Clusters, Config and Nodes; good, bad, foreign and
missing Namespaces, Pods, GlobalEgressIPs and their statuses) go through one ``IncrementalAssembly``, fed
only what changed, as the Kubernetes source feeds it; after every step its snapshot, problems and missing
reason must be those of ``assemble()`` over every document, with ``assemble()``'s own last good versions kept
beside it. Then: the work is what changed, and a pass that raises half-way does not leave half a state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.snapshot.cache import SnapshotParser
from magw.snapshot.load import parse_snapshot
from magw.sources.file import items as items_module
from magw.sources.file.assemble import Assembly, Ident, assemble
from magw.sources.file.documents import Document, to_document
from magw.sources.file.incremental import IncrementalAssembly
from magw.sources.file.items import ItemSlots

LOCAL = "east"
Slot = tuple[str, str]

CORE: dict[Slot, tuple[list[dict[str, Any]], ...]] = {
    ("Cluster", "east"): (
        [{"kind": "Cluster", "id": "east", "pod_cidrs": ["10.1.0.0/16"], "service_cidrs": ["100.1.0.0/16"],
          "global_cidrs": ["242.1.0.0/16"]}],
        [{"kind": "Cluster", "id": "east", "pod_cidrs": ["not-a-cidr"], "service_cidrs": ["100.1.0.0/16"]}],
    ),
    ("Cluster", "west"): (
        [{"kind": "Cluster", "id": "west", "pod_cidrs": ["10.2.0.0/16"], "service_cidrs": ["100.2.0.0/16"]}],
        [{"kind": "Cluster", "id": "west", "pod_cidrs": ["10.1.0.0/16"], "service_cidrs": ["100.2.0.0/16"]}],
    ),
    ("Cluster", "north"): (  # north's second version overlaps west's first: which one wins is the walk's order
        [{"kind": "Cluster", "id": "north", "pod_cidrs": ["10.3.0.0/16"], "service_cidrs": ["100.3.0.0/16"]}],
        [{"kind": "Cluster", "id": "north", "pod_cidrs": ["10.2.0.0/16"], "service_cidrs": ["100.3.0.0/16"]}],
    ),
    ("Config", ""): (
        [{"kind": "Config", "multi_active_gateway": True, "strategy": "resilient"}],
        [{"kind": "Config", "strategy": "no-such-strategy"}],
    ),
    ("Node", "e-gw1"): (
        [{"kind": "Node", "cluster": "east", "name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1",
          "gateway": True}],
        [{"kind": "Node", "cluster": "east", "name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.9.1.1",
          "gateway": True}],
    ),
}  # fmt: skip


def _pod(ns: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "Pod", "cluster": LOCAL, "namespace": ns, "name": name, **extra}


def _egress(ns: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "GlobalEgressIP", "cluster": LOCAL, "namespace": ns, "name": name, **extra}


def _status(ns: str, name: str, **extra: Any) -> dict[str, Any]:
    ref = {"kind": "GlobalEgressIP", "namespace": ns, "name": name}
    return {"kind": "GlobalnetStatus", "cluster": LOCAL, "object": ref, **extra}


ITEMS: dict[Slot, tuple[list[dict[str, Any]], ...]] = {
    ("Namespace", "a"): (
        [{"kind": "Namespace", "cluster": LOCAL, "name": "a"}],
        [{"kind": "Namespace", "cluster": LOCAL, "name": "a", "labels": {"team": "x"}}],
        [{"kind": "Namespace", "cluster": LOCAL, "name": "a", "labels": {"team": 7}}],  # bad
    ),
    **{
        ("Pod", f"{ns}/{name}"): (
            [_pod(ns, name, ip="10.1.4.2", labels={"app": "x"}, node="e-gw1")],
            [_pod(ns, name, ip="10.1.4.3", labels={"app": "y"}, node="e-gw1")],
            [_pod(ns, name, phase="Pending")],
            [_pod(ns, name, ip="not-an-ip")],  # bad
            [_pod(ns, name, phase="Sleeping")],  # bad
            [{**_pod(ns, name, ip="10.2.0.9"), "cluster": "west"}],  # another cluster's: not in the snapshot
        )
        for ns, name in (("a", "p0"), ("a", "p1"), ("b", "p0"), ("b", "p2"), ("c", "p9"))
    },
    ("GlobalEgressIP", "a/g"): (
        [_egress("a", "g", numberOfIPs=1)],
        [_egress("a", "g", numberOfIPs=2, podSelector={"matchLabels": {"app": "x"}}),
         _status("a", "g", allocatedIPs=["242.1.0.1", "242.1.0.2"])],
        [_egress("a", "g", numberOfIPs=1), _status("a", "g", allocatedIPs=["not-an-ip"])],  # the status is bad
        [_egress("a", "g", numberOfIPs="many")],  # bad
    ),
}  # fmt: skip

SLOTS = sorted({*CORE, *ITEMS})


def _docs(slot: Slot, variant: int) -> tuple[Document, ...]:
    raws = {**CORE, **ITEMS}[slot][variant]
    file = f"{slot[0].lower()}-{slot[1].replace('/', '-') or 'config'}-v{variant}.yaml"
    return tuple(to_document(raw, file=file, index=i) for i, raw in enumerate(raws))


class Both:
    """The incremental assembly and ``assemble()`` side by side, over the same documents."""

    def __init__(self) -> None:
        self.incremental = IncrementalAssembly(LOCAL, parse=SnapshotParser())
        self.tracker: ItemSlots[Slot] = ItemSlots()
        self.core: dict[Slot, tuple[Document, ...]] = {}
        self.last_good: dict[Ident, Document] = {}

    def set(self, slot: Slot, variant: int | None) -> None:
        if slot in CORE:
            if variant is None:
                self.core.pop(slot, None)
            else:
                self.core[slot] = _docs(slot, variant)
        elif variant is None:
            if slot in self.tracker:
                self.tracker.drop(slot)
        else:
            self.tracker.set(slot, _docs(slot, variant))

    def core_docs(self) -> list[Document]:
        return [d for slot in sorted(self.core) for d in self.core[slot]]

    def step(self) -> tuple[Assembly, Assembly]:
        core = self.core_docs()
        mine = self.incremental.assemble(core, self.tracker.take())
        everything = core + sorted(self.tracker.documents(), key=lambda d: (d.file, d.index))
        full = assemble(LOCAL, everything, self.last_good, parse=parse_snapshot)
        if full.snapshot is not None:
            self.last_good = {d.ident: d for d in full.accepted}
        return mine, full


def _problems(assembly: Assembly) -> list[tuple[str, str, bool]]:
    return sorted((p.file, p.error, p.kept_last_good) for p in assembly.problems)


def _compare(mine: Assembly, full: Assembly) -> None:
    assert mine.snapshot == full.snapshot
    assert _problems(mine) == _problems(full)
    assert mine.missing == full.missing
    assert (mine.snapshot is None) == (full.snapshot is None)


@pytest.fixture(params=["by insertion", "bulk re-sort"])
def bulk(request: pytest.FixtureRequest) -> Iterator[None]:
    """Both ways a section takes its changes: one insertion each, or sorted again as a whole."""
    saved = items_module._BULK_MIN, items_module._BULK_SHARE
    if request.param == "bulk re-sort":
        items_module._BULK_MIN, items_module._BULK_SHARE = 0, 1_000_000
    try:
        yield
    finally:
        items_module._BULK_MIN, items_module._BULK_SHARE = saved


_VARIANTS = {slot: len({**CORE, **ITEMS}[slot]) for slot in SLOTS}
_STEP = st.sampled_from(SLOTS).flatmap(
    lambda slot: st.tuples(st.just(slot), st.none() | st.integers(0, _VARIANTS[slot] - 1))
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.lists(_STEP, max_size=12), history=st.lists(st.lists(_STEP, min_size=1, max_size=3), max_size=25))
def test_every_step_equals_the_whole_assembly(bulk: None, start: list[Any], history: list[list[Any]]) -> None:
    both = Both()
    for slot, variant in start:
        both.set(slot, variant)
    _compare(*both.step())
    for changes in history:
        for slot, variant in changes:
            both.set(slot, variant)
        _compare(*both.step())


def _good_cluster() -> Both:
    both = Both()
    for slot in CORE:
        both.set(slot, 0)
    for i in range(200):
        both.tracker.set(("Pod", f"a/p{i}"), (to_document(_pod("a", f"p{i}", ip=f"10.1.{i // 250}.{i % 250 + 1}"),
                                                          file=f"p{i}", index=0),))  # fmt: skip
    _compare(*both.step())
    return both


def test_a_pod_event_decides_one_document_and_leaves_the_core_alone() -> None:
    both = _good_cluster()
    before = both.incremental.assemble(both.core_docs(), {}).snapshot
    decided, core_passes = both.incremental.items.decided, both.incremental.core_passes
    assert both.incremental.assemble(both.core_docs(), {}).snapshot is before  # nothing changed: the same
    assert (both.incremental.items.decided, both.incremental.core_passes) == (decided, core_passes)
    both.set(("Pod", "a/p0"), 1)
    mine, full = both.step()
    _compare(mine, full)
    assert both.incremental.items.decided == decided + 1
    assert both.incremental.core_passes == core_passes
    assert mine.snapshot is not None and before is not None
    # the core's snapshot reused, not parsed again: the very objects (its tuples are made again by evolve)
    assert all(a is b for a, b in zip(mine.snapshot.clusters, before.clusters, strict=True))
    assert all(a is b for a, b in zip(mine.snapshot.nodes, before.nodes, strict=True))
    assert mine.snapshot.overlaps_checked_here()
    both.set(("Node", "e-gw1"), 0)  # an equal copy of the Node (a heartbeat): nothing judged again
    _compare(*both.step())
    assert (both.incremental.items.decided, both.incremental.core_passes) == (decided + 1, core_passes)
    both.set(("Node", "e-gw1"), 1)  # a changed Node: the core is judged again, the pods are not
    _compare(*both.step())
    assert (both.incremental.items.decided, both.incremental.core_passes) == (decided + 1, core_passes + 1)


def test_a_value_of_another_type_is_a_change() -> None:
    """``gateway: 1`` equals ``gateway: true`` in Python, but the snapshot refuses it: the core is judged again."""
    both = _good_cluster()
    both.step()
    node = dict(CORE[("Node", "e-gw1")][0][0], gateway=1)
    both.core[("Node", "e-gw1")] = (to_document(node, file="node-e-gw1-v0.yaml", index=0),)
    mine, full = both.step()
    _compare(mine, full)
    assert [p.error.split(": ")[-1] for p in mine.problems] == ["expected a boolean (true/false), got integer 1"]


def test_a_pass_that_raises_half_way_leaves_no_half_state(monkeypatch: pytest.MonkeyPatch) -> None:
    both = _good_cluster()
    real = items_module.parse_item
    calls = {"n": 0}

    def failing(doc: Document) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("planted")
        return real(doc)

    monkeypatch.setattr(items_module, "parse_item", failing)
    for slot, variant in ((("Pod", "a/p0"), 1), (("Pod", "a/p1"), 3), (("Pod", "b/p0"), 1)):
        both.set(slot, variant)
    with pytest.raises(RuntimeError, match="planted"):
        both.step()
    monkeypatch.setattr(items_module, "parse_item", real)
    decided = both.incremental.items.decided
    both.set(("Pod", "b/p2"), 0)
    _compare(*both.step())
    assert both.incremental.items.decided - decided == 202  # every document decided again: 200 + b/p0 + b/p2
