"""The fast paths of snapshot loading (docs/performance.md), against slow oracles written here. No timing.

- the overlap check reports exactly what comparing every pair in document order reports;
- it does a linear number of ``IPv4Network.overlaps`` calls, not one per pair;
- the canonical-CIDR fast path accepts and refuses exactly what ``ipaddress`` does;
- libyaml's C parser and the Python parser give equal documents and equal errors;
- ``magw apply``'s one-line change text is what rendering a one-object state prints.
"""

from __future__ import annotations

import ipaddress
import pathlib
from ipaddress import IPv4Network
from typing import Any

import attrs
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.desired.node.planner import plan
from magw.desired.render import object_line, render_text
from magw.desired.state import KINDS, DesiredState
from magw.model import Snapshot, Strategy
from magw.snapshot.fields import FieldError, cidr
from magw.snapshot.load import SnapshotError, load_snapshot, parse_snapshot
from magw.snapshot.yamlstrict import FastStrictLoader, StrictLoader, load_strict
from tests.support.paths import REPO
from tests.support.strategies import snapshot_and_node

YAML_FILES = sorted((REPO / "examples").rglob("*.yaml"))
RANGE_KEYS = ("pod_cidrs", "service_cidrs", "global_cidrs")


def _doc(clusters: list[dict[str, Any]]) -> dict[str, Any]:
    return {"local_cluster": "c0", "clusters": clusters}


def _oracle(clusters: list[dict[str, Any]]) -> str | None:
    """The first range (document order) overlapping a range of an earlier cluster, by comparing every pair."""
    earlier: list[tuple[IPv4Network, str, str]] = []
    for i, c in enumerate(clusters):
        mine = [
            (IPv4Network(text), f"clusters[{i}].{key}[{k}]")
            for key in RANGE_KEYS
            for k, text in enumerate(c.get(key, []))
        ]
        for net, path in mine:
            for other, other_path, other_id in earlier:
                if net.overlaps(other):
                    return f"<snapshot>: {path}: {net} overlaps {other} of cluster {other_id!r} ({other_path})"
        earlier.extend((net, path, c["id"]) for net, path in mine)
    return None


def _globalnet_refused(clusters: list[dict[str, Any]]) -> bool:
    """Every pair: a global CIDR may overlap nothing (not even its own cluster's ranges); two pod/service
    ranges of different clusters may overlap only when one of the clusters has global CIDRs."""
    ranges = [
        (IPv4Network(text), i, key == "global_cidrs", bool(c.get("global_cidrs")))
        for i, c in enumerate(clusters)
        for key in RANGE_KEYS
        for text in c.get(key, [])
    ]
    for a, (net_a, ca, glob_a, gn_a) in enumerate(ranges):
        for net_b, cb, glob_b, gn_b in ranges[a + 1 :]:
            if not net_a.overlaps(net_b):
                continue
            if glob_a or glob_b:
                if ca != cb or glob_a != glob_b:
                    return True
            elif ca != cb and not (gn_a or gn_b):
                return True
    return False


# Prefixes in 10.0.0.0/12 with lengths 12..16: small enough that overlaps are frequent.
_prefix = st.builds(
    lambda length, bits: str(IPv4Network(((10 << 24) | (bits << 16), 16)).supernet(new_prefix=length)),
    st.integers(12, 16),
    st.integers(0, 15),
)
_cluster_ranges = st.fixed_dictionaries(
    {"pod_cidrs": st.lists(_prefix, max_size=4), "service_cidrs": st.lists(_prefix, max_size=3)},
    optional={"global_cidrs": st.lists(_prefix, max_size=2)},
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_cluster_ranges, min_size=1, max_size=6))
def test_overlap_check_matches_pairwise_oracle(ranges: list[dict[str, list[str]]]) -> None:
    """Any clusterset: refused exactly when the pairwise oracle finds an overlap, with the same message.

    With global CIDRs (Globalnet, docs/globalnet.md) the rule differs (see ``_globalnet_refused``) and only the
    verdict is compared."""
    clusters = [{"id": f"c{i}", **r} for i, r in enumerate(ranges)]
    if any(c.get("global_cidrs") for c in clusters):
        refused = _globalnet_refused(clusters)
        try:
            parse_snapshot(_doc(clusters))
        except SnapshotError:
            assert refused
        else:
            assert not refused
        return
    expected = _oracle(clusters)
    if expected is None:
        parse_snapshot(_doc(clusters))
    else:
        with pytest.raises(SnapshotError) as err:
            parse_snapshot(_doc(clusters))
        assert str(err.value) == expected


