"""One rule for a VIP's ports (magw.desired.egressgw.ports): two Services of one VIP on the same port are a
clash that the first by name wins, named in the planner's own line; the planner's DNAT rules and problems are
exactly what that rule says."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from magw.desired.egressgw.bindings import resolve
from magw.desired.egressgw.plan import EgressGatewayInputs, plan_egressgw
from magw.desired.egressgw.ports import PortClash, port_clashes, services_by_name, vip_ports
from magw.model.egressgw import EgressBinding, EgressConfig, EgressGateway, EgressVIP
from magw.model.globalnet import Pod, Service, ServicePort

WEB = Service(namespace="blog", name="web", selector={"app": "web"}, ports=(ServicePort(port=8080),))
FEED = Service(
    namespace="blog", name="feed", selector={"app": "feed"}, ports=(ServicePort(port=8080, target_port=80),)
)
DNS = Service(namespace="blog", name="dns", selector={"app": "dns"}, ports=(ServicePort(port=8080, protocol="UDP"),))
SCTP = Service(namespace="blog", name="sig", selector={"app": "sig"}, ports=(ServicePort(port=9, protocol="SCTP"),))
PODS = (
    Pod(namespace="blog", name="web-0", ip=IPv4Address("10.1.0.10"), labels={"app": "web"}),
    Pod(namespace="blog", name="feed-0", ip=IPv4Address("10.1.0.11"), labels={"app": "feed"}),
)
VIP = EgressVIP(
    name="web", vip=IPv4Address("192.0.2.10"), vrid=10, candidates=("n1",), bindings=(EgressBinding("blog"),)
)
EGRESS = EgressGateway(config=EgressConfig(vip_ranges=(IPv4Network("192.0.2.0/24"),)), vips=(VIP,))


def test_the_first_service_by_name_keeps_a_port_and_the_other_is_named() -> None:
    """blog/feed and blog/web both on 8080/tcp: feed (first by name) keeps it, web's is one clash, in the line
    the route agent has always logged; UDP 8080 is another port; SCTP is a problem but no clash."""
    used = vip_ports("web", ["blog/dns", "blog/feed", "blog/sig", "blog/web"], services_by_name([WEB, FEED, DNS, SCTP]))
    assert [(p.protocol, p.port, p.service, p.target_port) for p in used.ports] == [
        ("udp", 8080, "blog/dns", 8080),
        ("tcp", 8080, "blog/feed", 80),
    ]
    clash = PortClash(vip="web", protocol="tcp", port=8080, service="blog/web", owner="blog/feed")
    assert used.clashes == (clash,)
    assert str(clash) == "VIP web: 8080/tcp of blog/web is already blog/feed's; ignored"
    assert clash.describe() == "8080/tcp of blog/web is already blog/feed's; ignored"
    assert used.problems == ("VIP web: blog/sig port 9/SCTP is not TCP or UDP", str(clash))


def test_no_clash_between_different_ports() -> None:
    """Services on different ports of one VIP clash with nothing."""
    other = Service(namespace="blog", name="web", selector={"app": "web"}, ports=(ServicePort(port=8081),))
    assert vip_ports("web", ["blog/feed", "blog/web"], services_by_name([other, FEED])).clashes == ()


def test_the_planner_reports_and_dnats_what_the_rule_says() -> None:
    """The planner's problems are the rule's lines and its only DNAT rule for 8080 goes to feed's backend."""
    services = (WEB, FEED)
    resolution = resolve(EGRESS, services, PODS)
    clashes = port_clashes(EGRESS, resolution, services)
    assert [str(c) for c in clashes] == ["VIP web: 8080/tcp of blog/web is already blog/feed's; ignored"]
    plan = plan_egressgw(
        EgressGatewayInputs(node="n1", egressgw=EGRESS, resolution=resolution, services=services, pods=PODS)
    )
    assert plan.problems == tuple(str(c) for c in clashes)
    assert plan.state.nft is not None
    dnat = [r.expr for r in plan.state.nft.rules if '"dnat"' in r.expr and "8080" in r.expr]
    assert len(dnat) == 1 and "10.1.0.11" in dnat[0] and "10.1.0.10" not in dnat[0], dnat
