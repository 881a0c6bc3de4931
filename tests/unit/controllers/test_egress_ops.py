"""The seed's binding rules as operations: shared and exclusive binds, a Service joining its namespace's shared
VIP, unbinding in the seed's order, rebinding; every refusal is one line of the right kind and changes nothing.
Who uses a VIP is judged by the binding resolver (magw.desired.egressgw.bindings), not by the operations."""

from __future__ import annotations

import copy
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network

import pytest

from magw.controllers.egressgw.ops import (
    EgressOpError,
    ErrorKind,
    HolderReport,
    VrrpState,
    apply_report,
    bind,
    check_report,
    find_vip,
    statuses,
    unbind,
)
from magw.desired.egressgw.bindings import resolve
from magw.model.egressgw import EgressBinding, EgressConfig, EgressGateway, EgressVIP, EgressVIPStatus
from magw.model.globalnet import Globalnet, Namespace, Pod, Service


def _vip(name: str, last: int, *bindings: EgressBinding) -> EgressVIP:
    return EgressVIP(
        name=name, vip=IPv4Address(f"192.0.2.{last}"), vrid=last, candidates=("n1", "n2"), bindings=bindings
    )


CONFIG = EgressConfig(vip_ranges=(IPv4Network("192.0.2.0/24"),))
EGRESS = EgressGateway(config=CONFIG, vips=[_vip("a", 10), _vip("b", 11), _vip("c", 12)])
WORKLOADS = Globalnet(
    namespaces=[Namespace(name="shop"), Namespace(name="blog")],
    services=[
        Service(namespace="shop", name="web", selector={"app": "web"}),
        Service(namespace="shop", name="db", selector={"app": "db"}),
        Service(namespace="blog", name="api", selector={"app": "api"}),
    ],
    pods=[Pod(namespace="shop", name="web-1", ip=IPv4Address("10.1.0.10"), labels={"app": "web"})],
)


def _users(egress: EgressGateway) -> dict[str, tuple[str, ...]]:
    r = resolve(egress, WORKLOADS.services, WORKLOADS.pods)
    return {v.name: r.of(v.name).services for v in egress.vips if r.of(v.name).services}


def _refused(kind: ErrorKind, message: str, call: Callable[[], EgressGateway], before: EgressGateway) -> None:
    snapshot = copy.deepcopy(before)
    with pytest.raises(EgressOpError) as info:
        call()
    assert info.value.kind is kind
    assert str(info.value) == message and "\n" not in message
    assert before == snapshot


def test_a_namespace_binding_is_shared_by_every_service_of_the_namespace() -> None:
    e = bind(EGRESS, WORKLOADS, "a", "shop")
    assert e.vip("a") == _vip("a", 10, EgressBinding("shop"))
    assert _users(e) == {"a": ("shop/db", "shop/web")}


def test_a_service_joins_the_shared_vip_without_changing_traffic_and_blocks_the_namespace_unbind() -> None:
    e = bind(bind(EGRESS, WORKLOADS, "a", "shop"), WORKLOADS, "a", "shop", "web")
    assert e.vip("a") is not None and e.vip("a") == _vip("a", 10, EgressBinding("shop"), EgressBinding("shop", "web"))
    assert _users(e) == {"a": ("shop/db", "shop/web")}
    _refused(
        ErrorKind.CONFLICT,
        "VIP a is shared by namespace shop and still used by services shop/web: unbind them first",
        lambda: unbind(e, "a", "shop"),
        e,
    )
    # The seed's order: every Service first, then the namespace.
    e = unbind(e, "a", "shop", "web")
    assert _users(e) == {"a": ("shop/db", "shop/web")}  # still shared by the namespace
    e = unbind(e, "a", "shop")
    assert e == EGRESS and _users(e) == {}


def test_an_exclusive_binding_is_the_services_alone_and_one_unbind_releases_it() -> None:
    e = bind(EGRESS, WORKLOADS, "b", "shop", "web")
    assert _users(e) == {"b": ("shop/web",)}
    e = bind(e, WORKLOADS, "a", "shop")  # the namespace shares another VIP; the exclusive one wins for web
    assert _users(e) == {"a": ("shop/db",), "b": ("shop/web",)}
    e = unbind(e, "b", "shop", "web")
    assert e.vip("b") == _vip("b", 11) and _users(e) == {"a": ("shop/db", "shop/web")}


