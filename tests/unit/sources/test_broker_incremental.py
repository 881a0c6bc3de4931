"""The file broker after a change re-parses what changed, and a bad document costs a few parses, not one per
document (docs/performance.md). No timing: the tests count objects, parsed CIDRs and parses.

- unchanged Cluster documents give the very same Cluster objects (``is``) after a rescan, even when their file
  was rewritten; a changed one is parsed again and the snapshot shows the change;
- one bad document among many, from a cold start: each CIDR is parsed at most twice and the snapshot is
  parsed O(log n) times; the assembly (snapshot, accepted documents, problems and their words) is the one
  the old walk gives, one document at a time with plain ``parse_snapshot`` (the oracle).
"""

from __future__ import annotations

import math
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest

import magw.snapshot.cache as cache_module
import magw.snapshot.load as snapshot_module
from magw.snapshot.cache import SnapshotParser
from magw.snapshot.load import parse_snapshot
from magw.sources import FileBroker
from magw.sources.file import assemble as assemble_module
from magw.sources.file.assemble import Assembly, assemble
from magw.sources.file.documents import Document, parse_file

REMOTES = 12
PER_CLUSTER = 30
CIDRS = REMOTES * PER_CLUSTER + 2  # and east's two


def _net(i: int) -> str:
    return str(IPv4Network(((11 << 24) + (i << 8), 24)))


def _cluster(r: int, nets: list[str]) -> str:
    return f"kind: Cluster\nid: c{r}\nservice_cidrs: [{nets[0]}]\npod_cidrs: [{', '.join(nets[1:])}]\n"


def _clusterset(change: dict[int, list[str]] | None = None) -> str:
    docs = ["kind: Cluster\nid: east\npod_cidrs: [10.1.0.0/16]\nservice_cidrs: [100.1.0.0/16]\n"]
    for r in range(1, REMOTES + 1):
        nets = [_net((r - 1) * PER_CLUSTER + k) for k in range(PER_CLUSTER)]
        docs.append(_cluster(r, (change or {}).get(r, nets)))
    return "---\n".join(docs)


def _node(name: str, ip: str, gateway: bool) -> str:
    return (
        f"kind: Node\ncluster: east\nname: {name}\nip: {ip}\ncni_ip: 10.1.{ip.split('.')[-1]}.1\ngateway: {gateway}\n"
    )


def _endpoint(cluster: str, host: str, ip: str) -> str:
    return f"kind: Endpoint\ncluster: {cluster}\nhostname: {host}\nprivate_ip: {ip}\n"


def _files() -> dict[str, str]:
    files = {
        "clusterset.yaml": _clusterset(),
        "config.yaml": "kind: Config\nstrategy: group\n",
        "nodes.yaml": "---\n".join([_node("e-gw1", "172.18.0.6", True), _node("e-w1", "172.18.0.3", False)]),
        "endpoint-east@e-gw1.yaml": _endpoint("east", "e-gw1", "172.18.0.6"),
    }
    for r in range(1, REMOTES + 1):
        files[f"endpoint-c{r}@c{r}-gw.yaml"] = _endpoint(f"c{r}", f"c{r}-gw", f"172.31.{r}.2")
    return files


def _write(directory: Path, name: str, text: str) -> None:
    tmp = directory / f".{name}.tmp"
    tmp.write_text(text)
    tmp.replace(directory / name)


