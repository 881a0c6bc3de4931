"""A Globalnet lab's broker documents, read back through ``FileBroker`` as the controller reads them (docs/lab.md)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from magw.ipam.ingress import wanted_ingress_ips
from magw.lab.planes.daemons import broker_documents, write_broker
from magw.lab.planes.globalnet_docs import globalnet_documents
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import default_topology, load_topology
from magw.model.globalnet import Globalnet, PodPhase
from magw.sources.file.broker import FileBroker
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "lab-globalnet.yaml"


@pytest.fixture
def lab() -> LabLayout:
    return layout("lab", load_topology(EXAMPLE))


def snapshot_globalnet(directory: Path, cluster: str) -> tuple[Globalnet, list[IPv4Network]]:
    broker = FileBroker(directory, local_cluster=cluster)
    broker.scan()
    assert broker.problem_files() == frozenset()
    snap = broker.snapshot
    assert snap is not None
    own = next(c for c in snap.clusters if c.id == cluster)
    return snap.globalnet, list(own.global_cidrs)


def test_every_object_of_every_cluster_parses_through_the_file_broker(lab: LabLayout, tmp_path: Path) -> None:
    write_broker(lab, tmp_path)
    for c in lab.clusters:
        gn, cidrs = snapshot_globalnet(tmp_path, c.id)
        assert cidrs == [c.global_cidr]
        assert {(p.namespace, p.name, p.ip, p.node, p.phase) for p in gn.pods} == {
            (p.kube_namespace, p.short, p.ip, p.node, PodPhase.RUNNING) for p in c.pods
        }
        assert {(p.name, p.label_map.get("app")) for p in gn.pods} >= {(p.short, "echo") for p in c.pods[:1]}
        assert {(s.namespace, s.name, s.cluster_ip) for s in gn.services} == {
            (s.namespace, s.name, s.cluster_ip) for s in c.services
        }
        assert {(e.namespace, e.name) for e in gn.service_exports} == {
            (s.namespace, s.name) for s in c.services if s.export
        }
        assert [(t.name, t.number_of_ips) for t in gn.cluster_egress_ips] == [
            ("cluster-egress.submariner.io", c.cluster_egress_ips)
        ]
        assert {(e.namespace, e.name, e.number_of_ips) for e in gn.egress_ips} == {
            (e.namespace, e.name, e.number_of_ips) for e in c.global_egress_ips
        }
    east, _ = snapshot_globalnet(tmp_path, "east")
    assert {n.name for n in east.namespaces} == {"default", "shop"}
    db = next(e for e in east.egress_ips if e.name == "db")
    assert db.pod_selector is not None and db.pod_selector.match_labels == (("role", "db"),)
    assert next(e for e in east.egress_ips if e.name == "all").pod_selector is None
    web = next(s for s in east.services if s.name == "web")
    assert web.headless and web.selector == (("app", "web"),)
    echo = next(s for s in east.services if s.name == "echo")
    assert [(p.port, p.protocol, p.target_port) for p in echo.ports] == [(8080, "TCP", 8080), (8080, "UDP", 8080)]


def test_the_controller_would_make_the_ingress_objects_the_lab_expects(lab: LabLayout, tmp_path: Path) -> None:
    """The exported ClusterIP service gets ``svc-echo`` to its ClusterIP, the headless one ``pod-web-0``."""
    write_broker(lab, tmp_path)
    gn, _ = snapshot_globalnet(tmp_path, "east")
    wanted = {(o.namespace, o.name, o.target_ip) for o in wanted_ingress_ips(gn)}
    assert wanted == {
        ("default", "svc-echo", IPv4Address("100.0.0.10")),
        ("shop", "pod-web-0", IPv4Address("10.0.1.3")),
    }


def test_a_lab_without_globalnet_writes_what_it_wrote_before() -> None:
    lab = layout("lab", default_topology())
    assert globalnet_documents(lab) == {}
    docs = broker_documents(lab)
    assert all("global_cidrs" not in d for d in docs.values())
    assert sorted({d["kind"] for d in docs.values()}) == ["Cluster", "Config", "Node"]
