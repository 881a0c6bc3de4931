"""Layout and kube-proxy script of a lab with extra pods, namespaces, selectors and headless services (docs/lab.md)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from magw.lab.build.services import kube_proxy_script
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import load_topology, parse_topology
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "lab-globalnet.yaml"


def ip(text: str) -> IPv4Address:
    return IPv4Address(text)


def test_extra_pods_follow_the_default_pods_of_their_node() -> None:
    """db-0 and batch-1 on w1 after w1-p1: indexes 2 and 3, so .3 and .4, netns ...-w1-p2/-p3, veths p2/p3."""
    east = layout("lab", load_topology(EXAMPLE)).cluster("east")
    pods = {p.short: p for p in east.pods}
    assert [(p.short, str(p.ip), p.namespace, p.host_if) for p in east.pods_of("east-w1")] == [
        ("w1-p1", "10.0.4.2", "lab-east-w1-p1", "p1"),
        ("db-0", "10.0.4.3", "lab-east-w1-p2", "p2"),
        ("batch-1", "10.0.4.4", "lab-east-w1-p3", "p3"),
    ]
    web = pods["web-0"]
    assert (web.name, web.node, str(web.ip), web.namespace) == ("east-web-0", "east-gw1", "10.0.1.3", "lab-east-gw1-p2")
    assert (web.kube_namespace, web.labels) == ("shop", (("app", "web"),))
    assert (pods["batch-1"].kube_namespace, pods["batch-1"].labels) == ("shop", ())


def test_default_pods_are_labelled_in_namespace_default() -> None:
    east = layout("lab", load_topology(EXAMPLE)).cluster("east")
    p = east.pods_of("east-gw2")[0]
    assert (p.short, p.kube_namespace, p.labels) == ("gw2-p1", "default", (("app", "echo"), ("pod", "gw2-p1")))


def test_every_namespace_of_the_lab_is_distinct() -> None:
    lab = layout("lab", load_topology(EXAMPLE))
    assert len(set(lab.namespaces)) == len(lab.namespaces)
    assert len({p.name for p in lab.pods}) == len(lab.pods)


def test_selector_backends_are_the_matching_pods_of_the_service_namespace() -> None:
    """A selector picks pods of the service's namespace only; app: echo picks the default pods, not shop's."""
    topo = parse_topology(
        {
            "clusters": [
                {
                    "id": "e",
                    "workers": 1,
                    "pods_per_node": 1,
                    "pods": [
                        {"name": "a-0", "namespace": "shop", "node": "w1", "labels": {"app": "echo", "tier": "x"}},
                        {"name": "a-1", "namespace": "shop", "node": "gw1", "labels": {"app": "echo"}},
                    ],
                    "services": [
                        {"name": "echo", "selector": {"app": "echo"}},
                        {"name": "x", "namespace": "shop", "selector": {"app": "echo", "tier": "x"}},
                        {"name": "named", "backends": ["a-1", "w1-p1"]},
                        {"name": "plain"},
                        {"name": "hl", "namespace": "shop", "selector": {"app": "echo"}, "headless": True},
                    ],
                }
            ]
        }
    )
    c = layout("lab", topo).clusters[0]
    svc = {s.name: s for s in c.services}
    assert svc["echo"].backends == (ip("10.1.1.2"), ip("10.1.2.2"), ip("10.1.3.2"))
    assert svc["x"].backends == (ip("10.1.3.3"),)
    assert svc["named"].backends == (ip("10.1.1.3"), ip("10.1.3.2"))
    assert svc["plain"].backends == svc["echo"].backends  # p1 of every node, as before
    assert svc["hl"].backends == (ip("10.1.1.3"), ip("10.1.3.3"))
    assert [(s.name, s.namespace, str(s.cluster_ip)) for s in c.services] == [
        ("echo", "default", "100.1.0.10"),
        ("x", "shop", "100.1.0.11"),
        ("named", "default", "100.1.0.12"),
        ("plain", "default", "100.1.0.13"),
        ("hl", "shop", "None"),  # headless: no ClusterIP, and the slots of the others did not move
    ]


def test_kube_proxy_has_no_rule_for_a_headless_service_and_namespaced_chains() -> None:
    topo = parse_topology(
        {
            "clusters": [
                {
                    "id": "e",
                    "workers": 1,
                    "pods_per_node": 1,
                    "pods": [{"name": "a-0", "namespace": "shop", "node": "w1", "labels": {"app": "a"}}],
                    "services": [
                        {"name": "web", "namespace": "shop", "selector": {"app": "a"}, "headless": True},
                        {"name": "web", "selector": {"app": "echo"}},
                        {"name": "api", "namespace": "shop", "selector": {"app": "a"}},
                    ],
                }
            ]
        }
    )
    script = kube_proxy_script(layout("lab", topo).clusters[0])
    assert "100.1.0.10" not in script  # the headless service's slot
    assert "ip daddr 100.1.0.11 meta l4proto { tcp, udp } th dport 8080 goto svc-web comment" in script
    assert 'goto svc-shop.api comment "service shop/api"' in script
    assert "chain ep-shop.api-0 {" in script and "dnat to 10.1.3.3:8080" in script


def test_globalnet_values_reach_the_cluster_layout() -> None:
    lab = layout("lab", load_topology(EXAMPLE))
    assert [(c.id, c.global_cidr, c.cluster_egress_ips) for c in lab.clusters] == [
        ("east", IPv4Network("242.1.0.0/16"), 2),
        ("west", IPv4Network("242.2.0.0/16"), 2),
        ("north", IPv4Network("242.3.0.0/16"), 2),
    ]
    assert [e.name for e in lab.cluster("east").global_egress_ips] == ["db", "all"]
    assert {c.pod_cidr for c in lab.clusters} == {IPv4Network("10.0.0.0/16")}
