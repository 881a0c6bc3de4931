"""plan_globalnet: reservation before allocation, deletes, exported services, precedence, gateways, bad input."""

from __future__ import annotations

from datetime import timedelta
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.ipam.globalnet import gateway_egress_name, plan_globalnet
from magw.ipam.precedence import Level
from magw.model.globalnet import (
    ALLOCATED,
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    POD,
    UPDATED,
    ClusterGlobalEgressIP,
    GlobalEgressIP,
    Globalnet,
    ObjectRef,
    Pod,
    PodPhase,
    Service,
    ServiceExport,
    TargetType,
)
from magw.model.selector import LabelSelector
from tests.support.globalnet_helpers import CIDR, GRACE, T0, check_invariants, converge, held


def ip(text: str) -> IPv4Address:
    return IPv4Address(text)


def geip(ns: str, name: str, n: int = 1, selector: LabelSelector | None = None, err: str = "") -> GlobalEgressIP:
    return GlobalEgressIP(namespace=ns, name=name, number_of_ips=n, pod_selector=selector, pod_selector_error=err)


def ref(kind: str, ns: str, name: str) -> ObjectRef:
    return ObjectRef(kind, ns, name)


def status(gn: Globalnet, r: ObjectRef):  # type: ignore[no-untyped-def]
    st = gn.status_of(r)
    assert st is not None, f"no status for {r}"
    return st


def test_cluster_egress_per_gateway_lowest_addresses() -> None:
    """Two gateways get 8 addresses each (default), from .1, in gateway name order, as their own objects."""
    gn, plan = converge(Globalnet(), gateways=["gw2", "gw1"])
    assert [o.name for o in plan.cluster_egress_ips] == [gateway_egress_name("gw1"), gateway_egress_name("gw2")]
    gw1 = status(gn, ref(CLUSTER_GLOBAL_EGRESS_IP, "", "gw1-cluster-egress.submariner.io"))
    gw2 = status(gn, ref(CLUSTER_GLOBAL_EGRESS_IP, "", "gw2-cluster-egress.submariner.io"))
    assert gw1.allocated_ips == tuple(ip(f"242.1.0.{i}") for i in range(1, 9))
    assert gw2.allocated_ips == tuple(ip(f"242.1.0.{i}") for i in range(9, 17))
    assert [g.node for g in gw2.gateways] == ["gw2"]
    assert plan.pool_used == 16 and plan.pool_size == 254
    check_invariants(gn)


def test_template_sets_the_count_and_foreign_instances_are_refused() -> None:
    gn = Globalnet(
        cluster_egress_ips=[
            ClusterGlobalEgressIP(name="cluster-egress.submariner.io", number_of_ips=3),
            ClusterGlobalEgressIP(name="my-egress", number_of_ips=2),
        ]
    )
    gn, _ = converge(gn)
    assert len(status(gn, ref(CLUSTER_GLOBAL_EGRESS_IP, "", "gw1-cluster-egress.submariner.io")).allocated_ips) == 3
    foreign = status(gn, ref(CLUSTER_GLOBAL_EGRESS_IP, "", "my-egress"))
    cond = foreign.condition(ALLOCATED)
    assert cond is not None and cond.status.value == "False" and cond.reason == "InvalidInstance"
    assert foreign.allocated_ips == ()


def test_recorded_addresses_are_reserved_before_anything_is_allocated() -> None:
    """A restarted controller (statuses only) gives every object the addresses its status records, even when
    a lower address is free and a new object sorts before it."""
    gn, _ = converge(Globalnet(egress_ips=[geip("b", "x", 2)]), gateways=[])
    gn, _ = converge(Globalnet(egress_ips=[geip("b", "x", 2)]), gateways=["gw1"])
    before = status(gn, ref(GLOBAL_EGRESS_IP, "b", "x")).allocated_ips
    # free the cluster egress addresses below it, then add an object that sorts first
    gn2 = attrs.evolve(gn, egress_ips=[geip("a", "first", 4), geip("b", "x", 2)])
    gn2, _ = converge(gn2, gateways=["gw1"])
    assert status(gn2, ref(GLOBAL_EGRESS_IP, "b", "x")).allocated_ips == before
    check_invariants(gn2)


