"""The NetworkPolicy in front of magw-egress's API: it selects exactly magw-egress's pods, admits only the API
port, and only from namespaces carrying the documented label and from the nodes' range (the host-network agents)."""

from __future__ import annotations

from tests.support.deploy_checks import find

LABEL = "egress.submariner.io/api-client"


def test_only_labelled_namespaces_and_the_nodes_reach_the_egress_api() -> None:
    policy = find("NetworkPolicy", "magw-egress-api")
    deployment = find("Deployment", "magw-egress")
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    selected = spec["podSelector"]["matchLabels"].items()
    assert selected and selected <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    service_port = find("Service", "magw-egress")["spec"]["ports"][0]["port"]
    assert rule["ports"] == [{"protocol": "TCP", "port": service_port}]
    peers = rule["from"]
    assert {"namespaceSelector": {"matchLabels": {LABEL: "true"}}} in peers
    assert [p for p in peers if "ipBlock" in p] and all(set(p) in ({"namespaceSelector"}, {"ipBlock"}) for p in peers)
    assert not [p for p in peers if p.get("ipBlock", {}).get("cidr") == "0.0.0.0/0"]
