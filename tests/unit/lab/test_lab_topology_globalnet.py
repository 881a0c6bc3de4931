"""The lab's Globalnet topology keys (docs/lab.md): defaults, one-line errors, overlaps, round trip."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pytest

from magw.lab.errors import LabInputError
from magw.lab.spec.cluster import GlobalEgressSpec, PodSpec
from magw.lab.spec.topology import load_topology, parse_topology
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "lab-globalnet.yaml"
SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16"}


def gn(*clusters: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"globalnet": True, "clusters": list(clusters), **top}


def test_plain_topology_has_no_globalnet_values() -> None:
    """Without ``globalnet``: no global CIDR, no extra pods, services in namespace default, not exported."""
    topo = parse_topology({"clusters": [{"id": "e"}, {"id": "w"}]})
    assert topo.globalnet is False
    c = topo.clusters[0]
    assert (c.global_cidr, c.cluster_egress_ips, c.global_egress_ips, c.pods) == (None, 8, (), ())
    (svc,) = c.services
    assert (svc.namespace, svc.selector, svc.headless, svc.export) == ("default", None, False, False)
    assert "globalnet" not in topo.to_doc()


def test_globalnet_defaults() -> None:
    """global_cidr 242.<i+1>.0.0/16, 8 cluster egress IPs; items get namespace default and 1 address."""
    topo = parse_topology(
        gn(
            {"id": "e", **SAME, "global_egress_ips": [{"name": "all"}], "pods": [{"name": "x", "node": "w1"}]},
            {"id": "w", **SAME},
        )
    )
    assert topo.globalnet is True
    assert [str(c.global_cidr) for c in topo.clusters] == ["242.1.0.0/16", "242.2.0.0/16"]
    assert [c.cluster_egress_ips for c in topo.clusters] == [8, 8]
    assert topo.clusters[0].global_egress_ips == (GlobalEgressSpec(name="all", namespace="default"),)
    assert topo.clusters[0].pods == (PodSpec(name="x", node="w1", namespace="default", labels=()),)


def test_every_new_key_is_read() -> None:
    topo = parse_topology(
        gn(
            {
                "id": "e",
                **SAME,
                "global_cidr": "242.7.0.0/24",
                "cluster_egress_ips": 3,
                "pods": [{"name": "db-0", "namespace": "shop", "node": "gw2", "labels": {"role": "db", "a.b/c": "x"}}],
                "services": [
                    {"name": "web", "namespace": "shop", "selector": {"role": "db"}, "headless": True, "export": True},
                    {"name": "echo", "port": 80, "backends": ["db-0", "w1-p1"]},
                ],
                "global_egress_ips": [
                    {
                        "name": "db",
                        "namespace": "shop",
                        "number_of_ips": 4,
                        "pod_selector": {"matchLabels": {"role": "db"}},
                    },
                    {"name": "any", "pod_selector": {}},
                ],
            },
        )
    )
    (c,) = topo.clusters
    assert (c.global_cidr, c.cluster_egress_ips) == (IPv4Network("242.7.0.0/24"), 3)
    assert c.pods == (PodSpec(name="db-0", node="gw2", namespace="shop", labels=(("a.b/c", "x"), ("role", "db"))),)
    web, echo = c.services
    assert (web.namespace, web.selector, web.headless, web.export) == ("shop", (("role", "db"),), True, True)
    assert (echo.backends, echo.selector, echo.export) == (("db-0", "w1-p1"), None, False)
    db, any_ = c.global_egress_ips
    assert (db.namespace, db.number_of_ips, db.pod_selector) == ("shop", 4, (("role", "db"),))
    assert any_.pod_selector == ()  # an empty selector: every pod of the namespace, not "no selector"


def test_clusters_may_share_cidrs_only_with_globalnet() -> None:
    same = [{"id": "e", **SAME}, {"id": "w", **SAME}, {"id": "n", **SAME}]
    assert len(parse_topology(gn(*same)).clusters) == 3
    with pytest.raises(LabInputError, match=r"clusters\[1\].pod_cidr: 10.0.0.0/16 overlaps 10.0.0.0/16 of cluster e"):
        parse_topology({"clusters": same})


def test_pods_and_plain_service_keys_work_without_globalnet() -> None:
    """Extra pods, namespaces, selectors and headless services need no Globalnet; exporting does."""
    topo = parse_topology(
        {
            "clusters": [
                {
                    "id": "e",
                    "pods": [{"name": "web-0", "node": "gw1", "labels": {"app": "web"}}],
                    "services": [{"name": "web", "selector": {"app": "web"}, "headless": True}],
                },
                {"id": "w"},
            ]
        }
    )
    assert topo.clusters[0].pods[0].name == "web-0"
    assert parse_topology(topo.to_doc()) == topo


def test_globalnet_topology_round_trips() -> None:
    """The state file stores the topology: every Globalnet key comes back equal."""
    topo = load_topology(EXAMPLE)
    assert topo.globalnet
    assert parse_topology(topo.to_doc()) == topo
    east = topo.clusters[0]
    assert east.pods and east.global_egress_ips and any(s.headless for s in east.services)


def test_example_globalnet_lab() -> None:
    """examples/lab-globalnet.yaml: 3 clusters with identical CIDRs, east with 3 gateways and the shop namespace."""
    topo = load_topology(EXAMPLE)
    assert [(c.id, c.gateways, c.workers) for c in topo.clusters] == [("east", 3, 1), ("west", 2, 1), ("north", 2, 1)]
    assert {(str(c.pod_cidr), str(c.service_cidr)) for c in topo.clusters} == {("10.0.0.0/16", "100.0.0.0/16")}
    assert all(any(s.export for s in c.services) for c in topo.clusters)
    east = topo.clusters[0]
    assert {(p.name, p.node, p.namespace) for p in east.pods} == {
        ("db-0", "w1", "shop"),
        ("web-0", "gw1", "shop"),
        ("batch-1", "w1", "shop"),
    }
    assert {(e.name, e.number_of_ips, e.pod_selector) for e in east.global_egress_ips} == {
        ("db", 1, (("role", "db"),)),
        ("all", 2, None),
    }


E = {"id": "e", **SAME}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"clusters": [{"id": "e", "global_cidr": "242.1.0.0/16"}]},
         "t.yaml: clusters[0].global_cidr: needs globalnet: true"),
        ({"clusters": [{"id": "e", "cluster_egress_ips": 2}]},
         "t.yaml: clusters[0].cluster_egress_ips: needs globalnet: true"),
        ({"clusters": [{"id": "e", "global_egress_ips": []}]},
         "t.yaml: clusters[0].global_egress_ips: needs globalnet: true"),
        ({"clusters": [{"id": "e", "services": [{"name": "s", "export": True}]}]},
         "t.yaml: clusters[0].services[0].export: needs globalnet: true"),
        ({"globalnet": "yes", "clusters": [E]}, "t.yaml: globalnet: must be true or false, got 'yes'"),
        (gn({**E, "cluster_egress_ips": 0}), "t.yaml: clusters[0].cluster_egress_ips: must be from 1 to 20, got 0"),
        (gn({**E, "cluster_egress_ips": 21}), "t.yaml: clusters[0].cluster_egress_ips: must be from 1 to 20, got 21"),
        (gn({**E, "global_cidr": "242.1.0.1/16"}),
         "t.yaml: clusters[0].global_cidr: '242.1.0.1/16' has host bits set (did you mean 242.1.0.0/16?)"),
        (gn(E, {"id": "w", **SAME, "global_cidr": "242.1.128.0/17"}),
         "t.yaml: clusters[1].global_cidr: 242.1.128.0/17 overlaps global_cidr 242.1.0.0/16 of cluster e"),
        (gn({**E, "global_cidr": "10.0.0.0/24"}),
         "t.yaml: clusters[0].global_cidr: 10.0.0.0/24 overlaps pod_cidr 10.0.0.0/16 of cluster e"),
        (gn(E, {"id": "w", "global_cidr": "100.2.0.0/16"}),
         "t.yaml: clusters[1].global_cidr: 100.2.0.0/16 overlaps service_cidr 100.2.0.0/16 of cluster w"),
        (gn({**E, "global_cidr": "241.0.0.0/16"}),
         "t.yaml: clusters[0].global_cidr: 241.0.0.0/16 overlaps the VTEP ranges (240.0.0.0/7)"),
        (gn({**E, "global_cidr": "198.18.0.0/16"}),
         "t.yaml: clusters[0].global_cidr: 198.18.0.0/16 overlaps the lab WAN (198.18.0.0/24)"),
        (gn({**E, "global_cidr": "242.1.0.0/28"}),
         "t.yaml: clusters[0].global_cidr: 242.1.0.0/28 has fewer than the 16 addresses this cluster's objects may "
         "need"),
        (gn({**E, "pods": [{"node": "w1"}]}), "t.yaml: clusters[0].pods[0].name: is required"),
        (gn({**E, "pods": [{"name": "x"}]}), "t.yaml: clusters[0].pods[0].node: is required"),
        (gn({**E, "pods": [{"name": "x", "node": "w3"}]}),
         "t.yaml: clusters[0].pods[0].node: 'w3' is not a node of this cluster (gw1, gw2, w1, w2)"),
        (gn({**E, "pods": [{"name": "X", "node": "w1"}]}),
         "t.yaml: clusters[0].pods[0].name: 'X' is not a pod name (a-z0-9 and '-', 1-40 chars, not starting or "
         "ending with '-')"),
        (gn({**E, "pods": [{"name": "w1-p2", "node": "w1"}]}),
         "t.yaml: clusters[0].pods[0].name: 'w1-p2' is the name of a pods_per_node pod"),
        (gn({**E, "pods": [{"name": "x", "node": "w1"}, {"name": "x", "node": "w2"}]}),
         "t.yaml: clusters[0].pods[1].name: duplicate pod 'x'"),
        (gn({**E, "pods": [{"name": "x", "node": "w1", "namespace": "Shop"}]}),
         "t.yaml: clusters[0].pods[0].namespace: 'Shop' is not a namespace (a-z0-9 and '-', 1-40 chars, not "
         "starting or ending with '-')"),
        (gn({**E, "pods": [{"name": "x", "node": "w1", "labels": ["a"]}]}),
         "t.yaml: clusters[0].pods[0].labels: must be a mapping, got list"),
        (gn({**E, "pods": [{"name": "x", "node": "w1", "labels": {"a": 1}}]}),
         "t.yaml: clusters[0].pods[0].labels.a: 1 is not a label value (a string of letters, digits and ._/-)"),
        (gn({**E, "pods": [{"name": "x", "node": "w1", "labels": {"a b": "c"}}]}),
         "t.yaml: clusters[0].pods[0].labels: 'a b' is not a label key (letters, digits and ._/-, 1-63 chars)"),
        (gn({**E, "pods": [{"name": "x", "node": "w1", "ip": "10.0.0.9"}]}),
         "t.yaml: clusters[0].pods[0].ip: unknown key (expected one of: labels, name, namespace, node)"),
        (gn({**E, "pods_per_node": 16, "pods": [{"name": "x", "node": "w1"}]}),
         "t.yaml: clusters[0].pods[0].node: more than 16 pods on w1"),
        (gn({**E, "services": [{"name": "s", "selector": {"a": "b"}, "backends": ["w1-p1"]}]}),
         "t.yaml: clusters[0].services[0].selector: selector and backends exclude each other"),
        (gn({**E, "services": [{"name": "s", "headless": "no"}]}),
         "t.yaml: clusters[0].services[0].headless: must be true or false, got 'no'"),
        (gn({**E, "services": [{"name": "s", "namespace": "a"}, {"name": "s", "namespace": "a"}]}),
         "t.yaml: clusters[0].services[1].name: duplicate service 'a/s'"),
        (gn({**E, "services": [{"name": "s", "backends": ["y"]}], "pods": [{"name": "x", "node": "w1"}]}),
         "t.yaml: clusters[0].services[0].backends[0]: no pod 'y' in cluster e"),
        (gn({**E, "global_egress_ips": [{"namespace": "a"}]}),
         "t.yaml: clusters[0].global_egress_ips[0].name: is required"),
        (gn({**E, "global_egress_ips": [{"name": "a", "number_of_ips": 21}]}),
         "t.yaml: clusters[0].global_egress_ips[0].number_of_ips: must be from 1 to 20, got 21"),
        (gn({**E, "global_egress_ips": [{"name": "a", "pod_selector": {"matchExpressions": []}}]}),
         "t.yaml: clusters[0].global_egress_ips[0].pod_selector.matchExpressions: unknown key (expected one of: "
         "matchLabels)"),
        (gn({**E, "global_egress_ips": [{"name": "a"}, {"name": "a", "namespace": "default"}]}),
         "t.yaml: clusters[0].global_egress_ips[1].name: duplicate GlobalEgressIP default/a"),
        (gn({**E, "gw": 1}),
         "t.yaml: clusters[0].gw: unknown key (expected one of: added_gateways, cluster_egress_ips, gateways, "
         "global_cidr, global_egress_ips, id, pod_cidr, pods, pods_per_node, service_cidr, services, workers)"),
        (gn(E, x=1),
         "t.yaml: x: unknown key (expected one of: cable, clusters, egress, globalnet, keep_client_ip, load_balancer, "
         "multi_active, probe, strategy, underlay_mtu, wan_rate)"),
    ],
)  # fmt: skip
def test_bad_globalnet_topology_is_one_line_naming_the_field(doc: object, message: str) -> None:
    with pytest.raises(LabInputError) as err:
        parse_topology(doc, source="t.yaml")
    assert str(err.value) == message


def test_the_globalnet_demo_topology_is_the_example_file() -> None:
    """``magw lab demo --globalnet`` runs examples/lab-globalnet.yaml (kept as one topology in two places)."""

    from magw.lab.scenarios.globalnet_demo import demo_topology
    from magw.lab.spec.topology import load_topology

    example = EXAMPLES / "lab-globalnet.yaml"
    assert demo_topology() == load_topology(example)
