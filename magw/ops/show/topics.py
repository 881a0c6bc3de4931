"""The rows of ``magw show endpoints | gateways | networks | globalnet | egressgw | versions``. Pure.

Every cluster's snapshot says what its daemons plan with; a clusterset read from one place (a lab, a broker
directory) has one snapshot per cluster, and what several of them hold (the Endpoints every cluster sees, the
Cluster objects) is shown once, from the cluster it belongs to when that one is at hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from magw.desired.node.roles import active_endpoints
from magw.ipam.pool import host_range
from magw.lab.observe.healthview import cluster_view
from magw.model import Cluster, Endpoint
from magw.model.globalnet import CLUSTER_GLOBAL_EGRESS_IP, GLOBAL_EGRESS_IP, GLOBAL_INGRESS_IP, ObjectRef
from magw.ops.show.inputs import Inputs


def _own_first(inputs: Inputs) -> list[tuple[str, Any]]:
    """(cluster id, snapshot) pairs, each cluster's own snapshot first so its own view of itself wins."""
    return sorted(inputs.snapshots.items())


def endpoints(inputs: Inputs) -> list[dict[str, Any]]:
    """Every published gateway (Endpoint), once, sorted by cluster and hostname."""
    seen: dict[tuple[str, str], Endpoint] = {}
    for cid, snap in _own_first(inputs):
        for e in snap.endpoints:
            if (e.cluster, e.hostname) not in seen or e.cluster == cid:
                seen[(e.cluster, e.hostname)] = e
    return [
        {
            "cluster": e.cluster,
            "hostname": e.hostname,
            "private_ip": str(e.private_ip),
            "public_ip": None if e.public_ip is None else str(e.public_ip),
            "public_port": e.underlay_port,
            "cable": e.backend.value,
            "public_key": e.public_key,
            "subnets": [str(s) for s in e.subnets],
            "global_ips": [str(ip) for ip in e.allocated_ips],
        }
        for _key, e in sorted(seen.items())
    ]


def gateways(inputs: Inputs) -> list[dict[str, Any]]:
    """Every gateway node of every cluster: published or not, active or passive, its health as its own cluster's
    nodes probe it (``no_reach``: the remote clusters its own cluster's nodes' probes say it lost), and how many
    of its own paths are up (from its status, else its Gateway object)."""
    rows = []
    for cid, snap in sorted(inputs.snapshots.items()):
        published = {e.hostname for e in snap.endpoints_of(cid)}
        active = {e.hostname for e in active_endpoints(snap, cid)}
        view = cluster_view(
            ((n.name, inputs.statuses.get(n.name)) for n in snap.nodes),
            snap.health,
            cluster_of={e.hostname: e.cluster for e in snap.endpoints},
            clusters=[c.id for c in snap.clusters],
        )
        for node in snap.nodes:
            if not node.gateway:
                continue
            seen = view.get(node.name, {"state": "unknown", "down_by": []})
            up, total = _paths_up(inputs, node.name)
            cr = inputs.gateway_statuses.get(node.name) or {}
            ha = cr.get("haStatus") or ("active" if node.name in active else "passive")
            rows.append(
                {
                    "cluster": cid,
                    "node": node.name,
                    "private_ip": str(node.ip),
                    "published": node.name in published,
                    "ha_status": ha if node.name in published else None,
                    "health": seen["state"],
                    "down_by": list(seen["down_by"]),
                    "no_reach": sorted(seen.get("no_reach", {})),
                    "paths_up": up,
                    "paths": total,
                }
            )
    return rows


def _paths_up(inputs: Inputs, node: str) -> tuple[int | None, int | None]:
    peers = ((inputs.statuses.get(node) or {}).get("health") or {}).get("peers")
    if peers:
        return sum(1 for p in peers if p.get("state") == "up"), len(peers)
    conns = (inputs.gateway_statuses.get(node) or {}).get("connections")
    if conns is not None:
        return sum(1 for c in conns if c.get("status") == "connected"), len(conns)
    return None, None