def test_delete_frees_at_once_also_before_a_status_existed() -> None:
    gn, _ = converge(Globalnet(egress_ips=[geip("a", "one", 3)]))
    addresses = status(gn, ref(GLOBAL_EGRESS_IP, "a", "one")).allocated_ips
    gn, _ = converge(attrs.evolve(gn, egress_ips=[]))
    assert ref(GLOBAL_EGRESS_IP, "a", "one") not in dict(gn.statuses)
    assert not set(addresses) & set(held(gn)), "its addresses are free"
    gn, _ = converge(attrs.evolve(gn, egress_ips=[geip("a", "two", 3)]))
    assert status(gn, ref(GLOBAL_EGRESS_IP, "a", "two")).allocated_ips == addresses, "and handed out again"


def test_exported_services_same_name_in_two_namespaces() -> None:
    """ClusterIP: one svc- object; headless with selector: one per Running backend; selector-less: one per
    address. The same service name in ns1 and ns2 gives separate objects, and un-exporting one keeps the other."""
    pods = [
        Pod(namespace="ns1", name="web-0", ip=ip("10.1.0.5"), labels={"app": "web"}),
        Pod(namespace="ns1", name="web-1", ip=ip("10.1.0.6"), labels={"app": "web"}, phase=PodPhase.PENDING),
        Pod(namespace="ns2", name="web-0", ip=ip("10.1.0.7"), labels={"app": "web"}),
    ]
    services = [
        Service(namespace="ns1", name="web", selector={"app": "web"}),
        Service(namespace="ns2", name="web", selector={"app": "web"}),
        Service(namespace="ns1", name="api", cluster_ip=ip("100.1.0.10")),
        Service(namespace="ns1", name="ext", endpoint_addresses=[ip("192.168.1.4")]),
    ]
    exports = [
        ServiceExport(namespace=n, name=s) for n, s in [("ns1", "web"), ("ns2", "web"), ("ns1", "api"), ("ns1", "ext")]
    ]
    gn, plan = converge(Globalnet(pods=pods, services=services, service_exports=exports))
    names = {(o.namespace, o.name): o for o in plan.ingress_ips}
    assert set(names) == {("ns1", "pod-web-0"), ("ns2", "pod-web-0"), ("ns1", "svc-api"), ("ns1", "ep-ext-192-168-1-4")}
    assert names[("ns1", "svc-api")].target is TargetType.CLUSTER_IP_SERVICE
    assert names[("ns1", "svc-api")].target_ip == ip("100.1.0.10")
    assert names[("ns2", "pod-web-0")].target_ref == ObjectRef(POD, "ns2", "web-0")
    kept = status(gn, ref(GLOBAL_INGRESS_IP, "ns2", "pod-web-0")).allocated_ips
    gn, plan = converge(attrs.evolve(gn, service_exports=[e for e in exports if e.namespace != "ns1"]))
    assert {(o.namespace, o.name) for o in plan.ingress_ips} == {("ns2", "pod-web-0")}
    assert status(gn, ref(GLOBAL_INGRESS_IP, "ns2", "pod-web-0")).allocated_ips == kept
    check_invariants(gn)


def test_precedence_levels_and_same_level_conflict() -> None:
    pods = [
        Pod(namespace="ns", name="db", ip=ip("10.1.0.2"), labels={"role": "db"}),
        Pod(namespace="ns", name="head", ip=ip("10.1.0.3"), labels={"app": "h"}),
        Pod(namespace="ns", name="plain", ip=ip("10.1.0.4")),
        Pod(namespace="ns", name="host", ip=ip("172.18.0.3"), host_network=True, labels={"role": "db"}),
        Pod(namespace="other", name="lone", ip=ip("10.1.0.9")),
    ]
    sel = LabelSelector(match_labels={"role": "db"})
    gn = Globalnet(
        pods=pods,
        services=[Service(namespace="ns", name="h", selector={"app": "h"})],
        service_exports=[ServiceExport(namespace="ns", name="h")],
        egress_ips=[geip("ns", "a-db", 1, sel), geip("ns", "b-db", 1, sel), geip("ns", "whole")],
    )
    gn, plan = converge(gn)
    level = {e.pod.name: (e.level, e.source) for e in plan.precedence.egress}
    assert level["db"] == (Level.POD_SELECTOR, ref(GLOBAL_EGRESS_IP, "ns", "a-db"))
    assert level["head"] == (Level.HEADLESS_POD, ref(GLOBAL_INGRESS_IP, "ns", "pod-head"))
    assert level["plain"] == (Level.NAMESPACE, ref(GLOBAL_EGRESS_IP, "ns", "whole"))
    assert level["host"] == (Level.CLUSTER, None)
    assert level["lone"] == (Level.CLUSTER, None)
    loser = status(gn, ref(GLOBAL_EGRESS_IP, "ns", "b-db")).condition("Overridden")
    assert loser is not None and loser.reason == "SelectedPodsOverlap" and "ns/db" in loser.message
    assert status(gn, ref(GLOBAL_EGRESS_IP, "ns", "a-db")).condition("Overridden") is None


