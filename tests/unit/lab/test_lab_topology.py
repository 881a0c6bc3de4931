"""The lab's pure parts: topology validation, addressing, nft scripts, ip commands and broker documents."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from magw.lab.build import wiring
from magw.lab.build.services import cni_masquerade_script, kube_proxy_script
from magw.lab.errors import LabInputError
from magw.lab.planes.daemons import broker_documents, write_broker
from magw.lab.spec import naming
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import default_topology, load_topology, parse_topology
from magw.model import Strategy
from tests.support.paths import EXAMPLES


def test_default_topology_is_two_clusters_of_two_gateways_two_workers_two_pods() -> None:
    """The default lab: east and west, each 2 gateways, 2 workers, 2 pods per node, one service."""
    topo = default_topology()
    assert [(c.id, c.gateways, c.workers, c.pods_per_node) for c in topo.clusters] == [
        ("east", 2, 2, 2),
        ("west", 2, 2, 2),
    ]
    assert [str(c.pod_cidr) for c in topo.clusters] == ["10.1.0.0/16", "10.2.0.0/16"]
    assert [str(c.service_cidr) for c in topo.clusters] == ["100.1.0.0/16", "100.2.0.0/16"]
    assert (topo.multi_active, topo.strategy, topo.underlay_mtu, topo.wan_rate) == (
        True,
        Strategy.RESILIENT,
        1500,
        None,
    )
    assert [s.name for s in topo.clusters[0].services] == ["echo"]


def test_topology_document_round_trips() -> None:
    """to_doc() is read back by parse_topology() to an equal value (the state file relies on it)."""
    topo = parse_topology(
        {
            "strategy": "group",
            "multi_active": False,
            "wan_rate": "50mbit",
            "underlay_mtu": 1400,
            "probe": {"interval": 0.08, "min_interval": 0.04, "budget": 500, "fast_interval": 0.02, "down_after": 2},
            "clusters": [
                {"id": "a", "gateways": 1, "workers": 0, "pods_per_node": 1},
                {"id": "b", "services": [{"name": "web", "port": 80, "backends": ["gw1-p2", "w1-p1"]}]},
            ],
        }
    )
    assert parse_topology(topo.to_doc()) == topo


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("just text", "t.yaml: must be a mapping, got str"),
        ({}, "t.yaml: clusters: is required"),
        ({"clusters": [], "x": 1},
         "t.yaml: x: unknown key (expected one of: cable, clusters, egress, globalnet, keep_client_ip, load_balancer, "
         "multi_active, probe, strategy, underlay_mtu, wan_rate)"),
        ({"clusters": [{"id": "e"}], "probe": {"interval": 0}},
         "t.yaml: probe.interval: must be seconds above 0 and at most 10, got 0"),
        ({"clusters": [{"id": "e"}], "probe": {"down_after": 0}},
         "t.yaml: probe.down_after: must be from 1 to 10, got 0"),
        ({"clusters": [{"id": "e"}], "probe": {"interval": 0.05, "timeout": 0.045}},
         "t.yaml: probe: probe timeout: must be <= the shortest jittered interval 0.04, got 0.045"),
        ({"clusters": [{"id": "e"}], "probe": {"every": 1}},
         "t.yaml: probe.every: unknown key (expected one of: budget, down_after, fast_interval, interval, "
         "min_interval, timeout)"),
        ({"clusters": []}, "t.yaml: clusters: must have 1 to 8 items, got 0"),
        ({"clusters": [{"gateways": 1}]}, "t.yaml: clusters[0].id: is required"),
        ({"clusters": [{"id": "East"}]},
         "t.yaml: clusters[0].id: 'East' is not a cluster id (a-z then a-z0-9, 1-10 chars)"),
        ({"clusters": [{"id": "e", "gateways": 0}]}, "t.yaml: clusters[0].gateways: must be from 1 to 8, got 0"),
        ({"clusters": [{"id": "e", "workers": "2"}]}, "t.yaml: clusters[0].workers: must be an integer, got '2'"),
        ({"clusters": [{"id": "e", "pod_cidr": "10.1.0.0/33"}]},
         "t.yaml: clusters[0].pod_cidr: '10.1.0.0/33' is not an IPv4 CIDR"),
        ({"clusters": [{"id": "e", "pod_cidr": "10.1.0.1/16"}]},
         "t.yaml: clusters[0].pod_cidr: '10.1.0.1/16' has host bits set (did you mean 10.1.0.0/16?)"),
        ({"clusters": [{"id": "e", "pod_cidr": "10.1.0.0/24"}]},
         "t.yaml: clusters[0].pod_cidr: 10.1.0.0/24 has fewer than 5 /24s (one per node)"),
        ({"clusters": [{"id": "e", "pod_cidr": "172.20.0.0/16"}]},
         "t.yaml: clusters[0].pod_cidr: 172.20.0.0/16 overlaps the lab underlays (172.16.0.0/12)"),
        ({"clusters": [{"id": "e", "service_cidr": "10.1.128.0/20"}]},
         "t.yaml: clusters[0].service_cidr: 10.1.128.0/20 overlaps pod_cidr 10.1.0.0/16"),
        ({"clusters": [{"id": "e"}, {"id": "e"}]},
         "t.yaml: clusters[1].id: duplicate cluster id 'e' (also clusters[0])"),
        ({"clusters": [{"id": "e"}, {"id": "w", "pod_cidr": "10.1.0.0/16"}]},
         "t.yaml: clusters[1].pod_cidr: 10.1.0.0/16 overlaps 10.1.0.0/16 of cluster e"),
        ({"clusters": [{"id": "e"}], "strategy": "ecmp"},
         "t.yaml: strategy: 'ecmp' is not one of resilient, group, multipath"),
        ({"clusters": [{"id": "e"}], "wan_rate": "50mb"},
         "t.yaml: wan_rate: '50mb' is not a rate like 50mbit (kbit, mbit or gbit)"),
        ({"clusters": [{"id": "e"}], "underlay_mtu": 100}, "t.yaml: underlay_mtu: must be from 1280 to 9000, got 100"),
        ({"clusters": [{"id": "e"}], "multi_active": "yes"}, "t.yaml: multi_active: must be true or false, got 'yes'"),
        ({"clusters": [{"id": "e", "services": [{"name": "s", "backends": ["w9-p1"]}]}]},
         "t.yaml: clusters[0].services[0].backends[0]: no pod 'w9-p1' in cluster e"),
        ({"clusters": [{"id": "e", "services": [{"name": "s"}, {"name": "s"}]}]},
         "t.yaml: clusters[0].services[1].name: duplicate service 's'"),
        ({"clusters": [{"id": "e", "services": [{"name": "s", "port": 0}]}]},
         "t.yaml: clusters[0].services[0].port: must be from 1 to 65535, got 0"),
        ({"clusters": [{"id": "e", "gw": 1}]},
         "t.yaml: clusters[0].gw: unknown key (expected one of: added_gateways, cluster_egress_ips, gateways, "
         "global_cidr, global_egress_ips, id, pod_cidr, pods, pods_per_node, service_cidr, services, workers)"),
    ],
)  # fmt: skip
def test_bad_topology_is_one_line_naming_the_field(doc: object, message: str) -> None:
    """Every validation error is one line: source, field path, reason."""
    with pytest.raises(LabInputError) as err:
        parse_topology(doc, source="t.yaml")
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    """A YAML syntax error is reported as file:line: reason."""
    path = tmp_path / "bad.yaml"
    path.write_text("clusters:\n  - id: east\n    gateways: [1\n")
    with pytest.raises(LabInputError) as err:
        load_topology(path)
    assert str(err.value).startswith(f"{path}:4: ")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    """PyYAML would keep the last 'gateways' silently; the topology loader names the key and its line."""
    path = tmp_path / "dup.yaml"
    path.write_text("clusters:\n  - id: east\n    gateways: 2\n    gateways: 3\n  - id: west\n")
    with pytest.raises(LabInputError) as err:
        load_topology(path)
    assert str(err.value) == f"{path}:4: duplicate key 'gateways'"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("lab-*.yaml")), ids=lambda p: p.name)
def test_example_topologies_load(path: Path) -> None:
    """Every examples/lab-*.yaml is a valid topology with at least two clusters."""
    assert len(load_topology(path).clusters) >= 2


def test_lab_names() -> None:
    """Lab names have no hyphen (the namespace prefix '<lab>-' is then the lab's alone) and fit the limits."""
    assert naming.check_lab_name("magw2") == "magw2"
    for bad in ("", "Magw", "ma-gw", "2magw", "abcdefghijklm"):
        with pytest.raises(LabInputError):
            naming.check_lab_name(bad)


def test_default_layout_addressing() -> None:
    """Underlays, node IPs, CNI /24s, pods, WAN IPs and ClusterIPs follow the documented plan."""
    lab = layout("magw", default_topology())
    east, west = lab.clusters
    rows = [(n.name, n.role, n.namespace, str(n.node_ip), str(n.cni_ip), str(n.public_ip)) for n in east.nodes]
    assert rows == [
        ("east-gw1", "gateway", "magw-east-gw1", "172.17.0.11", "10.1.1.1", "198.18.0.11"),
        ("east-gw2", "gateway", "magw-east-gw2", "172.17.0.12", "10.1.2.1", "198.18.0.12"),
        ("east-w1", "worker", "magw-east-w1", "172.17.0.101", "10.1.3.1", "None"),
        ("east-w2", "worker", "magw-east-w2", "172.17.0.102", "10.1.4.1", "None"),
    ]
    assert [str(g.public_ip) for g in west.gateways] == ["198.18.0.21", "198.18.0.22"]
    assert [str(n.node_ip) for n in west.nodes] == ["172.18.0.11", "172.18.0.12", "172.18.0.101", "172.18.0.102"]
    assert [(p.name, p.namespace, str(p.ip), p.host_if) for p in east.pods_of("east-w1")] == [
        ("east-w1-p1", "magw-east-w1-p1", "10.1.3.2", "p1"),
        ("east-w1-p2", "magw-east-w1-p2", "10.1.3.3", "p2"),
    ]
    svc = east.services[0]
    assert (svc.name, svc.ip, svc.port, svc.backends) == (
        "echo",
        IPv4Address("100.1.0.10"),
        8080,
        tuple(IPv4Address(a) for a in ("10.1.1.2", "10.1.2.2", "10.1.3.2", "10.1.4.2")),
    )
    assert (east.underlay, east.underlay_ns, lab.wan_ns) == (IPv4Network("172.17.0.0/24"), "magw-east-ul", "magw-wan")
    assert len(lab.namespaces) == len(set(lab.namespaces)) == 1 + 2 + 8 + 16
    assert all(ns.startswith("magw-") for ns in lab.namespaces)


def test_vteps_do_not_collide() -> None:
    """Node IPs differ in their low 24 bits inside a cluster; gateways' differ across the clusterset."""
    lab = layout("x", parse_topology({"clusters": [{"id": f"c{i}", "gateways": 8, "workers": 32} for i in range(8)]}))
    for c in lab.clusters:
        lows = [int(n.node_ip) & 0xFFFFFF for n in c.nodes]
        assert len(lows) == len(set(lows))
    gw_lows = [int(g.node_ip) & 0xFFFFFF for g in lab.gateways]
    assert len(gw_lows) == len(set(gw_lows)) == 64
    publics = [g.public_ip for g in lab.gateways]
    assert len(set(publics)) == 64
    assert all(p is not None and p in lab.wan_subnet for p in publics)


def test_interface_names_fit_ifnamsiz() -> None:
    """The longest cluster id and node names still give interface names of at most 15 characters."""
    lab = layout("abcdefghijkl", parse_topology({"clusters": [{"id": "abcdefghij", "gateways": 8, "workers": 32}]}))
    names = wiring.wan_ports(lab) + wiring.underlay_ports(lab.clusters[0]) + [p.host_if for p in lab.pods]
    assert max(len(n) for n in names) <= naming.IFNAMSIZ_MAX


def test_service_and_masquerade_scripts() -> None:
    """kube-proxy DNATs via a numgen vmap to per-endpoint chains (hairpin marked for masquerade); the CNI
    masquerades pod traffic leaving the cluster."""
    east = layout("magw", default_topology()).clusters[0]
    kube = kube_proxy_script(east)
    assert 'ip daddr 100.1.0.10 meta l4proto { tcp, udp } th dport 8080 goto svc-echo comment "service echo"' in kube
    assert (
        "numgen random mod 4 vmap { 0 : goto ep-echo-0, 1 : goto ep-echo-1, 2 : goto ep-echo-2, 3 : goto ep-echo-3 }"
        in kube
    )
    assert (
        "ip saddr 10.1.4.2 meta mark set meta mark | 0x4000\n\t\tmeta l4proto { tcp, udp } dnat to 10.1.4.2:8080"
        in kube
    )
    assert "meta mark & 0x4000 == 0x4000 masquerade" in kube
    assert "type nat hook prerouting priority dstnat; policy accept;" in kube
    assert "type nat hook output priority -100; policy accept;" in kube
    cni = cni_masquerade_script(east)
    assert 'ip saddr 10.1.0.0/16 ip daddr != { 10.1.0.0/16, 100.1.0.0/16 } oifname != "cni0" masquerade' in cni
    assert "type nat hook postrouting priority srcnat; policy accept;" in cni


def test_node_commands_of_a_gateway() -> None:
    """A gateway gets its underlay veth, cni0 with its pods, a WAN veth and routes to the other nodes' pods; its
    links' MACs are their addresses behind 02:1a (a node made again keeps them: wiring.link_mac)."""
    lab = layout("magw", default_topology())
    east = lab.clusters[0]
    cmds = wiring.node_commands(lab, east, east.nodes[0])
    assert cmds[:3] == [
        "link add eth0 address 02:1a:ac:11:00:0b mtu 1500 type veth peer name gw1 mtu 1500 netns magw-east-ul",
        "addr add 172.17.0.11/24 dev eth0",
        "link set eth0 up",
    ]
    wan = "link add wan0 address 02:1a:c6:12:00:0b mtu 1500 type veth peer name east-gw1 mtu 1500 netns magw-wan"
    assert wan in cmds
    assert "addr add 198.18.0.11/24 dev wan0" in cmds
    assert [c for c in cmds if c.startswith("route")] == [
        "route add 10.1.2.0/24 via 172.17.0.12 dev eth0",
        "route add 10.1.3.0/24 via 172.17.0.101 dev eth0",
        "route add 10.1.4.0/24 via 172.17.0.102 dev eth0",
        "route add 100.1.0.0/16 dev eth0",
    ]
    worker = wiring.node_commands(lab, east, east.nodes[2])
    assert not any("wan0" in c for c in worker)


def test_tbf_burst_is_ten_ms_of_the_rate() -> None:
    """50mbit gives a 62500-byte burst; small rates get the 32 KiB floor."""
    assert wiring.tbf_argv("ns", "50mbit")[-5:] == ["50mbit", "burst", "62500", "latency", "50ms"]
    assert wiring.tbf_argv("ns", "1mbit")[-3] == str(32 * 1024)


def test_broker_documents_assemble_into_a_snapshot(tmp_path: Path) -> None:
    """The lab's broker documents plus published endpoints give each cluster a valid snapshot."""
    from magw.model import Endpoint
    from magw.sources.file.broker import FileBroker
    from magw.sources.file.endpoint_files import publish_endpoint

    lab = layout("magw", default_topology())
    write_broker(lab, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(broker_documents(lab))
    for gw in lab.gateways:
        publish_endpoint(tmp_path, Endpoint(cluster=gw.cluster, hostname=gw.name, private_ip=gw.node_ip,
                                            public_ip=gw.public_ip))  # fmt: skip
    broker = FileBroker(tmp_path, local_cluster="west")
    broker.scan()
    snap = broker.snapshot
    assert snap is not None
    assert [c.id for c in snap.clusters] == ["east", "west"]
    assert [(n.name, str(n.ip), str(n.cni_ip), n.gateway) for n in snap.nodes] == [
        ("west-gw1", "172.18.0.11", "10.2.1.1", True),
        ("west-gw2", "172.18.0.12", "10.2.2.1", True),
        ("west-w1", "172.18.0.101", "10.2.3.1", False),
        ("west-w2", "172.18.0.102", "10.2.4.1", False),
    ]
    assert [(e.hostname, str(e.underlay_ip)) for e in snap.endpoints] == [
        ("east-gw1", "198.18.0.11"),
        ("east-gw2", "198.18.0.12"),
        ("west-gw1", "198.18.0.21"),
        ("west-gw2", "198.18.0.22"),
    ]
    assert (snap.config.multi_active, snap.config.strategy) == (True, Strategy.RESILIENT)
    node_doc = broker.local_node_document("west-gw1")
    assert node_doc is not None
    assert node_doc["public_ip"] == "198.18.0.21"


def test_the_probe_section_becomes_the_route_agents_flags() -> None:
    topo = parse_topology({"clusters": [{"id": "e"}], "probe": {"interval": 0.08, "timeout": 0.02, "down_after": 2}})
    assert topo.probe is not None
    assert topo.probe.flags() == ("--probe-interval", "0.08", "--probe-timeout", "0.02", "--down-after", "2")
    assert parse_topology({"clusters": [{"id": "e"}]}).probe is None
    budget = parse_topology({"clusters": [{"id": "e"}], "probe": {"budget": 0, "min_interval": 0.05}}).probe
    assert budget is not None
    assert budget.flags() == ("--probe-min-interval", "0.05", "--probe-budget", "0")
    assert parse_topology({"clusters": [{"id": "e"}], "probe": budget.to_doc()}).probe == budget
