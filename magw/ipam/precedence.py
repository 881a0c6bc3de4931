"""Which egress global IP a pod uses: the precedence of docs/globalnet.md, pure.

Highest first:

1. ``POD_SELECTOR``: a GlobalEgressIP of the pod's namespace whose ``podSelector`` selects the pod (an
   empty selector ``{}`` selects every pod of the namespace, at this level);
2. ``HEADLESS_POD``: the pod's own GlobalIngressIP (target ``HeadlessServicePod``, an exported headless
   service's backend): the same address for ingress and egress;
3. ``NAMESPACE``: a GlobalEgressIP of the namespace without ``podSelector``;
4. ``CLUSTER``: the cluster egress IPs (of the gateway the flow leaves by).

Host-network pods always use level 4. Objects that cannot take part (a podSelector that did not parse,
``numberOfIPs`` 0 or out of range) select nothing. At one level, when two objects select the same pod,
the one whose (namespace, name) sorts first wins; the loser is reported in ``Precedence.overridden``
(its status then carries the ``Overridden`` condition).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from magw.model.globalnet import (
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    MAX_IPS,
    POD,
    GlobalEgressIP,
    GlobalIngressIP,
    Globalnet,
    ObjectRef,
    Pod,
    TargetType,
)


class Level(enum.IntEnum):
    POD_SELECTOR = 1
    HEADLESS_POD = 2
    NAMESPACE = 3
    CLUSTER = 4


@attrs.frozen
class PodEgress:
    """``source`` None means the cluster egress IPs."""

    pod: ObjectRef
    level: Level
    source: ObjectRef | None


@attrs.frozen
class Precedence:
    """``egress``: one entry per pod, sorted. ``overridden``: loser -> ((pod, winner), ...), sorted."""

    egress: tuple[PodEgress, ...]
    overridden: Mapping[ObjectRef, tuple[tuple[ObjectRef, ObjectRef], ...]]

    def of(self, pod: ObjectRef) -> PodEgress | None:
        for entry in self.egress:
            if entry.pod == pod:
                return entry
        return None


def egress_ref(obj: GlobalEgressIP) -> ObjectRef:
    return ObjectRef(GLOBAL_EGRESS_IP, obj.namespace, obj.name)


def usable(obj: GlobalEgressIP) -> bool:
    """Whether a GlobalEgressIP can give addresses at all (a bad or zero request selects nothing)."""
    return not obj.pod_selector_error and 0 < obj.number_of_ips <= MAX_IPS


def resolve_egress(globalnet: Globalnet, ingress_ips: Iterable[GlobalIngressIP]) -> Precedence:
    """The effective egress source of every pod of ``globalnet`` (see the module docstring)."""
    by_namespace: dict[str, list[GlobalEgressIP]] = {}
    for obj in globalnet.egress_ips:  # sorted by (namespace, name): the first in a list wins its level
        if usable(obj):
            by_namespace.setdefault(obj.namespace, []).append(obj)
    headless: dict[tuple[str, str], ObjectRef] = {}
    for ing in ingress_ips:
        if ing.target is TargetType.HEADLESS_SERVICE_POD:
            key = (ing.target_ref.namespace, ing.target_ref.name)
            headless.setdefault(key, ObjectRef(GLOBAL_INGRESS_IP, ing.namespace, ing.name))
    overridden: dict[ObjectRef, list[tuple[ObjectRef, ObjectRef]]] = {}
    # Shaped for speed (docs/performance.md, 100k pods): a pod's decision depends only on its namespace, labels and
    # host-network flag unless it is a headless backend, so pods alike are decided once.
    decided: dict[tuple[str, tuple[tuple[str, str], ...], bool], _Decision] = {}
    egress = []
    for pod in globalnet.pods:
        ref = ObjectRef(POD, pod.namespace, pod.name)
        own = headless.get((pod.namespace, pod.name))
        if own is not None:
            decision = decide(pod, by_namespace.get(pod.namespace, ()), own)
        else:
            alike = (pod.namespace, pod.labels, pod.host_network)
            found = decided.get(alike)
            if found is None:
                found = decided[alike] = decide(pod, by_namespace.get(pod.namespace, ()), None)
            decision = found
        level, source, losers = decision
        egress.append(PodEgress(pod=ref, level=level, source=source))
        for loser, winner in losers:
            overridden.setdefault(loser, []).append((ref, winner))
    return Precedence(
        # A tuple key, not the attrs ObjectRef: its __lt__ is Python code and was most of a 100k-pod plan.
        egress=tuple(sorted(egress, key=lambda e: (e.pod.kind, e.pod.namespace, e.pod.name))),
        overridden={loser: tuple(sorted(pairs)) for loser, pairs in sorted(overridden.items())},
    )


# (level, source, [(loser, winner)]): what one pod gets, and which objects of its levels lose it to which.
_Decision = tuple[Level, ObjectRef | None, list[tuple[ObjectRef, ObjectRef]]]


def decide(pod: Pod, candidates: Iterable[GlobalEgressIP], own_ingress: ObjectRef | None) -> _Decision:
    """The precedence for one pod; ``own_ingress``: its GlobalIngressIP when it backs an exported headless service."""
    if pod.host_network:
        return (Level.CLUSTER, None, [])
    labels = pod.label_map
    selecting = [c for c in candidates if c.pod_selector is not None and c.pod_selector.matches(labels)]
    namespace_wide = [c for c in candidates if c.pod_selector is None]
    losers: list[tuple[ObjectRef, ObjectRef]] = []
    chosen: tuple[Level, ObjectRef | None] | None = None
    if selecting:
        chosen = (Level.POD_SELECTOR, egress_ref(selecting[0]))
        losers += _losers(selecting)
    elif own_ingress is not None:
        chosen = (Level.HEADLESS_POD, own_ingress)
    if namespace_wide:
        if chosen is None:
            chosen = (Level.NAMESPACE, egress_ref(namespace_wide[0]))
        losers += _losers(namespace_wide)
    level, source = chosen or (Level.CLUSTER, None)
    return (level, source, losers)


def _losers(same_level: list[GlobalEgressIP]) -> list[tuple[ObjectRef, ObjectRef]]:
    """The objects after the first of one level lose to it: (loser, winner) pairs."""
    winner = egress_ref(same_level[0])
    return [(egress_ref(loser), winner) for loser in same_level[1:]]
