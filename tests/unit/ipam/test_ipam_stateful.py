"""A hypothesis state machine over the pure Globalnet plan: random create, update and delete of every kind,
gateways coming and going, time passing, and "restarts" (the plan keeps no memory: each step starts from
what the broker holds). After every step, converged, these invariants hold:

- no address is held twice; every held address is in exactly one live object's status;
- a deleted object holds nothing; a live object's addresses never change (unless its numberOfIPs did);
- every address is inside the cluster's global CIDR;
- counts are as requested, or the status says Error with a reason.
"""

from __future__ import annotations

from datetime import timedelta
from ipaddress import IPv4Address, IPv4Network

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from magw.ipam.globalnet import gateway_of
from magw.model.globalnet import (
    ClusterGlobalEgressIP,
    GlobalEgressIP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
    Pod,
    Service,
    ServiceExport,
)
from magw.model.selector import LabelSelector
from tests.support.globalnet_helpers import GRACE, T0, check_invariants, converge

CIDRS = (IPv4Network("242.1.0.0/26"),)  # 62 hosts: small enough to run out now and then
NAMES = st.sampled_from(["a", "b", "c"])
NAMESPACES = st.sampled_from(["ns1", "ns2"])
GATEWAYS = ["gw1", "gw2", "gw3"]


class GlobalnetMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.gn = Globalnet()
        self.gateways = ["gw1"]
        self.now = T0
        self.seen: dict[tuple[ObjectRef, str], tuple[tuple[IPv4Address, ...], int]] = {}
        self.step()

    def step(self) -> None:
        self.gn, _ = converge(self.gn, gateways=self.gateways, now=self.now, cidrs=CIDRS)

    def count_of(self, ref: ObjectRef) -> int:
        for o in self.gn.egress_ips:
            if ObjectRef("GlobalEgressIP", o.namespace, o.name) == ref:
                return o.number_of_ips
        for c in self.gn.cluster_egress_ips:
            if c.name == ref.name:
                return c.number_of_ips
        return 1

    @rule(ns=NAMESPACES, name=NAMES, n=st.integers(-1, 4), labelled=st.booleans(), value=st.sampled_from(["x", "y"]))
    def put_egress_ip(self, ns: str, name: str, n: int, labelled: bool, value: str) -> None:
        selector = LabelSelector(match_labels={"app": value}) if labelled else None
        others = [o for o in self.gn.egress_ips if (o.namespace, o.name) != (ns, name)]
        obj = GlobalEgressIP(namespace=ns, name=name, number_of_ips=n, pod_selector=selector)
        self.gn = attrs.evolve(self.gn, egress_ips=[*others, obj])
        self.step()

    @rule(ns=NAMESPACES, name=NAMES)
    def delete_egress_ip(self, ns: str, name: str) -> None:
        self.gn = attrs.evolve(
            self.gn, egress_ips=[o for o in self.gn.egress_ips if (o.namespace, o.name) != (ns, name)]
        )
        self.step()

    @rule(n=st.integers(0, 5))
    def set_template(self, n: int) -> None:
        others = [o for o in self.gn.cluster_egress_ips if o.name != "cluster-egress.submariner.io"]
        tpl = ClusterGlobalEgressIP(name="cluster-egress.submariner.io", number_of_ips=n)
        self.gn = attrs.evolve(self.gn, cluster_egress_ips=[*others, tpl])
        self.step()

    @rule(ns=NAMESPACES, name=NAMES, value=st.sampled_from(["x", "y"]), last=st.integers(2, 9))
    def put_pod(self, ns: str, name: str, value: str, last: int) -> None:
        pod = Pod(namespace=ns, name=f"p{name}", ip=IPv4Address(f"10.0.0.{last}"), labels={"app": value})
        others = [p for p in self.gn.pods if (p.namespace, p.name) != (ns, pod.name)]
        self.gn = attrs.evolve(self.gn, pods=[*others, pod])
        self.step()

    @rule(ns=NAMESPACES, name=NAMES)
    def delete_pod(self, ns: str, name: str) -> None:
        self.gn = attrs.evolve(self.gn, pods=[p for p in self.gn.pods if (p.namespace, p.name) != (ns, f"p{name}")])
        self.step()

    @rule(ns=NAMESPACES, name=NAMES, headless=st.booleans(), exported=st.booleans())
    def put_service(self, ns: str, name: str, headless: bool, exported: bool) -> None:
        svc = Service(
            namespace=ns,
            name=f"s{name}",
            cluster_ip=None if headless else IPv4Address("100.1.0.10"),
            selector={"app": "x"} if headless else None,
        )
        services = [s for s in self.gn.services if (s.namespace, s.name) != (ns, svc.name)]
        exports = [e for e in self.gn.service_exports if (e.namespace, e.name) != (ns, svc.name)]
        if exported:
            exports.append(ServiceExport(namespace=ns, name=svc.name))
        self.gn = attrs.evolve(self.gn, services=[*services, svc], service_exports=exports)
        self.step()

    @rule(gw=st.sampled_from(GATEWAYS))
    def toggle_gateway(self, gw: str) -> None:
        self.gateways = sorted(set(self.gateways) ^ {gw})
        self.step()

    @rule(seconds=st.sampled_from([1, 100, 400]))
    def time_passes(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        self.step()

    @invariant()
    def invariants_hold(self) -> None:
        check_invariants(self.gn, CIDRS)

    @invariant()
    def live_addresses_never_change(self) -> None:
        current: dict[tuple[ObjectRef, str], tuple[tuple[IPv4Address, ...], int]] = {}
        for ref, status in self.gn.statuses:
            for key, ips in _blocks(ref, status):
                current[key] = (ips, self.count_of(ref))
        for key, (ips, count) in current.items():
            old = self.seen.get(key)
            if old is not None and old[1] == count == len(old[0]) and ips:
                assert ips == old[0], f"{key} changed from {old[0]} to {ips}"
        self.seen = current


def _blocks(ref: ObjectRef, status: GlobalIPStatus) -> list[tuple[tuple[ObjectRef, str], tuple[IPv4Address, ...]]]:
    if status.gateways:
        return [((ref, g.node), g.ips) for g in status.gateways]
    if gateway_of(ref.name) is not None:
        return [((ref, ""), status.allocated_ips)]
    return [((ref, ""), status.allocated_ips)]


GlobalnetMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_globalnet_plan_state_machine = GlobalnetMachine.TestCase
assert timedelta(seconds=300) == GRACE