def test_bad_input_gets_a_status() -> None:
    gn = Globalnet(
        egress_ips=[
            geip("n", "neg", -1),
            geip("n", "big", 21),
            geip("n", "zero", 0),
            geip("n", "bad", 1, err="podSelector: boom"),
        ]
    )
    gn, _ = converge(gn)
    reasons = {
        r.name: (s.condition(ALLOCATED).status.value, s.condition(ALLOCATED).reason)
        for r, s in gn.statuses
        if r.kind == GLOBAL_EGRESS_IP
    }  # type: ignore[union-attr]
    assert reasons == {
        "neg": ("False", "InvalidInput"),
        "big": ("False", "InvalidInput"),
        "zero": ("True", "ZeroInput"),
        "bad": ("False", "InvalidInput"),
    }
    assert all(not s.allocated_ips for r, s in gn.statuses if r.kind == GLOBAL_EGRESS_IP)


def test_changed_selector_is_refused_and_addresses_kept() -> None:
    gn, _ = converge(Globalnet(egress_ips=[geip("n", "e", 2, LabelSelector(match_labels={"a": "1"}))]))
    before = status(gn, ref(GLOBAL_EGRESS_IP, "n", "e"))
    gn, _ = converge(attrs.evolve(gn, egress_ips=[geip("n", "e", 2, LabelSelector(match_labels={"a": "2"}))]))
    after = status(gn, ref(GLOBAL_EGRESS_IP, "n", "e"))
    assert after.allocated_ips == before.allocated_ips
    assert after.pod_selector == LabelSelector(match_labels={"a": "1"})
    cond = after.condition(UPDATED)
    assert cond is not None and cond.status.value == "False" and cond.reason == "PodSelectorUpdateNotSupported"


def test_exhausted_pool_is_retried_when_addresses_free_up() -> None:
    small = [IPv4Network("242.1.0.0/29")]  # 6 hosts
    gn = Globalnet(
        cluster_egress_ips=[ClusterGlobalEgressIP(name="cluster-egress.submariner.io", number_of_ips=2)],
        egress_ips=[geip("a", "big", 3), geip("b", "late", 3)],
    )
    gn, _ = converge(gn, cidrs=small)
    late = status(gn, ref(GLOBAL_EGRESS_IP, "b", "late"))
    cond = late.condition(ALLOCATED)
    assert cond is not None and cond.reason == "IPPoolAllocationFailed" and late.allocated_ips == ()
    gn, _ = converge(attrs.evolve(gn, egress_ips=[geip("b", "late", 3)]), cidrs=small)
    assert len(status(gn, ref(GLOBAL_EGRESS_IP, "b", "late")).allocated_ips) == 3
    check_invariants(gn, small)


def test_gateway_added_keeps_existing_and_gone_gateway_has_grace() -> None:
    gn, _ = converge(Globalnet(egress_ips=[geip("n", "e", 2)]), gateways=["gw1"])
    e = ref(GLOBAL_EGRESS_IP, "n", "e")
    first = status(gn, e).allocated_ips
    gn, _ = converge(gn, gateways=["gw1", "gw2"])
    st = status(gn, e)
    assert {g.node for g in st.gateways} == {"gw1", "gw2"}
    assert next(g for g in st.gateways if g.node == "gw1").ips == first, "gw1's block unchanged"
    gw2_block = next(g for g in st.gateways if g.node == "gw2").ips
    # gw2 goes: its blocks are kept, marked, within the grace period
    gn, _ = converge(gn, gateways=["gw1"], now=T0 + timedelta(seconds=10))
    gone = next(g for g in status(gn, e).gateways if g.node == "gw2")
    assert gone.ips == gw2_block and gone.gone_since == "2026-11-23T05:00:10Z"
    # it returns within the grace period: same addresses, no longer marked
    gn, _ = converge(gn, gateways=["gw1", "gw2"], now=T0 + timedelta(seconds=100))
    back = next(g for g in status(gn, e).gateways if g.node == "gw2")
    assert back.ips == gw2_block and back.gone_since == ""
    # it goes for longer than the grace period: freed, its cluster egress object deleted
    gn, _ = converge(gn, gateways=["gw1"], now=T0 + timedelta(seconds=200))
    gn, plan = converge(gn, gateways=["gw1"], now=T0 + timedelta(seconds=600))
    assert [g.node for g in status(gn, e).gateways] == ["gw1"]
    assert [o.name for o in plan.cluster_egress_ips] == [gateway_egress_name("gw1")]
    assert not set(gw2_block) & set(held(gn))
    check_invariants(gn)


