"""The Globalnet documents in the file broker: statuses written atomically by the store, read back by the
broker into Snapshot.globalnet of the local cluster only; bad documents left out one by one; unreadable
status files named."""

from __future__ import annotations

import os
import threading
from ipaddress import IPv4Address
from pathlib import Path

import pytest
import yaml

from magw.model.globalnet import (
    ALLOCATED,
    ConditionStatus,
    GatewayAddresses,
    GlobalIngressIP,
    GlobalIPStatus,
    GlobalnetCondition,
    ObjectRef,
    TargetType,
)
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore, status_file, status_prefix

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CLUSTERS = """\
kind: Cluster
id: east
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
global_cidrs: [242.1.0.0/16]
---
kind: Cluster
id: west
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
global_cidrs: [242.2.0.0/16]
"""

OBJECTS = """\
kind: GlobalEgressIP
cluster: east
namespace: ns1
name: e
numberOfIPs: 2
---
kind: GlobalEgressIP
cluster: west
namespace: ns1
name: theirs
---
kind: Pod
cluster: east
namespace: ns1
name: p
ip: 10.1.0.5
"""


def _status(ips: list[str], message: str = "ok") -> GlobalIPStatus:
    cond = GlobalnetCondition(type=ALLOCATED, status=ConditionStatus.TRUE, reason="Success", message=message, time="t")
    addresses = [IPv4Address(a) for a in ips]
    return GlobalIPStatus(
        conditions=(cond,), allocated_ips=addresses, gateways=[GatewayAddresses(node="gw1", ips=addresses)]
    )


@pytest.fixture
def broker_dir(tmp_path: Path) -> Path:
    (tmp_path / "clusters.yaml").write_text(CLUSTERS)
    (tmp_path / "objects.yaml").write_text(OBJECTS)
    return tmp_path


def test_written_status_reads_back_for_the_local_cluster_only(broker_dir: Path) -> None:
    store = GlobalnetStore(broker_dir, "east")
    ref = ObjectRef("GlobalEgressIP", "ns1", "e")
    store.write_status(ref, _status(["242.1.0.1", "242.1.0.2"]))
    ing = GlobalIngressIP(
        namespace="ns1",
        name="svc-a",
        target=TargetType.CLUSTER_IP_SERVICE,
        service_name="a",
        target_ref=ObjectRef("Service", "ns1", "a"),
        target_ip=IPv4Address("100.1.0.9"),
    )
    store.write_object(ing)
    broker = FileBroker(broker_dir, local_cluster="east")
    broker.scan()
    snap = broker.snapshot
    assert snap is not None
    gn = snap.globalnet
    assert [(e.namespace, e.name) for e in gn.egress_ips] == [("ns1", "e")], "west's object is not ours"
    assert gn.status_of(ref) == _status(["242.1.0.1", "242.1.0.2"])
    assert gn.ingress_ips == (ing,)
    assert [p.name for p in gn.pods] == ["p"]
    west = FileBroker(broker_dir, local_cluster="west")
    west.scan()
    assert west.snapshot is not None and [e.name for e in west.snapshot.globalnet.egress_ips] == ["theirs"]
    assert west.snapshot.globalnet.statuses == ()
    assert store.delete_status(ref) and not store.delete_status(ref), "a second delete finds nothing, quietly"


def test_file_names_map_back_to_one_object() -> None:
    a = status_file("c", ObjectRef("GlobalEgressIP", "a-b", "c"))
    b = status_file("c", ObjectRef("GlobalEgressIP", "a", "b-c"))
    assert a != b
    assert status_file("c", ObjectRef("ClusterGlobalEgressIP", "", "x")).startswith(status_prefix("c"))
    with pytest.raises(ValueError, match="must be letters"):
        status_file("c", ObjectRef("GlobalEgressIP", "ns", "a@b"))


def test_a_bad_document_is_left_out_alone_and_its_status_file_named(broker_dir: Path) -> None:
    store = GlobalnetStore(broker_dir, "east")
    ref = ObjectRef("GlobalEgressIP", "ns1", "e")
    store.write_status(ref, _status(["242.1.0.1"]))
    (broker_dir / "bad.yaml").write_text("kind: Pod\ncluster: east\nnamespace: ns1\nname: q\nip: 300.1.1.1\n")
    broker = FileBroker(broker_dir, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None and [p.name for p in broker.snapshot.globalnet.pods] == ["p"]
    assert broker.problem_files() == {"bad.yaml"}
    assert broker.problem_files(status_prefix("east")) == frozenset()
    store.status_path(ref).write_text(
        "kind: GlobalnetStatus\ncluster: east\n"
        "object: {kind: GlobalEgressIP, name: e, namespace: ns1}\nallocatedIPs: [nope]\n"
    )
    broker.scan()
    assert broker.problem_files(status_prefix("east")) == {store.status_path(ref).name}
    gn = broker.snapshot.globalnet
    assert gn.status_of(ref) == _status(["242.1.0.1"]), "the last good version stays in use"


def test_a_status_is_never_half_written(broker_dir: Path) -> None:
    """A reader thread, in a bounded loop, always sees a whole document: the old one or the new one."""
    store = GlobalnetStore(broker_dir, "east")
    ref = ObjectRef("GlobalEgressIP", "ns1", "e")
    long_message = "x" * 20000  # a document bigger than one write() of most buffers
    store.write_status(ref, _status(["242.1.0.1"], long_message))
    path = store.status_path(ref)
    seen: list[object] = []
    stop = threading.Event()

    def reader() -> None:
        for _ in range(5000):
            if stop.is_set():
                break
            seen.append(yaml.load(path.read_text(), Loader=LOADER)["allocatedIPs"])

    t = threading.Thread(target=reader)
    t.start()
    for i in range(100):
        store.write_status(ref, _status([f"242.1.0.{1 + i % 2}"], long_message))
    stop.set()
    t.join(timeout=30)
    assert seen and all(s in (["242.1.0.1"], ["242.1.0.2"]) for s in seen)


def test_a_failed_write_leaves_the_old_document(broker_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = GlobalnetStore(broker_dir, "east")
    ref = ObjectRef("GlobalEgressIP", "ns1", "e")
    store.write_status(ref, _status(["242.1.0.1"]))
    before = store.status_path(ref).read_text()

    def no_space(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", no_space)
    with pytest.raises(OSError, match="No space"):
        store.write_status(ref, _status(["242.1.0.7"]))
    monkeypatch.undo()
    assert store.status_path(ref).read_text() == before
    assert not [p for p in broker_dir.iterdir() if p.name.startswith(".")], "no temp file left behind"
