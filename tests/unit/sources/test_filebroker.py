"""The file broker: YAML documents in a directory -> one cluster's Snapshot; endpoint publication."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from magw.model import Config, Endpoint, Health, Node, Snapshot, Strategy
from magw.sources import FileBroker, endpoint_path, publish_endpoint, render_endpoint, withdraw_endpoint
from tests.support.filebroker_world import CLUSTERS, E_GW1, NODES, W_GW1, expected_snapshot, populate, write
from tests.support.paths import EXAMPLES

A = IPv4Address
N = IPv4Network

def events(logs: list[dict[str, object]], name: str) -> list[dict[str, object]]:
    return [e for e in logs if e["event"] == name]


def test_documents_become_the_local_clusters_snapshot(tmp_path: Path) -> None:
    """Clusters, Config, the local cluster's Nodes and every Endpoint make the snapshot; west's Node is left out."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    assert broker.initial_sync_done is False
    assert broker.scan() is True
    assert broker.initial_sync_done is True
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1)
    assert broker.scan() is False  # nothing changed on disk


def test_same_directory_gives_each_cluster_its_own_view(tmp_path: Path) -> None:
    """West's broker sees west's node and no east node, with the same clusters and endpoints."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="west")
    broker.scan()
    assert broker.snapshot is not None
    assert [n.name for n in broker.snapshot.nodes] == ["w-gw1"]
    assert broker.snapshot.endpoints == (E_GW1, W_GW1)


def test_health_document_and_node_public_ip(tmp_path: Path) -> None:
    """A Health document feeds snapshot.health; a Node's public_ip is kept for the daemons, not the snapshot."""
    populate(tmp_path)
    write(tmp_path, "node-e-gw1.yaml", NODES["node-e-gw1.yaml"].replace("}", ", public_ip: 198.18.0.6}"))
    write(tmp_path, "health.yaml", "kind: Health\ndown: [w-gw1]\nreach: {e-gw1: [west]}\n")
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None
    assert broker.snapshot.health == Health(down={"w-gw1"}, reach={"e-gw1": ["west"]})
    assert broker.snapshot.node("e-gw1") == Node(name="e-gw1", ip=A("172.18.0.6"), cni_ip=A("10.1.1.1"), gateway=True)
    assert broker.local_node_document("e-gw1") == {
        "cluster": "east",
        "name": "e-gw1",
        "ip": "172.18.0.6",
        "cni_ip": "10.1.1.1",
        "gateway": True,
        "public_ip": "198.18.0.6",
    }
    assert broker.local_node_document("w-gw1") is None


