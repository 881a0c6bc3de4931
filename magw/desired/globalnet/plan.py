"""Globalnet on one node: which addresses its datapath translates, from the controller's statuses (pure).

The Globalnet controller (``magw-globalnet``, docs/globalnet.md) decides every address and writes it into statuses;
this module only reads them. For a gateway node it gives:

- ``cluster_egress``: the node's own cluster egress IPs (its ``<node>-cluster-egress.submariner.io``
  block). Many-to-one: the source of every flow that has no more specific address leaves as one of them.
- ``egress``: pod IP -> this gateway's address of the pod's ``GlobalEgressIP`` (precedence levels 1 and 3,
  docs/globalnet.md). Many-to-one and per gateway, like the cluster egress IPs. A pod is pinned to one of the
  object's addresses (the pod IP modulo their count), so its source is the same for every flow.
- ``one_to_one``: local address -> global IP of every ``GlobalIngressIP`` (exported ClusterIP services,
  headless pods, headless endpoint addresses). These belong to no gateway: every gateway holds the same
  two-way mapping and rewrites them statelessly, so a packet or reply is translated the same whichever
  gateway it reaches (docs/globalnet.md, "How replies find their gateway").

A clusterset is Globalnet as a whole or not at all: ``globalnet_mode`` refuses a mixed one.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network

import attrs

from magw.desired.nft.values import SortedPairs
from magw.ipam.globalnet import gateway_egress_name
from magw.ipam.precedence import Level, egress_ref, resolve_egress
from magw.model import Cluster, Snapshot, dotted
from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
    Pod,
    PodPhase,
)


def globalnet_mode(snapshot: Snapshot) -> bool:
    """True when every cluster has a global CIDR, False when none has; ValueError (one line) when mixed."""
    with_global = [c.id for c in snapshot.clusters if c.global_cidrs]
    if not with_global:
        return False
    if len(with_global) == len(snapshot.clusters):
        return True
    without = [c.id for c in snapshot.clusters if not c.global_cidrs]
    raise ValueError(
        f"clusters: a clusterset is Globalnet as a whole or not at all: {', '.join(with_global)} "
        f"{'has' if len(with_global) == 1 else 'have'} global_cidrs, {', '.join(without)} "
        f"{'has' if len(without) == 1 else 'have'} none"
    )


@attrs.frozen(kw_only=True)
class GatewayTranslations:
    """What one gateway translates; pairs are (from, to) as dotted strings, sorted, keys unique. ``egress`` is
    sorted as strings, as ``NftMap`` keeps its elements (a ``SortedPairs``, so the map does not sort it again)."""

    cluster_egress: tuple[IPv4Address, ...] = ()
    egress: tuple[tuple[str, str], ...] = SortedPairs()
    one_to_one: tuple[tuple[str, str], ...] = ()
    # The one-to-one local addresses whose own connections keep their global IP (null SNAT, then the stateless
    # rewrite): all but the headless pods a pod-selector GlobalEgressIP takes (level 1 beats level 2).
    static: tuple[str, ...] = ()


def gateway_block(status: GlobalIPStatus | None, node: str) -> tuple[IPv4Address, ...]:
    if status is None:
        return ()
    return next((block.ips for block in status.gateways if block.node == node), ())


def cluster_egress_ips(globalnet: Globalnet, node: str) -> tuple[IPv4Address, ...]:
    """The addresses of ``node``'s own ClusterGlobalEgressIP, empty until the controller wrote them."""
    ref = ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", gateway_egress_name(node))
    return gateway_block(globalnet.status_of(ref), node)


def published_ips(globalnet: Globalnet, node: str) -> tuple[IPv4Address, ...]:
    """Every many-to-one address gateway ``node`` SNATs to: its cluster egress IPs and its block of every
    GlobalEgressIP. ``magw-gateway`` publishes them (``Endpoint.allocated_ips``); every other gateway routes
    each as a /32 back to it."""
    blocks = [cluster_egress_ips(globalnet, node)]
    blocks += [gateway_block(globalnet.status_of(egress_ref(obj)), node) for obj in globalnet.egress_ips]
    return tuple(sorted({ip for block in blocks for ip in block}))


