"""``SnapshotParser`` (magw.snapshot.cache) against plain ``parse_snapshot``, the oracle. No timing.

- an unchanged cluster item gives the very same Cluster object (``is``), a changed one a new, right one;
- a reused item at another position reports errors with its new path;
- the remembered overlap check refuses exactly what the full check refuses, with the same message, over a
  sequence of versions (hypothesis), including changes small enough for the incremental index;
- memory: ``collect()`` keeps only what was used since the previous one.
"""

from __future__ import annotations

import copy
from ipaddress import IPv4Network
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.model import Snapshot
from magw.snapshot.cache import SnapshotParser
from magw.snapshot.load import SnapshotError, parse_snapshot

FILLER = 20  # clusters of disjoint /24s, so that one changed cluster is a small share (the incremental path)


def _nets(first: int, count: int) -> list[str]:
    return [str(IPv4Network(((11 << 24) + ((first + k) << 8), 24))) for k in range(count)]


def _filler() -> list[dict[str, Any]]:
    return [
        {"id": f"f{i}", "pod_cidrs": _nets(i * 10, 10), "service_cidrs": [f"100.{i}.0.0/16"]} for i in range(FILLER)
    ]


def _doc(clusters: list[dict[str, Any]], endpoints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"local_cluster": "f0", "clusters": clusters, "endpoints": endpoints or []}


def _as_broker_does(doc: dict[str, Any]) -> dict[str, Any]:
    """A new top-level mapping and new item mappings sharing the lists, as ``assemble.snapshot_dict`` builds."""
    return {k: [dict(i) for i in v] if isinstance(v, list) else v for k, v in doc.items()}


def _outcome(parse: Any, doc: dict[str, Any]) -> Snapshot | str:
    try:
        snap: Snapshot = parse(doc, source="broker")
    except SnapshotError as exc:
        return str(exc)
    return snap


def test_an_unchanged_cluster_is_the_same_object_and_a_changed_one_is_new() -> None:
    parser = SnapshotParser()
    clusters = _filler()
    first = parser(_as_broker_does(_doc(clusters)))
    changed = copy.deepcopy(clusters)
    changed[3]["pod_cidrs"][0] = "12.0.0.0/24"
    second = parser(_as_broker_does(_doc(changed)))
    assert second == parse_snapshot(_doc(changed))
    for before, after in zip(first.clusters, second.clusters, strict=True):
        if after.id == "f3":
            assert after is not before
            assert IPv4Network("12.0.0.0/24") in after.pod_cidrs
        else:
            assert after is before


def test_a_reused_cluster_at_another_position_names_its_new_path() -> None:
    """f5 parsed at clusters[5], then moved to clusters[1]: an overlap with it names clusters[1]."""
    parser = SnapshotParser()
    clusters = _filler()
    parser(_as_broker_does(_doc(clusters)))
    moved = [clusters[0], clusters[5], *clusters[1:5], *clusters[6:]]
    intruder = {"id": "x", "pod_cidrs": [clusters[5]["pod_cidrs"][3]], "service_cidrs": ["100.200.0.0/16"]}
    doc = _doc([*moved, intruder])
    expected = _outcome(parse_snapshot, doc)
    assert isinstance(expected, str) and "(clusters[1].pod_cidrs[3])" in expected
    assert _outcome(parser, _as_broker_does(doc)) == expected


def test_a_reused_endpoint_at_another_position_names_its_new_path() -> None:
    parser = SnapshotParser()
    clusters = _filler()
    eps = [
        {"cluster": f"f{i}", "hostname": f"gw{i}", "private_ip": f"172.18.0.{i + 1}", "subnets": [f"100.{i}.1.0/24"]}
        for i in (1, 2, 3)
    ]
    parser(_as_broker_does(_doc(clusters, eps)))
    shrunk = copy.deepcopy(clusters)
    shrunk[3]["service_cidrs"] = ["100.99.0.0/16"]  # gw3's subnet is no longer inside f3
    doc = _doc(shrunk, [eps[2], eps[0], eps[1]])  # gw3 moves from endpoints[2] to endpoints[0]
    expected = _outcome(parse_snapshot, doc)
    assert expected == "broker: endpoints[0].subnets[0]: 100.3.1.0/24 is not inside the CIDRs of cluster 'f3'"
    assert _outcome(parser, _as_broker_does(doc)) == expected


def test_a_mapping_equal_to_a_good_one_but_of_another_type_is_not_reused() -> None:
    """``gateway: 1`` equals ``gateway: true`` for ``==``; the parser must refuse it as parse_snapshot does."""
    node = {"name": "n1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1", "gateway": True}
    doc = {**_doc(_filler()), "nodes": [node]}
    parser = SnapshotParser()
    parser(_as_broker_does(doc))
    bad = {**doc, "nodes": [{**node, "gateway": 1}]}
    expected = _outcome(parse_snapshot, bad)
    assert isinstance(expected, str) and "expected a boolean" in expected
    assert _outcome(parser, _as_broker_does(bad)) == expected


def test_collect_keeps_only_what_was_used_since_the_previous_collect() -> None:
    parser = SnapshotParser()
    clusters = _filler()
    parser(_as_broker_does(_doc(clusters)))
    parser.collect()
    assert parser.cached_items == FILLER
    parser(_as_broker_does(_doc(clusters[:3])))
    parser.collect()
    assert parser.cached_items == 3


# ----- the remembered overlap check against the full one, over sequences of versions ----------------

