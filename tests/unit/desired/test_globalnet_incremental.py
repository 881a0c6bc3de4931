"""The incremental Globalnet planner (magw.desired.globalnet.incremental) against the full one.

Random sequences of changes (pods added, changed, removed or rebuilt as equal copies; GlobalEgressIPs with and
without selectors, unusable ones; their statuses; headless backends' GlobalIngressIPs) go through one
``IncrementalTranslations``; after every step its translations must equal ``gateway_translations`` on the same
input, which decides every pod from scratch. Then the same through ``plan`` with a memo, against ``plan``
without one, and a check that the work is what changed (the planner does not decide unchanged pods again).
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magw.desired.globalnet import incremental
from magw.desired.globalnet.incremental import IncrementalTranslations
from magw.desired.globalnet.plan import gateway_translations
from magw.desired.node.memo import PlanMemo
from magw.desired.node.planner import plan
from magw.model import Snapshot
from magw.model.globalnet import (
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    POD,
    GatewayAddresses,
    GlobalEgressIP,
    GlobalIngressIP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
    Pod,
    PodPhase,
    TargetType,
)
from magw.model.selector import LabelSelector
from magw.snapshot.load import load_snapshot
from tests.support.paths import EXAMPLES

NODE = "e-gw1"
NAMESPACES = ("a", "b", "c")
LABELS = (("app", "x"), ("app", "y"), ("tier", "t"))
SELECTORS = (
    None,
    LabelSelector(),
    LabelSelector(match_labels=(("app", "x"),)),
    LabelSelector(match_labels=(("tier", "t"),)),
)


@pytest.fixture(scope="module")
def base() -> Snapshot:
    return load_snapshot(EXAMPLES / "globalnet-snapshot.yaml")


def _ip(i: int) -> IPv4Address:
    return IPv4Address(f"10.0.9.{i}")


def _gip(i: int) -> IPv4Address:
    return IPv4Address(f"242.0.9.{i}")


pods = st.builds(
    lambda ns, name, ip, labels, running, host: Pod(
        namespace=ns,
        name=f"p{name}",
        ip=None if ip is None else _ip(ip),
        labels=tuple(sorted(labels)),
        phase=PodPhase.RUNNING if running else PodPhase.PENDING,
        host_network=host,
    ),
    st.sampled_from(NAMESPACES),
    st.integers(0, 7),
    st.one_of(st.none(), st.integers(1, 9)),
    st.sets(st.sampled_from(LABELS), max_size=2),
    st.booleans(),
    st.sampled_from((False, False, False, True)),  # host network now and then
)
egress_objects = st.builds(
    lambda ns, name, selector, n, error: GlobalEgressIP(
        namespace=ns, name=f"e{name}", number_of_ips=n, pod_selector=selector, pod_selector_error="bad" if error else ""
    ),
    st.sampled_from(NAMESPACES),
    st.integers(0, 2),
    st.sampled_from(SELECTORS),
    st.integers(0, 2),
    st.sampled_from((False, False, False, True)),  # a selector that did not parse now and then
)
steps = st.one_of(
    st.tuples(st.just("pod"), pods),
    st.tuples(st.just("unpod"), st.integers(0, 30)),
    st.tuples(st.just("rebuild"), st.none()),
    st.tuples(st.just("egress"), egress_objects),
    st.tuples(st.just("unegress"), st.integers(0, 10)),
    st.tuples(
        st.just("status"),
        st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 2), st.sets(st.integers(1, 6), max_size=3)),
    ),
    st.tuples(st.just("headless"), st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 7), st.integers(1, 9))),
    st.tuples(st.just("unheadless"), st.integers(0, 10)),
)


def _apply(gn: Globalnet, step: tuple[str, Any]) -> Globalnet:
    """``gn`` after one step; unchanged pods stay the very objects, as a source hands them over."""
    kind, arg = step
    if kind == "pod":
        others = tuple(p for p in gn.pods if (p.namespace, p.name) != (arg.namespace, arg.name))
        return attrs.evolve(gn, pods=(*others, arg))
    if kind == "unpod" and gn.pods:
        i = arg % len(gn.pods)
        return attrs.evolve(gn, pods=gn.pods[:i] + gn.pods[i + 1 :])
    if kind == "rebuild":  # a file broker parses every pod again: equal objects, none the same
        return attrs.evolve(gn, pods=tuple(attrs.evolve(p) for p in gn.pods))
    if kind == "egress":
        others = tuple(e for e in gn.egress_ips if (e.namespace, e.name) != (arg.namespace, arg.name))
        return attrs.evolve(gn, egress_ips=(*others, arg))
    if kind == "unegress" and gn.egress_ips:
        i = arg % len(gn.egress_ips)
        return attrs.evolve(gn, egress_ips=gn.egress_ips[:i] + gn.egress_ips[i + 1 :])
    if kind == "status":
        ns, name, ips = arg
        ref = ObjectRef(GLOBAL_EGRESS_IP, ns, f"e{name}")
        mine = tuple(_gip(i) for i in sorted(ips))
        status = GlobalIPStatus(
            allocated_ips=(*mine, _gip(50)),
            gateways=(GatewayAddresses(node=NODE, ips=mine), GatewayAddresses(node="e-gw2", ips=(_gip(50),))),
        )
        statuses = {**dict(gn.statuses), ref: status}
        return attrs.evolve(gn, statuses=statuses)
    if kind == "headless":
        ns, pod, gip = arg
        ing = GlobalIngressIP(
            namespace=ns,
            name=f"pod-p{pod}",
            target=TargetType.HEADLESS_SERVICE_POD,
            service_name="db",
            target_ref=ObjectRef(POD, ns, f"p{pod}"),
            target_ip=_ip(pod),
        )
        ref = ObjectRef(GLOBAL_INGRESS_IP, ns, ing.name)
        statuses = {**dict(gn.statuses), ref: GlobalIPStatus(allocated_ips=(_gip(100 + gip),))}
        others = tuple(i for i in gn.ingress_ips if (i.namespace, i.name) != (ns, ing.name))
        return attrs.evolve(gn, ingress_ips=(*others, ing), statuses=statuses)
    if kind == "unheadless" and gn.ingress_ips:
        i = arg % len(gn.ingress_ips)
        return attrs.evolve(gn, ingress_ips=gn.ingress_ips[:i] + gn.ingress_ips[i + 1 :])
    return gn


@settings(max_examples=300, deadline=None)
@given(st.lists(steps, min_size=1, max_size=25), st.sampled_from((0, 2, 10**9)))
def test_the_incremental_translations_equal_the_full_ones_after_every_step(
    base: Snapshot, sequence: list[tuple[str, Any]], bulk: int
) -> None:
    """``bulk`` 0: the pairs sorted again as a whole after every change; 10**9: always one by one."""
    inc = IncrementalTranslations(NODE, bulk=bulk)
    gn = base.globalnet
    for step in sequence:
        gn = _apply(gn, step)
        assert inc.update(gn) == gateway_translations(attrs.evolve(base, globalnet=gn), NODE), step


@settings(max_examples=60, deadline=None)
@given(st.lists(steps, min_size=1, max_size=12))
def test_a_plan_with_a_memo_equals_a_plan_without(base: Snapshot, sequence: list[tuple[str, Any]]) -> None:
    memo = PlanMemo()
    gn = base.globalnet
    for step in sequence:
        gn = _apply(gn, step)
        snapshot = attrs.evolve(base, globalnet=gn)
        assert plan(snapshot, NODE, memo=memo).nft == plan(snapshot, NODE).nft, step


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pods ``decide`` is asked about, by name."""
    asked: list[str] = []
    real: Callable[..., Any] = incremental.decide

    def counted(pod: Pod, *args: Any) -> Any:
        asked.append(pod.name)
        return real(pod, *args)

    monkeypatch.setattr(incremental, "decide", counted)
    return asked