# Only these levels give a pod an address of a GlobalEgressIP: a headless pod (level 2) is one only when a pod
# selector (level 1) takes it; everything else leaves by the cluster egress IPs.
PAIR_LEVELS = (Level.POD_SELECTOR, Level.NAMESPACE)


def egress_pair(pod: Pod, ips: tuple[str, ...]) -> tuple[str, str] | None:
    """(pod IP, global IP) of a running pod of its own network with an IP, pinned to one of ``ips`` (its egress
    object's addresses on this gateway) by its IP modulo their count, so every flow of it leaves the same way;
    None when it has no such address here. Addresses formatted from ints (``str(IPv4Address)`` is slow)."""
    if not ips or pod.ip is None or pod.host_network or pod.phase is not PodPhase.RUNNING:
        return None
    pod_int = int(pod.ip)
    return dotted(pod_int), ips[pod_int % len(ips)]


def _egress_pairs(globalnet: Globalnet, node: str) -> Iterable[tuple[str, str]]:
    """(pod IP, global IP) for pods at precedence levels 1 and 3 that have addresses here.

    Shaped for speed (docs/performance.md, 100k pods): one status lookup per egress object, not per pod.
    """
    entries = resolve_egress(globalnet, globalnet.ingress_ips).egress
    # Both are sorted by (namespace, name), so entry i is pod i (checked); no dict of 100k pods.
    blocks: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for pod, entry in zip(globalnet.pods, entries, strict=True):
        if (entry.pod.namespace, entry.pod.name) != (pod.namespace, pod.name):
            raise AssertionError(f"precedence out of step with the pods at {pod.namespace}/{pod.name}")
        source = entry.source
        if entry.level not in PAIR_LEVELS or source is None:
            continue
        key = (source.kind, source.namespace, source.name)  # a tuple hashes in C, an attrs ObjectRef does not
        ips = blocks.get(key)
        if ips is None:
            ips = blocks[key] = tuple(str(ip) for ip in gateway_block(globalnet.status_of(source), node))
        pair = egress_pair(pod, ips)
        if pair is not None:
            yield pair


def one_to_one_pairs(globalnet: Globalnet) -> tuple[tuple[str, str], ...]:
    """(local, global) for every GlobalIngressIP with an address and a target; each side used once.

    A clash (two objects naming one local address or one global IP: only possible with bad input, since
    the controller hands out each address once) goes to the first object in reference order.
    """
    out: dict[int, tuple[str, str]] = {}
    used_global: set[int] = set()
    for ing in globalnet.ingress_ips:  # sorted by (namespace, name)
        status = globalnet.status_of(ObjectRef(GLOBAL_INGRESS_IP, ing.namespace, ing.name))
        if status is None or not status.allocated_ips or ing.target_ip is None:
            continue
        local, global_ip = ing.target_ip, status.allocated_ips[0]
        if int(local) in out or int(global_ip) in used_global:
            continue
        out[int(local)] = (str(local), str(global_ip))
        used_global.add(int(global_ip))
    return tuple(out[k] for k in sorted(out))


def routed_cidrs(cluster: Cluster, globalnet: bool) -> tuple[IPv4Network, ...]:
    """What is routed toward a remote cluster: its global CIDRs with Globalnet (its pod and service CIDRs may
    be anyone's), every CIDR without."""
    return cluster.global_cidrs if globalnet else cluster.cidrs


def gateway_translations(snapshot: Snapshot, node: str) -> GatewayTranslations:
    """The translations of gateway ``node`` (empty without Globalnet objects)."""
    gn = snapshot.globalnet
    one_to_one = one_to_one_pairs(gn)
    egress = SortedPairs(sorted(set(_egress_pairs(gn, node))))
    selected = {pod for pod, _ in egress}
    return GatewayTranslations(
        cluster_egress=cluster_egress_ips(gn, node),
        egress=egress,
        one_to_one=one_to_one,
        static=tuple(local for local, _ in one_to_one if local not in selected),
    )