def test_blocked_allocation_allocates_nothing_and_keeps_statuses() -> None:
    gn, _ = converge(Globalnet(egress_ips=[geip("n", "old", 2)]))
    gn2 = attrs.evolve(gn, egress_ips=[geip("n", "old", 2), geip("n", "new", 2)])
    gn3, plan = converge(gn2, blocked=True)
    assert ref(GLOBAL_EGRESS_IP, "n", "new") in plan.waiting
    assert gn3.status_of(ref(GLOBAL_EGRESS_IP, "n", "new")) is None
    assert status(gn3, ref(GLOBAL_EGRESS_IP, "n", "old")) == status(gn, ref(GLOBAL_EGRESS_IP, "n", "old"))
    gn4, _ = converge(gn3)
    assert len(status(gn4, ref(GLOBAL_EGRESS_IP, "n", "new")).allocated_ips) == 2
    check_invariants(gn4)


def test_condition_time_moves_only_on_a_status_change() -> None:
    gn, _ = converge(Globalnet(egress_ips=[geip("n", "e", 1)]))
    t1 = status(gn, ref(GLOBAL_EGRESS_IP, "n", "e")).condition(ALLOCATED)
    gn, _ = converge(gn, now=T0 + timedelta(hours=1))
    t2 = status(gn, ref(GLOBAL_EGRESS_IP, "n", "e")).condition(ALLOCATED)
    assert t1 is not None and t2 is not None and t1.time == t2.time == "2026-11-23T05:00:00Z"


def test_cidr_is_the_cluster_cidr() -> None:
    assert IPv4Network("242.1.0.0/24") == CIDR


def test_conflicting_recorded_addresses_go_to_the_first_object() -> None:
    """Two statuses (hand-edited) claim 242.1.0.9: the object that sorts first keeps it, the other is given a
    new address and says why; with no free address left it reports ReserveAllocatedIPsFailed."""
    tpl = ClusterGlobalEgressIP(name="cluster-egress.submariner.io", number_of_ips=1)
    gn, _ = converge(Globalnet(cluster_egress_ips=[tpl], egress_ips=[geip("n", "a"), geip("n", "b")]))
    a, b = ref(GLOBAL_EGRESS_IP, "n", "a"), ref(GLOBAL_EGRESS_IP, "n", "b")
    stolen = attrs.evolve(status(gn, b), allocated_ips=status(gn, a).allocated_ips, gateways=status(gn, a).gateways)
    gn2 = attrs.evolve(gn, statuses={**dict(gn.statuses), b: stolen})
    first = plan_globalnet(global_cidrs=[CIDR], gateways=["gw1"], globalnet=gn2, now=T0, grace=GRACE)
    cond = first.statuses[b].condition(ALLOCATED)
    assert cond is not None and cond.reason == "Success" and "not reserved" in cond.message
    gn3, _ = converge(gn2)
    assert status(gn3, a).allocated_ips == status(gn, a).allocated_ips
    assert status(gn3, b).allocated_ips != status(gn, a).allocated_ips
    tiny = [IPv4Network("242.1.0.0/30")]  # 2 hosts, .1 (gw1's) and .2 (a's): none left for b
    once = plan_globalnet(global_cidrs=tiny, gateways=["gw1"], globalnet=gn2, now=T0, grace=GRACE)
    cond = once.statuses[b].condition(ALLOCATED)
    assert cond is not None and (cond.status.value, cond.reason) == ("False", "ReserveAllocatedIPsFailed")
    assert once.statuses[b].allocated_ips == ()