def test_publish_writes_the_document_by_rename_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """publish_endpoint renames a fully written hidden temp file from the same directory onto the target."""
    renames: list[tuple[str, str, str]] = []
    real_rename = os.rename

    def spy(src: str, dst: str) -> None:
        renames.append((str(src), str(dst), Path(src).read_text()))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", spy)
    path = publish_endpoint(tmp_path, E_GW1)
    assert path == tmp_path / "endpoint-east@e-gw1.yaml"
    assert len(renames) == 1
    src, dst, content_at_rename = renames[0]
    assert Path(src).parent == tmp_path
    assert Path(src).name.startswith(".endpoint-east@e-gw1.yaml.")
    assert dst == str(path)
    assert content_at_rename == render_endpoint(E_GW1)
    assert yaml.safe_load(path.read_text()) == {
        "kind": "Endpoint",
        "cluster": "east",
        "hostname": "e-gw1",
        "private_ip": "172.18.0.6",
        "public_ip": "198.18.0.6",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["endpoint-east@e-gw1.yaml"]


def test_publish_failure_keeps_the_old_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the rename fails, the previous document is intact and the temp file is removed."""
    publish_endpoint(tmp_path, E_GW1)
    before = endpoint_path(tmp_path, "east", "e-gw1").read_text()

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", broken)
    moved = Endpoint(cluster="east", hostname="e-gw1", private_ip=A("172.18.0.6"), public_ip=A("198.18.0.7"))
    with pytest.raises(OSError, match="No space left"):
        publish_endpoint(tmp_path, moved)
    assert endpoint_path(tmp_path, "east", "e-gw1").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["endpoint-east@e-gw1.yaml"]


def test_endpoint_files_of_different_gateways_never_collide(tmp_path: Path) -> None:
    """Cluster 'a-b' host 'c' and cluster 'a' host 'b-c' get two files; withdrawing one leaves the other."""
    one = Endpoint(cluster="a-b", hostname="c", private_ip=A("172.18.0.6"), public_ip=A("198.18.0.6"))
    two = Endpoint(cluster="a", hostname="b-c", private_ip=A("172.18.0.7"), public_ip=A("198.18.0.7"))
    assert publish_endpoint(tmp_path, one) != publish_endpoint(tmp_path, two)
    assert withdraw_endpoint(tmp_path, "a-b", "c") is True
    assert [yaml.safe_load(p.read_text())["hostname"] for p in tmp_path.iterdir()] == ["b-c"]


def test_endpoint_names_must_be_file_safe(tmp_path: Path) -> None:
    """A hostname with a slash cannot escape the broker directory."""
    with pytest.raises(ValueError, match=r"^hostname: '\.\./x' must be letters"):
        endpoint_path(tmp_path, "east", "../x")


def test_withdraw_removes_the_document_and_the_endpoint(tmp_path: Path) -> None:
    """After withdraw_endpoint the next scan drops the endpoint; withdrawing again is not an error."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert withdraw_endpoint(tmp_path, "west", "w-gw1") is True
    assert broker.scan() is True
    assert broker.snapshot == expected_snapshot(E_GW1)
    assert withdraw_endpoint(tmp_path, "west", "w-gw1") is False


async def _wait_for(predicate: Callable[[], bool], *, limit: float = 10.0) -> None:
    """Bounded wait (a safety net, not a speed assertion)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not predicate():
        assert loop.time() < end, "condition not reached within the safety limit"
        await asyncio.sleep(0.01)


async def test_run_notifies_listeners_of_a_change(tmp_path: Path) -> None:
    """While run() polls, publishing an endpoint reaches the listener as a new snapshot."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east", poll_interval=0.02)
    seen: list[Snapshot | None] = []
    broker.subscribe(seen.append)
    task = asyncio.create_task(broker.run())
    await _wait_for(lambda: len(seen) == 1)
    moved = Endpoint(cluster="west", hostname="w-gw2", private_ip=A("172.19.0.9"))
    publish_endpoint(tmp_path, moved)
    await _wait_for(lambda: len(seen) == 2)
    broker.stop()
    await asyncio.wait_for(task, 10)
    assert seen == [expected_snapshot(E_GW1, W_GW1), expected_snapshot(E_GW1, W_GW1, moved)]