def _populate(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        _write(directory, name, text)


def test_unchanged_clusters_keep_their_objects_across_rescans(tmp_path: Path) -> None:
    _populate(tmp_path, _files())
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    first = broker.snapshot
    assert first is not None
    _write(
        tmp_path, "nodes.yaml", (tmp_path / "nodes.yaml").read_text() + "---\n" + _node("e-gw3", "172.18.0.10", True)
    )
    _write(tmp_path, "endpoint-east@e-gw3.yaml", _endpoint("east", "e-gw3", "172.18.0.10"))
    assert broker.scan() is True
    second = broker.snapshot
    assert second is not None and "e-gw3" in {e.hostname for e in second.endpoints}
    assert [c.id for c in second.clusters] == [c.id for c in first.clusters]
    assert all(a is b for a, b in zip(second.clusters, first.clusters, strict=True))


def test_a_changed_cluster_is_parsed_again_and_the_others_are_kept(tmp_path: Path) -> None:
    """The clusterset file is rewritten (new Document objects for all 13 clusters); only c3 changed."""
    _populate(tmp_path, _files())
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    first = broker.snapshot
    assert first is not None
    nets = [_net(2 * PER_CLUSTER + k) for k in range(PER_CLUSTER)]
    _write(tmp_path, "clusterset.yaml", _clusterset({3: [*nets[:-1], "12.0.0.0/24"]}))
    assert broker.scan() is True
    second = broker.snapshot
    assert second is not None
    assert IPv4Network("12.0.0.0/24") in second.cluster("c3").pod_cidrs
    assert IPv4Network(nets[-1]) not in second.cluster("c3").cidrs
    assert second.cluster("c3") is not first.cluster("c3")
    assert all(b is a for a, b in zip(first.clusters, second.clusters, strict=True) if a.id != "c3")
    uncached = FileBroker(tmp_path, local_cluster="east", parse=parse_snapshot)
    uncached.scan()
    assert uncached.snapshot == second


# ----- bad documents ---------------------------------------------------------------------------------

BAD = {
    "a local endpoint whose host is not a node": {"endpoint-east@e-bad.yaml": _endpoint("east", "e-bad", "172.18.0.9")},
    "an endpoint of an unknown cluster": {"endpoint-nope@x.yaml": _endpoint("nope", "x", "172.30.0.1")},
    "a cluster overlapping another": {"extra.yaml": _cluster(99, [_net(5), _net(4000)])},
    "a VTEP collision and a duplicate hostname": {
        "endpoint-c1@a.yaml": _endpoint("c1", "a", "172.32.1.2"),  # same low 24 bits as c1-gw's 172.31.1.2
        "endpoint-c2@b.yaml": _endpoint("c2", "c2-gw", "172.33.2.9"),
    },
    "a second Config (documents of one identity merge in the snapshot: only the walk refuses them)": {
        "config2.yaml": "kind: Config\nunderlay_mtu: 1400\n"
    },
    "bad health and a bad node": {
        "health.yaml": "kind: Health\ndown: [nobody]\n",
        "node-x.yaml": "kind: Node\ncluster: east\nname: x\nip: 172.18.0.6\ncni_ip: 10.1.9.1\n",
    },
}


def _docs(files: dict[str, str]) -> list[Document]:
    return [d for name, text in sorted(files.items()) for d in parse_file(text, file=name)]


def _sequential(docs: list[Document], monkeypatch: pytest.MonkeyPatch) -> Assembly:
    """The oracle: the walk one document at a time (no runs), with plain parse_snapshot."""
    with monkeypatch.context() as m:
        m.setattr(assemble_module, "_HEREDITARY", -1)
        return assemble("east", docs, {}, parse=parse_snapshot)


@pytest.mark.parametrize("bad", sorted(BAD))
def test_bad_documents_cost_a_few_parses_and_give_the_old_walks_problems(
    bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _docs({**_files(), **BAD[bad]})
    expected = _sequential(docs, monkeypatch)
    assert expected.problems  # the scenario is bad indeed
    cidrs: list[int] = []
    real_cidrs = snapshot_module.cidr_list

    def counting_cidrs(value: Any, path: str) -> Any:
        cidrs.append(len(value) if isinstance(value, list) else 1)
        return real_cidrs(value, path)

    parses: list[int] = []
    real_parse = cache_module.parse_snapshot

    def counting_parse(doc: Any, **kwargs: Any) -> Any:
        parses.append(1)
        return real_parse(doc, **kwargs)

    monkeypatch.setattr(snapshot_module, "cidr_list", counting_cidrs)
    monkeypatch.setattr(cache_module, "parse_snapshot", counting_parse)
    got = assemble("east", docs, {}, parse=SnapshotParser())
    assert got == expected
    assert sum(cidrs) <= 2 * CIDRS + 10  # every CIDR about once (the bad documents' few aside)
    bad_docs = len(expected.problems)
    # the first try, the local cluster, the last parse; per bad document a bisection, its own try, its last
    # good version's and the try of the rest: the walk one document at a time would parse 30+ times
    assert len(parses) <= 4 + bad_docs * (3 + math.ceil(math.log2(len(docs))))


@pytest.mark.parametrize("bad", sorted(BAD))
def test_the_uncached_broker_reports_the_same(bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both brokers, the same bad directory: the same snapshot and the same problem files; the walk with runs
    and plain parse_snapshot gives the old walk's assembly too."""
    files = {**_files(), **BAD[bad]}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _populate(tmp_path / "a", files)
    _populate(tmp_path / "b", files)
    cached = FileBroker(tmp_path / "a", local_cluster="east")
    plain = FileBroker(tmp_path / "b", local_cluster="east", parse=parse_snapshot)
    cached.scan()
    plain.scan()
    assert cached.snapshot == plain.snapshot
    assert cached.problem_files() == plain.problem_files() != frozenset()
    docs = _docs(files)
    assert assemble("east", docs, {}, parse=parse_snapshot) == _sequential(docs, monkeypatch)


def test_the_brokers_parser_keeps_only_what_the_last_pass_used(tmp_path: Path) -> None:
    """Every assembly ends with the parser's ``collect``: after a cluster changed five times, the parser holds
    one parsed item per item of the snapshot, not the versions before."""
    _populate(tmp_path, _files())
    parser = SnapshotParser()
    broker = FileBroker(tmp_path, local_cluster="east", parse=parser)
    broker.scan()
    nets = [_net(2 * PER_CLUSTER + k) for k in range(PER_CLUSTER)]
    for n in range(5):
        _write(tmp_path, "clusterset.yaml", _clusterset({3: [*nets[:-1], f"12.{n}.0.0/24"]}))
        assert broker.scan() is True
    snap = broker.snapshot
    assert snap is not None
    assert parser.cached_items == len(snap.clusters) + len(snap.nodes) + len(snap.endpoints)