def test_rebind_at_runtime_moves_a_service_and_a_namespace_between_vips() -> None:
    e = bind(EGRESS, WORKLOADS, "a", "shop", "web")
    e = bind(unbind(e, "a", "shop", "web"), WORKLOADS, "b", "shop", "web")
    assert _users(e) == {"b": ("shop/web",)}
    e = bind(e, WORKLOADS, "c", "blog")
    e = bind(unbind(e, "c", "blog"), WORKLOADS, "a", "blog")
    assert _users(e) == {"a": ("blog/api",), "b": ("shop/web",)}


def test_vips_are_found_by_name_or_address() -> None:
    assert find_vip(EGRESS, "192.0.2.11").name == "b"
    e = bind(EGRESS, WORKLOADS, "192.0.2.12", "blog", "api")
    assert _users(e) == {"c": ("blog/api",)}


SHARED = bind(EGRESS, WORKLOADS, "a", "shop")
NARROW = EgressGateway(config=EgressConfig(vip_ranges=(IPv4Network("192.0.2.128/25"),)), vips=EGRESS.vips)
EXCL = bind(EGRESS, WORKLOADS, "b", "blog", "api")
CASES: list[tuple[str, ErrorKind, str, Callable[[], EgressGateway], EgressGateway]] = [
    ("ns-twice-same-vip", ErrorKind.CONFLICT, "namespace shop is already bound to this VIP",
     lambda: bind(SHARED, WORKLOADS, "a", "shop"), SHARED),
    ("ns-twice-other-vip", ErrorKind.CONFLICT, "namespace shop is already bound to VIP a (192.0.2.10)",
     lambda: bind(SHARED, WORKLOADS, "b", "shop"), SHARED),
    ("svc-twice", ErrorKind.CONFLICT, "service blog/api is already bound to VIP b (192.0.2.11)",
     lambda: bind(EXCL, WORKLOADS, "c", "blog", "api"), EXCL),
    ("join-twice", ErrorKind.CONFLICT, "service shop/web is already bound to this VIP",
     lambda: bind(bind(SHARED, WORKLOADS, "a", "shop", "web"), WORKLOADS, "a", "shop", "web"), SHARED),
    ("share-an-exclusive-vip", ErrorKind.CONFLICT, "VIP b is already bound to service blog/api; unbind it first",
     lambda: bind(EXCL, WORKLOADS, "b", "blog"), EXCL),
    ("second-service-on-exclusive", ErrorKind.CONFLICT,
     "VIP b is already bound to service blog/api: a Service gets a VIP of its own, or joins its namespace's "
     "shared VIP", lambda: bind(EXCL, WORKLOADS, "b", "shop", "web"), EXCL),
    ("service-on-other-namespaces-shared-vip", ErrorKind.CONFLICT,
     "VIP a is already bound to namespace shop: a Service gets a VIP of its own, or joins its namespace's "
     "shared VIP", lambda: bind(SHARED, WORKLOADS, "a", "blog", "api"), SHARED),
    ("unknown-namespace", ErrorKind.NOT_FOUND, "namespace shoop does not exist",
     lambda: bind(EGRESS, WORKLOADS, "a", "shoop"), EGRESS),
    ("unknown-service", ErrorKind.NOT_FOUND, "service shop/cart does not exist",
     lambda: bind(EGRESS, WORKLOADS, "a", "shop", "cart"), EGRESS),
    ("unknown-vip", ErrorKind.NOT_FOUND, "no EgressVIP named 'zz'", lambda: bind(EGRESS, WORKLOADS, "zz", "shop"),
     EGRESS),
    ("unknown-address", ErrorKind.NOT_FOUND, "no EgressVIP has address 192.0.2.99",
     lambda: bind(EGRESS, WORKLOADS, "192.0.2.99", "shop"), EGRESS),
    ("address-outside-ranges", ErrorKind.NOT_FOUND,
     "VIP 198.51.100.1 is outside the egress VIP ranges (192.0.2.0/24)",
     lambda: bind(EGRESS, WORKLOADS, "198.51.100.1", "shop"), EGRESS),
    ("vip-outside-narrowed-ranges", ErrorKind.CONFLICT,
     "VIP a (192.0.2.10) is outside the egress VIP ranges (192.0.2.128/25)",
     lambda: bind(NARROW, WORKLOADS, "a", "shop"), NARROW),
    ("no-namespace", ErrorKind.INVALID, "namespace: required", lambda: bind(EGRESS, WORKLOADS, "a", ""), EGRESS),
    ("no-vip", ErrorKind.INVALID, "vip: required: an EgressVIP name or address",
     lambda: bind(EGRESS, WORKLOADS, "", "shop"), EGRESS),
    ("unbind-unbound", ErrorKind.CONFLICT, "namespace shop is not bound to VIP b (it is bound to VIP a)",
     lambda: unbind(SHARED, "b", "shop"), SHARED),
    ("unbind-service-of-shared", ErrorKind.CONFLICT,
     "service shop/web is not bound to VIP a (it uses the VIP through namespace shop's shared binding: "
     "unbind the namespace)", lambda: unbind(SHARED, "a", "shop", "web"), SHARED),
    ("unbind-unknown-vip", ErrorKind.NOT_FOUND, "no EgressVIP named 'zz'", lambda: unbind(SHARED, "zz", "shop"),
     SHARED),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "message", "call", "before"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_refusal_is_one_line_of_its_kind_and_changes_nothing(
    kind: ErrorKind, message: str, call: Callable[[], EgressGateway], before: EgressGateway
) -> None:
    _refused(kind, message, call, before)


def test_unbinding_a_deleted_namespace_is_allowed() -> None:
    gone = Globalnet(namespaces=[Namespace(name="blog")], services=WORKLOADS.services)
    e = bind(EGRESS, WORKLOADS, "a", "shop")
    assert bind(e, gone, "b", "blog").vip("b") == _vip("b", 11, EgressBinding("blog"))
    assert unbind(e, "a", "shop") == EGRESS


def test_holder_reports_set_and_clear_the_holder_and_move_since_only_on_change() -> None:
    s = EgressVIPStatus(services=("shop/web",))
    s = apply_report(s, HolderReport(vip="a", node="n1", at="t1"))
    assert (s.holder, s.since, s.services) == ("n1", "t1", ("shop/web",))
    assert apply_report(s, HolderReport(vip="a", node="n1", at="t2")) == s  # a repeated MASTER keeps since
    assert apply_report(s, HolderReport(vip="a", node="n2", state=VrrpState.BACKUP, at="t3")) == s  # not holder
    s2 = apply_report(s, HolderReport(vip="a", node="n2", at="t4"))
    assert (s2.holder, s2.since) == ("n2", "t4")
    s3 = apply_report(s2, HolderReport(vip="a", node="n2", state=VrrpState.FAULT, at="t5"))
    assert (s3.holder, s3.since) == ("", "t5")


def test_a_report_from_a_non_candidate_or_for_an_unknown_vip_is_refused() -> None:
    check_report(EGRESS, HolderReport(vip="192.0.2.10", node="n2"))
    with pytest.raises(EgressOpError, match=r"^node n3 is not a candidate of VIP a \(n1, n2\)$"):
        check_report(EGRESS, HolderReport(vip="a", node="n3"))
    with pytest.raises(EgressOpError, match="no EgressVIP named 'q'"):
        check_report(EGRESS, HolderReport(vip="q", node="n1"))


def test_statuses_take_services_from_the_bindings_and_keep_holder_and_since() -> None:
    e = bind(bind(EGRESS, WORKLOADS, "a", "shop"), WORKLOADS, "b", "shop", "web")
    held = EgressVIPStatus(holder="n2", since="t0", services=("stale/x",))
    e = EgressGateway(config=e.config, vips=e.vips, statuses=[("a", held), ("gone", EgressVIPStatus())])
    out, conflicts = statuses(e, WORKLOADS)
    assert out == {
        "a": EgressVIPStatus(holder="n2", since="t0", services=("shop/db",)),
        "b": EgressVIPStatus(services=("shop/web",)),
        "c": EgressVIPStatus(),
    }
    assert conflicts == ()