async def test_watch_yields_the_first_snapshot_then_changes(tmp_path: Path) -> None:
    """watch() is an async iterator: first the current snapshot, then one per change."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east", poll_interval=0.02)
    got: list[Snapshot | None] = []
    async with asyncio.timeout(10):
        async for snap in broker.watch():
            got.append(snap)
            if len(got) == 1:
                withdraw_endpoint(tmp_path, "east", "e-gw1")
            else:
                break
    assert got == [expected_snapshot(E_GW1, W_GW1), expected_snapshot(W_GW1)]


def test_bad_new_document_is_skipped_and_logged(tmp_path: Path) -> None:
    """A new file with an invalid field is left out, logged once with its file name; the rest is used."""
    populate(tmp_path)
    write(tmp_path, "node-e-w2.yaml", "{kind: Node, cluster: east, name: e-w2, ip: 172.18.0.300, cni_ip: 10.1.9.1}\n")
    broker = FileBroker(tmp_path, local_cluster="east")
    with capture_logs() as logs:
        broker.scan()
        write(tmp_path, "unrelated.yaml", "kind: Cluster\nid: north\npod_cidrs: [10.3.0.0/16]\nservice_cidrs: []\n")
        broker.scan()
    assert broker.snapshot is not None
    assert [n.name for n in broker.snapshot.nodes] == ["e-gw1", "e-w1"]
    bad = events(logs, "filebroker.bad_document")
    assert bad == [
        {
            "event": "filebroker.bad_document",
            "log_level": "warning",
            "file": "node-e-w2.yaml",
            "error": "node-e-w2.yaml: document 1 (Node east/e-w2): ip: '172.18.0.300' is not an IPv4 address",
            "kept_last_good": False,
        }
    ]


def test_broken_edit_keeps_the_last_good_version(tmp_path: Path) -> None:
    """An endpoint edited into an invalid one keeps its last good version: a typo never withdraws a gateway. The
    snapshot stays, but the listeners are told, as ``problem_files()`` changed (the Globalnet controller holds
    allocations back while a file is unreadable), and told again when the file is fixed."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    told: list[Snapshot | None] = []
    broker.subscribe(told.append)
    path = endpoint_path(tmp_path, "west", "w-gw1")
    good = path.read_text()
    write(tmp_path, path.name, good.replace("172.19.0.4", "172.19.0.999"))
    with capture_logs() as logs:
        assert broker.scan() is True
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1)
    assert told == [broker.snapshot]
    assert broker.problem_files() == {"endpoint-west@w-gw1.yaml"}
    assert [(e["file"], e["kept_last_good"]) for e in events(logs, "filebroker.bad_document")] == [
        ("endpoint-west@w-gw1.yaml", True)
    ]
    assert broker.scan() is False  # nothing new
    write(tmp_path, path.name, good)
    assert broker.scan() is True
    assert broker.problem_files() == frozenset() and len(told) == 2


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_emptied_file_keeps_its_last_good_documents(tmp_path: Path, content: str) -> None:
    """Writers replace files by rename and delete them by unlink, so an empty file was cut short (found by the soak,
    benchmarks/soak.py: emptying a Node's file for 3 s deleted the node and cost its pods' flows). Its documents
    stay, and it is reported like any bad file; removing the file still deletes them."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    before = broker.snapshot
    write(tmp_path, "node-e-w1.yaml", content)
    with capture_logs() as logs:
        broker.scan()
    assert broker.snapshot == before
    assert [(e["file"], e["error"], e["kept_last_good"]) for e in events(logs, "filebroker.bad_document")] == [
        ("node-e-w1.yaml", "node-e-w1.yaml: empty (cut short?)", True)
    ]
    (tmp_path / "node-e-w1.yaml").unlink()
    broker.scan()
    assert broker.snapshot is not None and [n.name for n in broker.snapshot.nodes] == ["e-gw1"]


def test_unparsable_file_keeps_its_last_good_documents(tmp_path: Path) -> None:
    """A YAML syntax error is reported with file and line; the file's previous documents stay."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    write(tmp_path, "node-e-w1.yaml", "kind: Node\nname: [e-w1\n")
    with capture_logs() as logs:
        broker.scan()
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1)
    (bad,) = events(logs, "filebroker.bad_document")
    assert str(bad["error"]).startswith("node-e-w1.yaml:3: ")
    assert bad["kept_last_good"] is True


