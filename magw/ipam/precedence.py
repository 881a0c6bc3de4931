"""Which egress global IP a pod uses: the precedence of issue 11, pure.

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
    egress = [_pod_egress(pod, by_namespace.get(pod.namespace, ()), headless, overridden) for pod in globalnet.pods]
    return Precedence(
        # A tuple key, not the attrs ObjectRef: its __lt__ is Python code and was most of a 100k-pod plan (issue 12).
        egress=tuple(sorted(egress, key=lambda e: (e.pod.kind, e.pod.namespace, e.pod.name))),
        overridden={loser: tuple(sorted(pairs)) for loser, pairs in sorted(overridden.items())},
    )


def _pod_egress(
    pod: Pod,
    candidates: Iterable[GlobalEgressIP],
    headless: Mapping[tuple[str, str], ObjectRef],
    overridden: dict[ObjectRef, list[tuple[ObjectRef, ObjectRef]]],
) -> PodEgress:
    ref = ObjectRef(POD, pod.namespace, pod.name)
    if pod.host_network:
        return PodEgress(pod=ref, level=Level.CLUSTER, source=None)
    labels = pod.label_map
    selecting = [c for c in candidates if c.pod_selector is not None and c.pod_selector.matches(labels)]
    namespace_wide = [c for c in candidates if c.pod_selector is None]
    chosen: PodEgress | None = None
    if selecting:
        chosen = PodEgress(pod=ref, level=Level.POD_SELECTOR, source=egress_ref(selecting[0]))
        _record_losers(ref, selecting, overridden)
    elif (pod.namespace, pod.name) in headless:
        chosen = PodEgress(pod=ref, level=Level.HEADLESS_POD, source=headless[(pod.namespace, pod.name)])
    if namespace_wide:
        if chosen is None:
            chosen = PodEgress(pod=ref, level=Level.NAMESPACE, source=egress_ref(namespace_wide[0]))
        _record_losers(ref, namespace_wide, overridden)
    return chosen or PodEgress(pod=ref, level=Level.CLUSTER, source=None)


def _record_losers(
    pod: ObjectRef, same_level: list[GlobalEgressIP], overridden: dict[ObjectRef, list[tuple[ObjectRef, ObjectRef]]]
) -> None:
    """The objects after the first of one level lose ``pod`` to it."""
    winner = egress_ref(same_level[0])
    for loser in same_level[1:]:
        overridden.setdefault(egress_ref(loser), []).append((pod, winner))