def _store(base: Snapshot, n: int) -> Globalnet:
    """``n`` pods in namespace ``store`` with distinct labels (so none decide alike), a namespace GlobalEgressIP."""
    egress = GlobalEgressIP(namespace="store", name="all", number_of_ips=2)
    ref = ObjectRef(GLOBAL_EGRESS_IP, "store", "all")
    mine = (_gip(1), _gip(2))
    status = GlobalIPStatus(allocated_ips=mine, gateways=(GatewayAddresses(node=NODE, ips=mine),))
    pods_ = tuple(
        Pod(namespace="store", name=f"p{i:04}", ip=IPv4Address(0x0A010000 + i), labels=(("n", str(i)),))
        for i in range(n)
    )
    gn = base.globalnet
    statuses = {**dict(gn.statuses), ref: status}
    return attrs.evolve(gn, pods=(*gn.pods, *pods_), egress_ips=(*gn.egress_ips, egress), statuses=statuses)


def test_a_pod_event_decides_only_that_pod(base: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    gn = _store(base, 2000)
    inc = IncrementalTranslations(NODE)
    first = inc.update(gn)
    assert len(first.egress) >= 2000
    asked = _counting(monkeypatch)
    new = Pod(namespace="store", name="p0500x", ip=IPv4Address("10.1.99.1"), labels=(("n", "new"),))
    gn2 = attrs.evolve(gn, pods=(*gn.pods, new))
    after = inc.update(gn2)
    assert asked == ["p0500x"]
    assert ("10.1.99.1", "242.0.9.1") in after.egress or ("10.1.99.1", "242.0.9.2") in after.egress
    asked.clear()
    gn3 = attrs.evolve(gn2, pods=tuple(p for p in gn2.pods if p.name != "p0007"))
    assert inc.update(gn3) == gateway_translations(attrs.evolve(base, globalnet=gn3), NODE)
    assert asked == []  # a removal decides nothing: its pair leaves


def test_a_selector_change_decides_again_only_its_namespace(base: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    gn = _store(base, 300)
    inc = IncrementalTranslations(NODE)
    inc.update(gn)
    asked = _counting(monkeypatch)
    selector = LabelSelector(match_labels=(("n", "3"),))
    narrowed = GlobalEgressIP(namespace="store", name="all", number_of_ips=2, pod_selector=selector)
    gn2 = attrs.evolve(gn, egress_ips=tuple(narrowed if e.namespace == "store" else e for e in gn.egress_ips))
    assert inc.update(gn2) == gateway_translations(attrs.evolve(base, globalnet=gn2), NODE)
    assert sorted(asked) == sorted(p.name for p in gn2.pods if p.namespace == "store")


def test_an_update_that_raises_leaves_nothing_half_done(base: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug or bad input that raises in the middle of an update: the next update starts from scratch and is right."""
    gn = _store(base, 50)
    inc = IncrementalTranslations(NODE)
    inc.update(gn)
    gn2 = attrs.evolve(gn, pods=tuple(p for p in gn.pods if p.name != "p0003"))
    real: Callable[..., Any] = incremental.decide
    calls = {"n": 0}

    def failing(pod: Pod, *args: Any) -> Any:
        calls["n"] += 1
        raise RuntimeError("boom")

    monkeypatch.setattr(incremental, "decide", failing)
    selector = LabelSelector(match_labels=(("n", "3"),))
    objects = tuple(attrs.evolve(e, pod_selector=selector) if e.namespace == "store" else e for e in gn2.egress_ips)
    with pytest.raises(RuntimeError):
        inc.update(attrs.evolve(gn2, egress_ips=objects))  # store's pods are decided again, and that raises
    assert calls["n"] == 1
    monkeypatch.setattr(incremental, "decide", real)
    assert inc.update(gn2) == gateway_translations(attrs.evolve(base, globalnet=gn2), NODE)