def test_duplicate_key_is_an_error_not_last_one_wins(tmp_path: Path) -> None:
    """A Config with ``strategy`` twice is refused with file and line; the last good Config stays."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    before = broker.snapshot
    write(tmp_path, "config.yaml", "kind: Config\nstrategy: resilient\nstrategy: multipath\n")
    with capture_logs() as logs:
        broker.scan()
    assert broker.snapshot == before
    (bad,) = events(logs, "filebroker.bad_document")
    assert bad["error"] == "config.yaml:3: duplicate key 'strategy'"


def test_conflicting_newcomer_is_blamed_not_the_established_document(tmp_path: Path) -> None:
    """A new node reusing an established node's IP is the one left out, whatever the file names' order."""
    populate(tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    write(tmp_path, "a-first.yaml", "{kind: Node, cluster: east, name: e-w9, ip: 172.18.0.3, cni_ip: 10.1.9.1}\n")
    with capture_logs() as logs:
        broker.scan()
    assert broker.snapshot is not None
    assert [n.name for n in broker.snapshot.nodes] == ["e-gw1", "e-w1"]
    (bad,) = events(logs, "filebroker.bad_document")
    assert bad["file"] == "a-first.yaml"
    assert str(bad["error"]).startswith("a-first.yaml: document 1 (Node east/e-w9): ")


def test_second_config_document_is_a_duplicate(tmp_path: Path) -> None:
    """Config is a singleton: a second one is reported and left out."""
    populate(tmp_path)
    write(tmp_path, "config2.yaml", "kind: Config\nstrategy: multipath\n")
    broker = FileBroker(tmp_path, local_cluster="east")
    with capture_logs() as logs:
        broker.scan()
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1)
    assert [e["error"] for e in events(logs, "filebroker.bad_document")] == [
        "config2.yaml: document 1 (Config): duplicate Config document (also config.yaml: document 1 (Config))"
    ]


def test_shape_errors_name_the_field(tmp_path: Path) -> None:
    """Unknown kinds and unknown Config keys are one-line errors naming the document."""
    populate(tmp_path)
    write(tmp_path, "odd.yaml", "kind: Gateway\nname: x\n---\n[1, 2]\n")
    write(tmp_path, "config.yaml", "kind: Config\nstrategy: group\nunderlay_mtu: 1400\nmtu: 1\n")
    broker = FileBroker(tmp_path, local_cluster="east")
    with capture_logs() as logs:
        broker.scan()
    errors = sorted(str(e["error"]) for e in events(logs, "filebroker.bad_document"))
    assert errors == [
        "config.yaml: document 1: 'mtu' is not a Config field "
        "(known: multi_active_gateway, strategy, underlay_mtu, resilient, cni, cable, wireguard_port, keep_client_ip)",
        "odd.yaml: document 1: kind: 'Gateway' is not one of Cluster, Config, Node, Endpoint, Health, "
        "Namespace, Pod, Service, ServiceExport, ClusterGlobalEgressIP, GlobalEgressIP, GlobalIngressIP, "
        "GlobalnetStatus, EgressConfig, EgressVIP, EgressVIPStatus, Lease",
    ]
    # config.yaml never had a good version: the snapshot uses the defaults.
    assert broker.snapshot is not None
    assert broker.snapshot.config == Config()


def test_no_local_cluster_means_no_snapshot_yet(tmp_path: Path) -> None:
    """Without the local Cluster document the broker is synced but has no snapshot (consumers wait)."""
    write(tmp_path, "node-e-w1.yaml", NODES["node-e-w1.yaml"])
    broker = FileBroker(tmp_path, local_cluster="east")
    with capture_logs() as logs:
        assert broker.scan() is True
    assert broker.initial_sync_done is True
    assert broker.snapshot is None
    assert events(logs, "filebroker.incomplete") == [
        {
            "event": "filebroker.incomplete",
            "log_level": "info",
            "cluster": "east",
            "missing": "no Cluster document with id 'east'",
        }
    ]
    write(tmp_path, "clusters.yaml", CLUSTERS)
    assert broker.scan() is True
    assert broker.snapshot is not None
    assert [n.name for n in broker.snapshot.nodes] == ["e-w1"]


def test_hidden_and_foreign_files_are_ignored(tmp_path: Path) -> None:
    """Temp files (leading dot), other suffixes and directories are not documents."""
    populate(tmp_path)
    (tmp_path / ".endpoint-west-w-gw9.yaml.1234.tmp").write_text("garbage: [")
    (tmp_path / ".hidden.yaml").write_text("garbage: [")
    (tmp_path / "README.txt").write_text("not yaml: [")
    (tmp_path / "sub.yaml").mkdir()
    broker = FileBroker(tmp_path, local_cluster="east")
    with capture_logs() as logs:
        broker.scan()
    assert events(logs, "filebroker.bad_document") == []
    assert broker.snapshot == expected_snapshot(E_GW1, W_GW1)


def test_missing_directory_is_not_synced(tmp_path: Path) -> None:
    """A broker directory that does not exist (yet) leaves the broker unsynced, logged once."""
    broker = FileBroker(tmp_path / "nope", local_cluster="east")
    with capture_logs() as logs:
        assert broker.scan() is False
        assert broker.scan() is False
    assert broker.initial_sync_done is False
    assert [e["event"] for e in logs] == ["filebroker.no_directory"]


@pytest.mark.parametrize(
    ("cluster", "nodes"),
    [("east", ["e-gw1", "e-gw2", "e-w1"]), ("west", ["w-gw1", "w-w1"])],
)
def test_example_broker_directory_is_valid(cluster: str, nodes: list[str]) -> None:
    """examples/broker (used in docs/daemons.md) gives each cluster a snapshot without any problem."""
    directory = EXAMPLES / "broker"
    broker = FileBroker(directory, local_cluster=cluster)
    with capture_logs() as logs:
        broker.scan()
    assert events(logs, "filebroker.bad_document") == []
    assert broker.snapshot is not None
    assert [n.name for n in broker.snapshot.nodes] == nodes
    assert [(e.cluster, e.hostname) for e in broker.snapshot.endpoints] == [
        ("east", "e-gw1"),
        ("east", "e-gw2"),
        ("west", "w-gw1"),
    ]
    assert broker.snapshot.config.strategy is Strategy.RESILIENT