def _clusters(inputs: Inputs) -> dict[str, Cluster]:
    out: dict[str, Cluster] = {}
    for cid, snap in _own_first(inputs):
        for c in snap.clusters:
            if c.id not in out or c.id == cid:
                out[c.id] = c
    return dict(sorted(out.items()))


def networks(inputs: Inputs) -> list[dict[str, Any]]:
    """Every cluster's CIDRs, and the settings its own snapshot plans with (None: that cluster's snapshot is not
    at hand, only another cluster's view of its CIDRs)."""
    rows = []
    for cid, c in _clusters(inputs).items():
        snap = inputs.snapshots.get(cid)
        config = None if snap is None else snap.config
        rows.append(
            {
                "cluster": cid,
                "pod_cidrs": [str(n) for n in c.pod_cidrs],
                "service_cidrs": [str(n) for n in c.service_cidrs],
                "global_cidrs": [str(n) for n in c.global_cidrs],
                "cni": None if config is None else config.cni.value,
                "cable": None if config is None else config.cable.value,
                "strategy": None if config is None else config.strategy.value,
                "multi_active": None if config is None else config.multi_active,
            }
        )
    return rows


def _pool_size(cidrs: Iterable[IPv4Network]) -> int:
    return sum(end - start for start, end in (host_range(c) for c in cidrs))


def globalnet(inputs: Inputs) -> list[dict[str, Any]]:
    """Per cluster with global CIDRs: the pool's use and every Globalnet object with its addresses, owner gateways
    and its Allocated condition, as the controller wrote them."""
    rows = []
    for cid, snap in sorted(inputs.snapshots.items()):
        cluster = snap.cluster(cid)
        if not cluster.global_cidrs:
            continue
        gn = snap.globalnet
        refs = [ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", o.name) for o in gn.cluster_egress_ips]
        refs += [ObjectRef(GLOBAL_EGRESS_IP, o.namespace, o.name) for o in gn.egress_ips]
        refs += [ObjectRef(GLOBAL_INGRESS_IP, o.namespace, o.name) for o in gn.ingress_ips]
        held: set[IPv4Address] = set()
        objects = []
        for ref in sorted(refs):
            status = gn.status_of(ref)
            ips = () if status is None else status.allocated_ips
            held.update(ips)
            cond = None if status is None else status.condition("Allocated")
            objects.append(
                {
                    "kind": ref.kind,
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "addresses": [str(ip) for ip in ips],
                    "gateways": {} if status is None else {g.node: [str(ip) for ip in g.ips] for g in status.gateways},
                    "allocated": None if cond is None else f"{cond.status.value} {cond.reason}",
                }
            )
        rows.append(
            {
                "cluster": cid,
                "global_cidrs": [str(n) for n in cluster.global_cidrs],
                "pool_used": len(held),
                "pool_size": _pool_size(cluster.global_cidrs),
                "objects": objects,
            }
        )
    return rows


def egressgw(inputs: Inputs) -> list[dict[str, Any]]:
    """Every egress gateway VIP: its address, candidates, bindings and who holds it since when (its status)."""
    rows = []
    for cid, snap in sorted(inputs.snapshots.items()):
        for vip in snap.egressgw.vips:
            status = snap.egressgw.status_of(vip.name)
            rows.append(
                {
                    "cluster": cid,
                    "name": vip.name,
                    "vip": str(vip.vip),
                    "vrid": vip.vrid,
                    "candidates": list(vip.candidates),
                    "bindings": [str(b) for b in vip.bindings],
                    "holder": None if status is None else (status.holder or None),
                    "since": None if status is None else (status.since or None),
                    "services": [] if status is None else list(status.services),
                }
            )
    return rows


def versions(inputs: Inputs) -> list[dict[str, Any]]:
    return [dict(v) for v in inputs.versions]
