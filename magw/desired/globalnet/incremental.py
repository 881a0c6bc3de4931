"""A Globalnet gateway's translations kept up to date in O(what changed) (pure; docs/performance.md, row 22b).

``gateway_translations`` (plan.py) passes over every pod: about a second at 100k pods. A gateway daemon plans the
same node again and again, and between two plans usually one pod, one namespace's GlobalEgressIPs or a few
statuses change. ``IncrementalTranslations`` keeps what it decided for each pod and decides again only for:

- the pods that differ from the last tuple (added, removed or changed: ``magw.util.sorteddiff``, which compares
  unchanged runs of pods as tuples in C);
- every pod of a namespace whose *egress context* changed: its usable GlobalEgressIPs in order, and each one's
  addresses for this gateway (a selector, a new object, a status);
- the pods whose own GlobalIngressIP (an exported headless service's backend, precedence level 2) came or went.

The one-to-one pairs come from the GlobalIngressIPs (one per exported service or headless backend, not per pod)
and are computed again only when those objects or the statuses are not the very tuples of the last update.

The result equals ``gateway_translations``'s for the same input, whatever came before
(``tests/unit/desired/test_globalnet_incremental.py`` checks it on random sequences of changes).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable

import attrs

from magw.desired.globalnet.plan import (
    PAIR_LEVELS,
    GatewayTranslations,
    cluster_egress_ips,
    egress_pair,
    gateway_block,
    one_to_one_pairs,
)
from magw.desired.nft.values import SortedPairs
from magw.ipam.precedence import Level, decide, egress_ref, usable
from magw.model.globalnet import (
    GLOBAL_INGRESS_IP,
    GlobalEgressIP,
    Globalnet,
    ObjectRef,
    Pod,
    PodPhase,
    TargetType,
)
from magw.util.sorteddiff import sorted_changes

PodKey = tuple[str, str]
Pair = tuple[str, str]
# What decides a pod's egress besides the pod: its namespace's usable GlobalEgressIPs in order, and their
# addresses on this gateway (as strings, in the same order).
Context = tuple[tuple[GlobalEgressIP, ...], tuple[tuple[str, ...], ...]]
_NO_CONTEXT: Context = ((), ())
# ``decide`` needs only whether a pod has its own GlobalIngressIP: level 2 never yields a pair.
_OWN = ObjectRef(GLOBAL_INGRESS_IP, "", "")


def _pod_key(pod: Pod) -> PodKey:
    return (pod.namespace, pod.name)


@attrs.define
class _Namespace:
    context: Context
    blocks: dict[ObjectRef, tuple[str, ...]]


class IncrementalTranslations:
    """The translations of gateway ``node``, updated from each new ``Globalnet`` by what changed in it."""

    def __init__(self, node: str, *, bulk: int = 64) -> None:
        """``bulk``: from how many arriving or departing pairs on (and 1/64 of them all) the pairs are sorted
        again as a whole instead of one by one (the tests try both ways)."""
        self.node = node
        self._bulk = bulk
        self._reset()

    def _reset(self) -> None:
        """Forget everything: the next update decides every pod."""
        self._pods: tuple[Pod, ...] = ()
        # Per pod key, each pod of that key (one, but for bad input) with the pair it gives (or None).
        self._decided: dict[PodKey, list[tuple[Pod, Pair | None]]] = {}
        self._ns_keys: dict[str, set[PodKey]] = {}
        self._namespaces: dict[str, _Namespace] = {}
        self._headless: frozenset[PodKey] = frozenset()
        self._pair_count: Counter[Pair] = Counter()
        self._pod_count: Counter[str] = Counter()
        self._sorted: list[Pair] = []  # the distinct pairs, sorted as strings (NftMap's order)
        self._entered: list[Pair] = []  # this update's pairs whose count rose to 1 ...
        self._left: list[Pair] = []  # ... and fell to 0 (``_sort`` takes them)
        self._one_to_one_from: tuple[object, object] | None = None
        self._one_to_one: tuple[Pair, ...] = ()

    def update(self, gn: Globalnet) -> GatewayTranslations:
        """The translations for ``gn``; the work is the changes since the last call (everything, the first time).
        If it raises, everything is forgotten: the next call starts from scratch rather than from half an update."""
        try:
            return self._update(gn)
        except BaseException:
            self._reset()
            raise

    def _update(self, gn: Globalnet) -> GatewayTranslations:
        namespaces = self._contexts(gn)
        headless = frozenset(
            (ing.target_ref.namespace, ing.target_ref.name)
            for ing in gn.ingress_ips
            if ing.target is TargetType.HEADLESS_SERVICE_POD
        )
        gone, fresh = _changes(self._pods, gn.pods)
        for pod in gone:
            self._forget(pod)
        redo: set[PodKey] = set()
        for ns in namespaces.keys() | self._namespaces.keys():
            old, new = self._namespaces.get(ns), namespaces.get(ns)
            if (old.context if old else _NO_CONTEXT) != (new.context if new else _NO_CONTEXT):
                redo |= self._ns_keys.get(ns, set())
        redo |= headless ^ self._headless
        self._namespaces, self._headless, self._pods = namespaces, headless, gn.pods
        decisions: dict[tuple[object, ...], tuple[Level, ObjectRef | None]] = {}
        for key in redo:
            for pod, _ in list(self._decided.get(key, ())):
                self._forget(pod)
                self._learn(pod, decisions)
        for pod in fresh:
            self._learn(pod, decisions)
        return GatewayTranslations(
            cluster_egress=cluster_egress_ips(gn, self.node),
            egress=SortedPairs(self._sort()),
            one_to_one=(one_to_one := self._one_to_one_of(gn)),
            static=tuple(local for local, _ in one_to_one if local not in self._pod_count),
        )

    def _contexts(self, gn: Globalnet) -> dict[str, _Namespace]:
        """Each namespace's egress context; O(GlobalEgressIPs)."""
        objects: dict[str, list[GlobalEgressIP]] = {}
        for obj in gn.egress_ips:  # sorted by (namespace, name): the first of a level wins it
            if usable(obj):
                objects.setdefault(obj.namespace, []).append(obj)
        out: dict[str, _Namespace] = {}
        for ns, objs in objects.items():
            refs = [egress_ref(obj) for obj in objs]
            blocks = tuple(tuple(str(ip) for ip in gateway_block(gn.status_of(ref), self.node)) for ref in refs)
            out[ns] = _Namespace(context=(tuple(objs), blocks), blocks=dict(zip(refs, blocks, strict=True)))
        return out

    def _one_to_one_of(self, gn: Globalnet) -> tuple[Pair, ...]:
        source = (gn.ingress_ips, gn.statuses)
        last = self._one_to_one_from
        if last is None or last[0] is not source[0] or last[1] is not source[1]:
            self._one_to_one, self._one_to_one_from = one_to_one_pairs(gn), source
        return self._one_to_one

    def _pair(self, pod: Pod, decisions: dict[tuple[object, ...], tuple[Level, ObjectRef | None]]) -> Pair | None:
        """The pod's (pod IP, global IP) on this gateway, None when it leaves by the cluster egress IPs."""
        if pod.ip is None or pod.host_network or pod.phase is not PodPhase.RUNNING:
            return None
        ns = self._namespaces.get(pod.namespace)
        if ns is None:
            return None
        own = _pod_key(pod) in self._headless
        # Pods alike (namespace, labels, headless or not) decide alike: a namespace's 100k pods decide once.
        alike = (pod.namespace, pod.labels, own)
        found = decisions.get(alike)
        if found is None:
            level, source, _losers = decide(pod, ns.context[0], _OWN if own else None)
            found = decisions[alike] = (level, source)
        level, source = found
        if level not in PAIR_LEVELS or source is None:
            return None
        return egress_pair(pod, ns.blocks.get(source, ()))

    def _learn(self, pod: Pod, decisions: dict[tuple[object, ...], tuple[Level, ObjectRef | None]]) -> None:
        pair = self._pair(pod, decisions)
        key = _pod_key(pod)
        self._decided.setdefault(key, []).append((pod, pair))
        self._ns_keys.setdefault(pod.namespace, set()).add(key)
        if pair is not None:
            self._count(pair, +1)

    def _forget(self, pod: Pod) -> None:
        key = _pod_key(pod)
        entries = self._decided.get(key, [])
        index = next((i for i, (known, _) in enumerate(entries) if known == pod), None)
        if index is None:
            raise AssertionError(f"globalnet: pod {pod.namespace}/{pod.name} forgotten but never learnt")
        _, pair = entries.pop(index)
        if not entries:
            del self._decided[key]
            keys = self._ns_keys[pod.namespace]
            keys.discard(key)
            if not keys:
                del self._ns_keys[pod.namespace]
        if pair is not None:
            self._count(pair, -1)

    def _count(self, pair: Pair, step: int) -> None:
        count = self._pair_count[pair] + step
        self._pod_count[pair[0]] += step
        if not self._pod_count[pair[0]]:
            del self._pod_count[pair[0]]
        if count:
            self._pair_count[pair] = count
        else:
            del self._pair_count[pair]
        if count == 1 and step > 0:
            self._entered.append(pair)
        elif count == 0:
            self._left.append(pair)

    def _sort(self) -> list[Pair]:
        """The distinct pairs in order, after this update's arrivals and departures.

        Shaped for speed: a few changes go in by bisection (a memmove each); many (the first update: 100k
        insertions at random places would be quadratic, 18 s) sort the whole again, once."""
        entered, left, self._entered, self._left = self._entered, self._left, [], []
        if len(entered) + len(left) > max(self._bulk, len(self._sorted) // 64):
            self._sorted = sorted(self._pair_count)
            return self._sorted
        for pair in left:
            if pair not in self._pair_count:  # it may have come back in the same update
                i = bisect.bisect_left(self._sorted, pair)
                if i < len(self._sorted) and self._sorted[i] == pair:
                    del self._sorted[i]
        for pair in entered:
            i = bisect.bisect_left(self._sorted, pair)
            if pair in self._pair_count and (i == len(self._sorted) or self._sorted[i] != pair):
                self._sorted.insert(i, pair)
        return self._sorted


def _changes(old: tuple[Pod, ...], new: tuple[Pod, ...]) -> tuple[Iterable[Pod], Iterable[Pod]]:
    if old is new:
        return (), ()
    return sorted_changes(old, new, _pod_key)
