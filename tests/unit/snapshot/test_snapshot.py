"""The snapshot loader: every document it refuses, with the exact one-line message, and what it builds."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pytest
from hypothesis import given, settings

from magw.model import Cluster, Config, Endpoint, Health, Node, ResilientParams, Snapshot, Strategy
from magw.snapshot.load import (
    SnapshotError,
    dump_snapshot,
    load_snapshot,
    parse_snapshot,
    parse_snapshot_text,
    snapshot_to_doc,
)
from tests.support.paths import EXAMPLES as EXAMPLES_DIR
from tests.support.strategies import snapshots

# examples/lab-*.yaml are lab topologies (docs/lab.md), not snapshots.
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*.yaml") if not p.name.startswith("lab-"))
SOURCE = "snapshot.yaml"


def base_doc() -> dict[str, Any]:
    """A valid two-cluster document; each rejection case breaks exactly one thing in it."""
    return {
        "local_cluster": "east",
        "clusters": [
            {"id": "east", "pod_cidrs": ["10.1.0.0/16"], "service_cidrs": ["100.1.0.0/16"]},
            {"id": "west", "pod_cidrs": ["10.2.0.0/16"], "service_cidrs": ["100.2.0.0/16"]},
        ],
        "nodes": [
            {"name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1", "gateway": True},
            {"name": "e-w1", "ip": "172.18.0.3", "cni_ip": "10.1.3.1"},
        ],
        "endpoints": [
            {"cluster": "east", "hostname": "e-gw1", "private_ip": "172.18.0.6", "public_ip": "198.51.100.6"},
            {"cluster": "west", "hostname": "w-gw1", "private_ip": "172.19.0.4", "subnets": ["10.2.0.0/16"]},
        ],
        "health": {"down": ["w-gw1"], "reach": {"e-gw1": ["west"]}},
    }


def rejected(doc: object) -> str:
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(doc, source=SOURCE)
    return str(info.value)


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """A mutation that sets ``a.b[1].c`` to ``value``."""

    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = _split(path)
        target: Any = doc
        for part in parents:
            target = target[part]
        target[last] = value

    return mutate


def _del(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = _split(path)
        target: Any = doc
        for part in parents:
            target = target[part]
        del target[last]

    return mutate


def _append(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in _split(path):
            target = target[part]
        target.append(copy.deepcopy(value))

    return mutate


def _split(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for word in path.split("."):
        name, _, rest = word.partition("[")
        parts.append(name)
        if rest:
            parts.append(int(rest.rstrip("]")))
    return parts


WEST_GW2 = {"cluster": "west", "hostname": "w-gw2", "private_ip": "172.19.0.9"}

# (case id, mutation of base_doc, the exact message)
REJECTIONS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    # unknown keys (typo safety)
    ("unknown-top-key-typo", _set("stratgy", "group"), "snapshot.yaml: stratgy: unknown key, did you mean 'strategy'?"),
    (
        "unknown-top-key",
        _set("colour", "blue"),
        "snapshot.yaml: colour: unknown key (allowed: cable, clusters, cni, egress, endpoints, globalnet, health, "
        "keep_client_ip, local_cluster, multi_active_gateway, nodes, resilient, strategy, underlay_mtu, "
        "wireguard_port)",
    ),
    (
        "unknown-item-key",
        _set("clusters[0].pod_cidr", ["10.9.0.0/16"]),
        "snapshot.yaml: clusters[0].pod_cidr: unknown key, did you mean 'pod_cidrs'?",
    ),
    (
        "unknown-node-key",
        _set("nodes[1].gw", True),
        "snapshot.yaml: nodes[1].gw: unknown key (allowed: cni_ip, gateway, ip, name, pod_cidrs)",
    ),
    (
        "unknown-health-key",
        _set("health.up", ["e-gw1"]),
        "snapshot.yaml: health.up: unknown key (allowed: down, reach)",
    ),
    (
        "unknown-resilient-key",
        _set("resilient", {"bucket": 8}),
        "snapshot.yaml: resilient.bucket: unknown key, did you mean 'buckets'?",
    ),
    ("non-string-key", lambda doc: doc.__setitem__(1, "x"), "snapshot.yaml: keys must be strings, got integer 1"),
    # missing required fields
    ("missing-local-cluster-field", _del("local_cluster"), "snapshot.yaml: local_cluster: missing required field"),
    ("missing-clusters", _del("clusters"), "snapshot.yaml: clusters: missing required field"),
    ("missing-cluster-id", _del("clusters[1].id"), "snapshot.yaml: clusters[1].id: missing required field"),
    ("missing-node-cni-ip", _del("nodes[1].cni_ip"), "snapshot.yaml: nodes[1].cni_ip: missing required field"),
    (
        "missing-endpoint-private-ip",
        _del("endpoints[1].private_ip"),
        "snapshot.yaml: endpoints[1].private_ip: missing required field",
    ),
    # wrong types
    ("clusters-not-list", _set("clusters", {"id": "east"}), "snapshot.yaml: clusters: expected a list, got mapping"),
    (
        "cluster-not-mapping",
        _set("clusters[1]", "west"),
        "snapshot.yaml: clusters[1]: expected a mapping, got string 'west'",
    ),
    (
        "local-cluster-not-string",
        _set("local_cluster", 7),
        "snapshot.yaml: local_cluster: expected a string, got integer 7",
    ),
    ("empty-cluster-id", _set("clusters[1].id", " "), "snapshot.yaml: clusters[1].id: must not be empty"),
    (
        "gateway-not-bool",
        _set("nodes[1].gateway", "yes please"),
        "snapshot.yaml: nodes[1].gateway: expected a boolean (true/false), got string 'yes please'",
    ),
    (
        "multi-active-not-bool",
        _set("multi_active_gateway", 1),
        "snapshot.yaml: multi_active_gateway: expected a boolean (true/false), got integer 1",
    ),
    ("mtu-string", _set("underlay_mtu", "1500"), "snapshot.yaml: underlay_mtu: expected an integer, got string '1500'"),
    ("mtu-bool", _set("underlay_mtu", True), "snapshot.yaml: underlay_mtu: expected an integer, got boolean True"),
    ("mtu-too-big", _set("underlay_mtu", 9300), "snapshot.yaml: underlay_mtu: 9300 is out of range 576..9216"),
    ("mtu-too-small", _set("underlay_mtu", 575), "snapshot.yaml: underlay_mtu: 575 is out of range 576..9216"),
    ("buckets-zero", _set("resilient", {"buckets": 0}), "snapshot.yaml: resilient.buckets: 0 is out of range 1..65535"),
    (
        "idle-timer-negative",
        _set("resilient", {"idle_timer": -1}),
        "snapshot.yaml: resilient.idle_timer: -1 is out of range 0..1000000",
    ),
    (
        "unbalanced-timer-too-big",
        _set("resilient", {"buckets": 16, "unbalanced_timer": 1_000_001}),
        "snapshot.yaml: resilient.unbalanced_timer: 1000001 is out of range 0..1000000",
    ),
    (
        "pod-cidrs-not-list",
        _set("clusters[0].pod_cidrs", "10.1.0.0/16"),
        "snapshot.yaml: clusters[0].pod_cidrs: expected a list, got string '10.1.0.0/16'",
    ),
    (
        "health-down-not-list",
        _set("health.down", "w-gw1"),
        "snapshot.yaml: health.down: expected a list, got string 'w-gw1'",
    ),
    (
        "reach-null",
        _set("health.reach", {"e-gw1": None}),
        "snapshot.yaml: health.reach.e-gw1: expected a list, got null",
    ),
    # malformed CIDRs and IPs
    (
        "cidr-prefix-33",
        _set("clusters[1].pod_cidrs", ["10.2.0.0/33"]),
        "snapshot.yaml: clusters[1].pod_cidrs[0]: '10.2.0.0/33' is not an IPv4 CIDR",
    ),
    (
        "cidr-host-bits",
        _set("clusters[1].service_cidrs", ["100.2.0.0/16", "100.3.0.1/16"]),
        "snapshot.yaml: clusters[1].service_cidrs[1]: '100.3.0.1/16' has host bits set (the network is 100.3.0.0/16)",
    ),
    (
        "cidr-no-prefix",
        _set("clusters[1].pod_cidrs", ["10.2.0.0"]),
        "snapshot.yaml: clusters[1].pod_cidrs[0]: '10.2.0.0' is not an IPv4 CIDR (missing /prefix)",
    ),
    (
        "cidr-netmask-form",
        _set("clusters[1].pod_cidrs", ["10.2.0.0/255.255.0.0"]),
        "snapshot.yaml: clusters[1].pod_cidrs[0]: '10.2.0.0/255.255.0.0' is not in a.b.c.d/len form "
        "(write 10.2.0.0/16)",
    ),
    (
        "cidr-ipv6",
        _set("clusters[1].global_cidrs", ["fd00::/64"]),
        "snapshot.yaml: clusters[1].global_cidrs[0]: 'fd00::/64' is not an IPv4 CIDR",
    ),
    (
        "ip-octet-256",
        _set("nodes[0].ip", "172.18.0.256"),
        "snapshot.yaml: nodes[0].ip: '172.18.0.256' is not an IPv4 address",
    ),
    (
        "ip-leading-zero",
        _set("nodes[1].cni_ip", "10.1.03.1"),
        "snapshot.yaml: nodes[1].cni_ip: '10.1.03.1' is not an IPv4 address",
    ),
    (
        "ip-not-string",
        _set("endpoints[1].public_ip", 3),
        "snapshot.yaml: endpoints[1].public_ip: expected an IPv4 address string, got integer 3",
    ),
    # unknown references
    (
        "endpoint-unknown-cluster",
        _set("endpoints[1].cluster", "north"),
        "snapshot.yaml: endpoints[1].cluster: unknown cluster 'north'",
    ),
    (
        "reach-unknown-cluster",
        _set("health.reach", {"e-gw1": ["west", "north"]}),
        "snapshot.yaml: health.reach.e-gw1[1]: unknown cluster 'north'",
    ),
    (
        "local-cluster-missing",
        _set("local_cluster", "south"),
        "snapshot.yaml: local_cluster: missing local cluster 'south' in clusters (known: east, west)",
    ),
    (
        "down-unknown-gateway",
        _set("health.down", ["w-gw1", "w-gw9"]),
        "snapshot.yaml: health.down[1]: unknown gateway 'w-gw9'",
    ),
    (
        "reach-unknown-gateway",
        _set("health.reach", {"e-gw9": ["west"]}),
        "snapshot.yaml: health.reach.e-gw9: unknown gateway 'e-gw9'",
    ),
    (
        "reach-remote-gateway",
        _set("health.reach", {"w-gw1": ["east"]}),
        "snapshot.yaml: health.reach.w-gw1: 'w-gw1' is a gateway of cluster 'west', not of the local cluster",
    ),
    # duplicates and collisions
    (
        "duplicate-cluster-id",
        _append("clusters", {"id": "east", "pod_cidrs": ["10.3.0.0/16"], "service_cidrs": []}),
        "snapshot.yaml: clusters[2].id: duplicate cluster id 'east' (first at clusters[0].id)",
    ),
    (
        "duplicate-node-name",
        _append("nodes", {"name": "e-w1", "ip": "172.18.0.7", "cni_ip": "10.1.7.1"}),
        "snapshot.yaml: nodes[2].name: duplicate node name 'e-w1' (first at nodes[1].name)",
    ),
    (
        "duplicate-endpoint-hostname",
        _append("endpoints", {"cluster": "west", "hostname": "e-gw1", "private_ip": "172.19.0.9"}),
        "snapshot.yaml: endpoints[2].hostname: duplicate endpoint hostname 'e-gw1' (first at endpoints[0].hostname)",
    ),
    (
        "duplicate-node-ip",
        _append("nodes", {"name": "e-w2", "ip": "172.18.0.3", "cni_ip": "10.1.7.1"}),
        "snapshot.yaml: nodes[2].ip: duplicate node IP '172.18.0.3' (first at nodes[1].ip)",
    ),
    (
        "node-vtep-collision",
        _append("nodes", {"name": "e-w2", "ip": "192.18.0.3", "cni_ip": "10.1.7.1"}),
        "snapshot.yaml: nodes[2].ip: 192.18.0.3 gives VTEP 240.18.0.3, the same as 172.18.0.3 (nodes[1].ip)",
    ),
    (
        "remote-vtep-collision",
        _append("endpoints", {"cluster": "west", "hostname": "w-gw2", "private_ip": "10.19.0.4"}),
        "snapshot.yaml: endpoints[2].private_ip: 10.19.0.4 gives VTEP 241.19.0.4, the same as 172.19.0.4 "
        "(endpoints[1].private_ip)",
    ),
    (
        "overlap-pod-service",
        _set("clusters[1].service_cidrs", ["10.1.128.0/17"]),
        "snapshot.yaml: clusters[1].service_cidrs[0]: 10.1.128.0/17 overlaps 10.1.0.0/16 of cluster 'east' "
        "(clusters[0].pod_cidrs[0])",
    ),
    (
        "overlap-global",
        _set("clusters[1].global_cidrs", ["100.0.0.0/8"]),
        "snapshot.yaml: clusters[1].global_cidrs[0]: 100.0.0.0/8 overlaps 100.1.0.0/16 of cluster 'east' "
        "(clusters[0].service_cidrs[0])",
    ),
    (
        "unknown-strategy",
        _set("strategy", "fastest"),
        "snapshot.yaml: strategy: unknown strategy 'fastest' (expected one of: resilient, group, multipath)",
    ),
    # local endpoints must be published by gateway nodes
    (
        "local-endpoint-not-gateway",
        _append("endpoints", {"cluster": "east", "hostname": "e-w1", "private_ip": "172.18.0.3"}),
        "snapshot.yaml: endpoints[2].hostname: node 'e-w1' is not a gateway (gateway: true)",
    ),
    (
        "local-endpoint-not-node",
        _append("endpoints", {"cluster": "east", "hostname": "e-gw7", "private_ip": "172.18.0.7"}),
        "snapshot.yaml: endpoints[2].hostname: 'e-gw7' is not a node of local cluster 'east'",
    ),
    (
        "local-endpoint-ip-differs",
        _set("endpoints[0].private_ip", "172.18.0.60"),
        "snapshot.yaml: endpoints[0].private_ip: 172.18.0.60 differs from node 'e-gw1''s ip 172.18.0.6",
    ),
    (
        "endpoint-subnet-outside",
        _set("endpoints[1].subnets", ["10.2.0.0/16", "10.1.5.0/24"]),
        "snapshot.yaml: endpoints[1].subnets[1]: 10.1.5.0/24 is not inside the CIDRs of cluster 'west'",
    ),
]


def test_base_document_is_valid() -> None:
    """The document every rejection case starts from is itself accepted (else the cases prove nothing)."""
    snapshot = parse_snapshot(base_doc(), source=SOURCE)
    assert [c.id for c in snapshot.clusters] == ["east", "west"]


@pytest.mark.parametrize(("mutate", "message"), [(m, msg) for _, m, msg in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_rejects_with_one_line_naming_field_and_reason(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    """Each broken document is refused with exactly this one-line message (file: field path: reason)."""
    doc = base_doc()
    mutate(doc)
    assert rejected(doc) == message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([1, 2], "snapshot.yaml: expected a mapping, got list"),
        ("east", "snapshot.yaml: expected a mapping, got string 'east'"),
        (None, "snapshot.yaml: the document is empty, expected a mapping"),
    ],
)
def test_rejects_a_document_that_is_not_a_mapping(doc: object, message: str) -> None:
    """The top level must be a mapping; an empty file says so."""
    assert rejected(doc) == message


def test_error_carries_source_path_and_reason() -> None:
    """SnapshotError is a ValueError whose parts are available separately (for callers that re-format)."""
    doc = base_doc()
    doc["clusters"][1]["pod_cidrs"] = ["10.2.0.0/33"]
    with pytest.raises(ValueError) as info:
        parse_snapshot(doc, source=SOURCE)
    err = info.value
    assert isinstance(err, SnapshotError)
    assert (err.source, err.path, err.reason, err.line) == (
        SOURCE,
        "clusters[1].pod_cidrs[0]",
        "'10.2.0.0/33' is not an IPv4 CIDR",
        None,
    )


def test_long_values_are_cut_in_messages() -> None:
    """A huge bad value does not flood the one-line message."""
    doc = base_doc()
    doc["local_cluster"] = ["x" * 500]
    assert rejected(doc) == "snapshot.yaml: local_cluster: expected a string, got list"
    doc = base_doc()
    doc["nodes"][0]["ip"] = "1" * 500
    message = rejected(doc)
    assert message == f"snapshot.yaml: nodes[0].ip: '{'1' * 56}... is not an IPv4 address"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "local_cluster: east\nclusters: [\n  {id: east\n",
            "snapshot.yaml:4: expected ',' or '}', but got '<stream end>' (while parsing a flow mapping)",
        ),
        (
            "local_cluster: east\nclusters:\n  - id: east\n   pod_cidrs: []\n",
            "snapshot.yaml:4: expected <block end>, but found '<block mapping start>'"
            " (while parsing a block collection)",
        ),
        (
            "local_cluster: east\nclusters: []\nlocal_cluster: west\n",
            "snapshot.yaml:3: duplicate key 'local_cluster'",
        ),
        (
            "local_cluster: east\nclusters:\n  - {id: east, id: west}\n",
            "snapshot.yaml:3: duplicate key 'id'",
        ),
        ("a: *nothing\n", "snapshot.yaml:1: found undefined alias 'nothing'"),
    ],
    ids=["unclosed-flow", "bad-indent", "duplicate-top-key", "duplicate-item-key", "undefined-alias"],
)
def test_yaml_syntax_errors_are_one_line_with_file_and_line(text: str, message: str) -> None:
    """YAML errors become ``file:line: reason``; duplicate keys are errors, not "last one wins"."""
    with pytest.raises(SnapshotError) as info:
        parse_snapshot_text(text, source=SOURCE)
    assert str(info.value) == message


def test_load_names_the_file(tmp_path: pathlib.Path) -> None:
    """load_snapshot reports errors with the path it was given, including unreadable files."""
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SnapshotError) as info:
        load_snapshot(missing)
    assert str(info.value) == f"{missing}: cannot read: No such file or directory"

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "local_cluster: east\nclusters: [{id: east, pod_cidrs: [10.1.0.0/16], service_cidrs: []}]\nnode: []\n"
    )
    with pytest.raises(SnapshotError) as info:
        load_snapshot(bad)
    assert str(info.value) == f"{bad}: node: unknown key, did you mean 'nodes'?"

    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"local_cluster: \xff\n")
    with pytest.raises(SnapshotError) as info:
        load_snapshot(binary)
    assert str(info.value).startswith(f"{binary}: cannot read: 'utf-8' codec can't decode byte 0xff")


def test_builds_the_expected_snapshot() -> None:
    """Every field lands in the model; lists are sorted, absent options take their defaults."""
    snapshot = parse_snapshot(base_doc(), source=SOURCE)
    assert snapshot == Snapshot(
        local_cluster="east",
        clusters=[
            Cluster(id="east", pod_cidrs=[IPv4Network("10.1.0.0/16")], service_cidrs=[IPv4Network("100.1.0.0/16")]),
            Cluster(id="west", pod_cidrs=[IPv4Network("10.2.0.0/16")], service_cidrs=[IPv4Network("100.2.0.0/16")]),
        ],
        nodes=[
            Node(name="e-gw1", ip=IPv4Address("172.18.0.6"), cni_ip=IPv4Address("10.1.1.1"), gateway=True),
            Node(name="e-w1", ip=IPv4Address("172.18.0.3"), cni_ip=IPv4Address("10.1.3.1"), gateway=False),
        ],
        endpoints=[
            Endpoint(
                cluster="east",
                hostname="e-gw1",
                private_ip=IPv4Address("172.18.0.6"),
                public_ip=IPv4Address("198.51.100.6"),
            ),
            Endpoint(
                cluster="west",
                hostname="w-gw1",
                private_ip=IPv4Address("172.19.0.4"),
                subnets=[IPv4Network("10.2.0.0/16")],
            ),
        ],
        config=Config(),
        health=Health(down=frozenset({"w-gw1"}), reach={"e-gw1": ["west"]}),
    )


def test_minimal_document_takes_every_default() -> None:
    """Only local_cluster and clusters are required; nodes/endpoints default to empty, config to Config()."""
    snapshot = parse_snapshot(
        {"local_cluster": "east", "clusters": [{"id": "east", "pod_cidrs": [], "service_cidrs": []}]}, source=SOURCE
    )
    assert (snapshot.nodes, snapshot.endpoints, snapshot.config, snapshot.health) == ((), (), Config(), Health())
    assert snapshot.config == Config(
        multi_active=True, strategy=Strategy.RESILIENT, underlay_mtu=1500, resilient=ResilientParams()
    )


def test_null_optional_fields_mean_absent() -> None:
    """``public_ip:`` or ``global_cidrs:`` left empty (YAML null) is the same as leaving the key out."""
    text = (
        "local_cluster: east\nstrategy:\nclusters:\n- {id: east, pod_cidrs: [10.1.0.0/16], service_cidrs: [],"
        " global_cidrs: }\nendpoints:\nhealth:\n"
    )
    snapshot = parse_snapshot_text(text, source=SOURCE)
    assert (snapshot.cluster("east").global_cidrs, snapshot.endpoints, snapshot.config.strategy, snapshot.health) == (
        (),
        (),
        Strategy.RESILIENT,
        Health(),
    )


def test_settings_are_read() -> None:
    """strategy, multi_active_gateway, underlay_mtu and resilient parameters reach model.Config."""
    doc = base_doc()
    doc.update(
        strategy="multipath",
        multi_active_gateway=False,
        underlay_mtu=9000,
        resilient={"buckets": 32, "idle_timer": 0, "unbalanced_timer": 5},
    )
    assert parse_snapshot(doc, source=SOURCE).config == Config(
        multi_active=False,
        strategy=Strategy.MULTIPATH,
        underlay_mtu=9000,
        resilient=ResilientParams(buckets=32, idle_timer=0, unbalanced_timer=5),
    )


def test_three_clusters_example() -> None:
    """examples/three-clusters.yaml loads to the clusterset it describes."""
    path = EXAMPLES_DIR / "three-clusters.yaml"
    snapshot = load_snapshot(path)
    assert snapshot.local_cluster == "east"
    assert [c.id for c in snapshot.clusters] == ["east", "north", "west"]
    assert snapshot.cluster("north").global_cidrs == ()
    assert [(n.name, n.gateway) for n in snapshot.nodes] == [
        ("e-gw1", True),
        ("e-gw2", True),
        ("e-w1", False),
        ("e-w2", False),
    ]
    assert [(e.cluster, e.hostname, str(e.underlay_ip)) for e in snapshot.endpoints] == [
        ("east", "e-gw1", "198.51.100.6"),
        ("east", "e-gw2", "198.51.100.8"),
        ("north", "n-gw1", "172.20.0.2"),
        ("west", "w-gw1", "198.51.100.4"),
        ("west", "w-gw2", "198.51.100.9"),
    ]
    assert snapshot.health == Health(down=frozenset({"w-gw2"}), reach={"e-gw2": ["west"]})
    assert snapshot.config.resilient == ResilientParams(buckets=64, idle_timer=5, unbalanced_timer=30)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_loads_and_round_trips(path: pathlib.Path) -> None:
    """Each shipped example is valid, and dumping it gives YAML that loads back to an equal snapshot."""
    snapshot = load_snapshot(path)
    assert snapshot.cluster(snapshot.local_cluster).id == snapshot.local_cluster
    assert parse_snapshot_text(dump_snapshot(snapshot), source="dumped") == snapshot
    assert parse_snapshot(snapshot_to_doc(snapshot), source="doc") == snapshot


@settings(max_examples=200, deadline=None)
@given(snapshot=snapshots())
def test_any_valid_snapshot_round_trips_through_yaml(snapshot: Snapshot) -> None:
    """Every snapshot the shared strategy calls valid passes the loader's checks and reads back equal."""
    assert parse_snapshot_text(dump_snapshot(snapshot), source="dumped") == snapshot