def test_overlap_check_is_not_pairwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 disjoint /24s over 100 clusters: at most a handful of ``overlaps`` calls, not ~2 million."""
    calls = 0
    real = ipaddress.IPv4Network.overlaps

    def counting(self: IPv4Network, other: IPv4Network) -> bool:
        nonlocal calls
        calls += 1
        return real(self, other)

    monkeypatch.setattr(ipaddress.IPv4Network, "overlaps", counting)
    clusters = [
        {
            "id": f"c{r}",
            "pod_cidrs": [str(IPv4Network(((11 << 24) + ((r * 20 + k) << 8), 24))) for k in range(20)],
            "service_cidrs": [f"100.{r}.0.0/16"],
        }
        for r in range(100)
    ]
    snap = parse_snapshot(_doc(clusters))
    assert sum(len(c.cidrs) for c in snap.clusters) == 2100
    assert calls <= 2100


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=4, max_size=4),
    st.integers(0, 34),
    st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_cidr_fast_path_agrees_with_ipaddress(octets: list[int], length: int, zero_pad: list[bool]) -> None:
    """Texts with big octets, host bits, leading zeros: accepted iff ``ipaddress`` reads them canonically."""
    parts = [f"0{n}" if pad else str(n) for n, pad in zip([*octets, length], zero_pad, strict=True)]
    text = ".".join(parts[:4]) + "/" + parts[4]
    try:
        want: IPv4Network | None = IPv4Network(text)  # strict: host bits refused
        if str(want) != text:
            want = None
    except ValueError:
        want = None
    if want is None:
        with pytest.raises(FieldError):
            cidr(text, "x")
    else:
        got = cidr(text, "x")
        assert (got, str(got), got.prefixlen) == (want, text, want.prefixlen)


def test_fast_loader_is_libyaml_when_present() -> None:
    """PyYAML here is built with libyaml: snapshots are read by its C parser."""
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML built without libyaml: FastStrictLoader falls back to the Python parser")
    assert issubclass(FastStrictLoader, yaml.CSafeLoader)


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: p.name)
def test_both_loaders_read_equal_documents(path: pathlib.Path) -> None:
    """Every example file: the C and the Python parser build the same document (and snapshot)."""
    text = path.read_text()
    slow = list(yaml.load_all(text, Loader=StrictLoader))
    fast = list(yaml.load_all(text, Loader=FastStrictLoader))
    assert fast == slow
    if path.parent.name == "examples" and not path.name.startswith("lab-"):
        assert load_snapshot(path) == parse_snapshot(slow[0], source=str(path))


DUPLICATES = [
    "a: 1\nb: 2\na: 3\n",
    "clusters:\n- id: x\n  pod_cidrs: []\n  id: y\n",
    "x:\n  y:\n    z: 1\n\n\n    z: 2\n",
    "{a: 1, b: {c: 1, c: 2}}\n",
    "1: a\n1: b\n",
]


@pytest.mark.parametrize("text", DUPLICATES)
def test_both_loaders_refuse_duplicate_keys_alike(text: str) -> None:
    """A duplicate key: both parsers refuse it with the same problem at the same line and column."""
    errors = []
    for loader in (StrictLoader, FastStrictLoader):
        with pytest.raises(yaml.constructor.ConstructorError) as err:
            yaml.load(text, Loader=loader)
        mark = err.value.problem_mark
        assert mark is not None
        errors.append((err.value.problem, mark.line, mark.column))
    assert errors[0] == errors[1]
    assert str(errors[0][0]).startswith("duplicate key")


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: b: c\n", "- a\nb: 1\n", "a: 'x\n", "\tkey: 1\n", *DUPLICATES])
def test_syntax_errors_read_as_the_python_parser_words_them(text: str) -> None:
    """``load_strict`` on broken YAML or a duplicate key raises what the Python loader raises, word for word."""
    with pytest.raises(yaml.YAMLError) as python_err:
        yaml.load(text, Loader=StrictLoader)
    with pytest.raises(yaml.YAMLError) as ours:
        load_strict(text)
    assert str(ours.value) == str(python_err.value)


@settings(max_examples=60, deadline=None)
@given(snapshot_and_node(), st.sampled_from(list(Strategy)))
def test_change_line_is_the_one_object_rendering(planned: tuple[Snapshot, str], strategy: Strategy) -> None:
    """Every planned object: ``object_line`` prints what rendering a state holding only it prints, on one line."""
    snap, node = planned
    snap = attrs.evolve(snap, config=attrs.evolve(snap.config, strategy=strategy))
    state = plan(snap, node)
    for kind in KINDS:
        for obj in state.of_kind(kind):
            alone = render_text(attrs.evolve(DesiredState(), **{kind: (obj,)}))
            assert object_line(kind, obj) == " ".join(ln.strip() for ln in alone.splitlines() if ln.strip())


@settings(max_examples=300, deadline=None)
@given(st.lists(_prefix, min_size=1, max_size=5), st.lists(_prefix, min_size=1, max_size=5))
def test_subnet_check_matches_oracle(cidrs: list[str], subnets: list[str]) -> None:
    """An endpoint's subnets: refused at the first one no CIDR of its cluster holds (``subnet_of`` on each)."""
    doc = _doc(
        [
            {"id": "c0", "pod_cidrs": ["192.168.0.0/16"], "service_cidrs": []},
            {"id": "c1", "pod_cidrs": cidrs, "service_cidrs": []},
        ]
    )
    doc["endpoints"] = [{"cluster": "c1", "hostname": "gw", "private_ip": "172.31.0.2", "subnets": subnets}]
    outside = [
        (k, text)
        for k, text in enumerate(subnets)
        if not any(IPv4Network(text).subnet_of(IPv4Network(c)) for c in cidrs)
    ]
    if not outside:
        parse_snapshot(doc)
        return
    k, text = outside[0]
    with pytest.raises(SnapshotError) as err:
        parse_snapshot(doc)
    assert str(err.value) == f"<snapshot>: endpoints[0].subnets[{k}]: {text} is not inside the CIDRs of cluster 'c1'"