_SMALL = st.builds(
    lambda third, octet, plen: str(IPv4Network((10 << 24 | third << 16 | octet << 8, plen), strict=False)),
    st.integers(0, 1),
    st.integers(0, 63),
    st.integers(18, 26),
)
_EXTRA = st.lists(
    st.builds(
        lambda pods, services, globals_, globalnet: {
            "pod_cidrs": pods,
            "service_cidrs": services,
            **({"global_cidrs": globals_} if globalnet == 0 else {}),
        },
        st.lists(_SMALL, min_size=1, max_size=3),
        st.lists(_SMALL, max_size=2),
        st.lists(_SMALL, min_size=1, max_size=2),
        st.integers(0, 5),  # a Globalnet cluster now and then: most lists go through the incremental index
    ),
    min_size=1,
    max_size=3,
)
# Replace one or two clusters (counted from the end: mostly the small ones), drop one, or reorder.
_STEP = st.one_of(
    st.tuples(st.just("replace"), st.lists(st.integers(1, 6), min_size=1, max_size=2, unique=True), _EXTRA),
    st.tuples(st.just("drop"), st.integers(0, FILLER + 2), st.none()),
    st.tuples(st.just("rotate"), st.integers(1, 5), st.none()),
)
Step = tuple[str, Any, Any]


def _apply(clusters: list[dict[str, Any]], step: Step) -> list[dict[str, Any]]:
    what, where, item = step
    out = list(clusters)
    if what == "replace":
        for back, new in zip(where, item * 2, strict=False):
            i = max(len(out) - back, 1)
            out[i] = {**new, "id": out[i]["id"]}
    elif what == "drop" and len(out) > 2:
        del out[1 + where % (len(out) - 1)]
    elif what == "rotate":
        rest = out[1:]
        out = [out[0], *rest[where % max(len(rest), 1) :], *rest[: where % max(len(rest), 1)]]
    return out


@settings(max_examples=300, deadline=None)
@given(extra=_EXTRA, steps=st.lists(_STEP, min_size=1, max_size=6))
def test_remembered_checks_report_what_parse_snapshot_reports(extra: list[dict[str, Any]], steps: list[Step]) -> None:
    parser = SnapshotParser()
    clusters = [*_filler(), *({**e, "id": f"x{i}"} for i, e in enumerate(extra))]
    for step in [("rotate", 0, None), *steps]:
        clusters = _apply(clusters, step)
        doc = _doc(clusters)
        assert _outcome(parser, _as_broker_does(doc)) == _outcome(parse_snapshot, doc)
        parser.collect()


def test_the_incremental_overlap_check_is_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a first full check, a changed cluster alone goes through the index, not the full check."""
    import magw.snapshot.cache as cache_module

    full: list[int] = []
    real = cache_module.check_overlaps
    monkeypatch.setattr(cache_module, "check_overlaps", lambda clusters: full.append(len(clusters)) or real(clusters))
    parser = SnapshotParser()
    clusters = _filler()
    parser(_as_broker_does(_doc(clusters)))
    assert full == [FILLER]
    parser(_as_broker_does(_doc(clusters)))  # nothing new: no check at all
    ok = [*clusters[:4], {**clusters[4], "pod_cidrs": ["12.0.0.0/24"]}, *clusters[5:]]
    parser(_as_broker_does(_doc(ok)))
    assert full == [FILLER]
    equal = [*clusters[:4], {**clusters[4], "pod_cidrs": [clusters[7]["pod_cidrs"][0]]}, *clusters[5:]]
    holding = [*clusters[:4], {**clusters[4], "pod_cidrs": ["11.0.0.0/16"]}, *clusters[5:]]  # holds f0..f19's
    for bad in (equal, holding):
        expected = _outcome(parse_snapshot, _doc(bad))
        assert isinstance(expected, str)
        assert _outcome(parser, _as_broker_does(_doc(bad))) == expected
    assert full == [FILLER, FILLER, FILLER]  # the index found each overlap; the full check worded it


def _globalnet_doc(pods: list[dict[str, Any]]) -> dict[str, Any]:
    clusters = [{**c, "global_cidrs": [f"242.{i}.0.0/16"]} for i, c in enumerate(_filler()[:2])]
    return {**_doc(clusters), "globalnet": {"pods": pods}}


def _pods(n: int) -> list[dict[str, Any]]:
    return [{"namespace": "shop", "name": f"p{i}", "ip": f"10.1.0.{i + 1}", "labels": {"app": "web"}} for i in range(n)]


def test_unchanged_globalnet_pods_are_the_same_objects_and_a_changed_one_is_new() -> None:
    """What the incremental Globalnet planner needs from a source: the pods that did not change are the very
    objects of the last snapshot."""
    parser = SnapshotParser()
    pods = _pods(5)
    first = parser(_globalnet_doc([dict(p) for p in pods])).globalnet.pods
    parser.collect()
    changed = [dict(p) for p in pods]
    changed[2] = {**changed[2], "labels": {"app": "db"}}
    del changed[4]
    second = parser(_globalnet_doc(changed)).globalnet.pods
    assert [p.name for p in second] == ["p0", "p1", "p2", "p3"]
    assert [a is b for a, b in zip(first, second, strict=False)] == [True, True, False, True]
    assert second[2].labels == (("app", "db"),)
    assert second == parse_snapshot(_globalnet_doc(changed)).globalnet.pods  # the oracle
    parser.collect()
    assert parser.cached_items == 2 + 4  # the two clusters and the four pods of the last parse: p4 and old p2 gone
    bad = [dict(p) for p in pods]
    bad[1] = {**bad[1], "host_network": 1}  # equal to True for ==, but not a boolean: not taken for p1
    first_bad = {**bad[1], "host_network": True}
    parser(_globalnet_doc([bad[0], first_bad]))
    with pytest.raises(SnapshotError, match="host_network"):
        parser(_globalnet_doc([bad[0], bad[1]]))
