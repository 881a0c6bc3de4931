"""``magw globalnet show``: every Globalnet object with its addresses, owner gateways and conditions, the
pool's use, and each pod's effective egress source. Read-only: it reads a broker directory or a snapshot
file and prints what the statuses hold (what the controller wrote), not what it would write next.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs

from magw.cli import UsageError
from magw.ipam.pool import host_range
from magw.ipam.precedence import Level, resolve_egress
from magw.model import Snapshot
from magw.model.globalnet import (
    CLUSTER_GLOBAL_EGRESS_IP,
    GLOBAL_EGRESS_IP,
    GLOBAL_INGRESS_IP,
    GlobalIPStatus,
    Globalnet,
    ObjectRef,
)
from magw.snapshot.dump import object_to_doc, status_to_doc
from magw.snapshot.load import load_snapshot

_LEVEL_TEXT = {
    Level.POD_SELECTOR: "pod selector",
    Level.HEADLESS_POD: "headless pod",
    Level.NAMESPACE: "namespace",
    Level.CLUSTER: "cluster",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print every Globalnet object, its addresses and conditions, and the pool")
    source = show.add_mutually_exclusive_group(required=True)
    source.add_argument("--broker-dir", metavar="DIR", help="a file broker directory (with --cluster)")
    source.add_argument("--snapshot", metavar="FILE", help="a snapshot file (its local cluster)")
    show.add_argument("--cluster", metavar="ID", help="the cluster to show (required with --broker-dir)")
    show.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    snapshot = _read(args)
    report = build_report(snapshot)
    sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n" if args.json else render_text(report))
    return 0


def _read(args: argparse.Namespace) -> Snapshot:
    if args.snapshot is not None:
        if args.cluster is not None:
            raise UsageError("globalnet show: --cluster goes with --broker-dir (a snapshot names its local cluster)")
        return load_snapshot(args.snapshot)
    if args.cluster is None:
        raise UsageError("globalnet show: --broker-dir needs --cluster ID")
    from magw.cli.brokerdir import open_broker  # lazy: only this input needs the broker

    broker = open_broker(args.broker_dir, args.cluster)
    if broker.snapshot is None:
        raise RuntimeError(f"{args.broker_dir}: no usable Cluster document for {args.cluster!r}")
    return broker.snapshot


def _pool_size(cidrs: Iterable[IPv4Network]) -> int:
    return sum(end - start for start, end in (host_range(c) for c in cidrs))


def build_report(snapshot: Snapshot) -> dict[str, Any]:
    cluster = snapshot.cluster(snapshot.local_cluster)
    gn = snapshot.globalnet
    held: set[IPv4Address] = set()
    objects = []
    for ref, spec in _objects(gn):
        status = gn.status_of(ref)
        if status is not None:
            held.update(status.allocated_ips)
        objects.append(_object_entry(ref, spec, status))
    precedence = resolve_egress(_as_allocated(gn), gn.ingress_ips)
    pods = [
        {
            "pod": f"{e.pod.namespace}/{e.pod.name}",
            "level": int(e.level),
            "levelName": _LEVEL_TEXT[e.level],
            "source": str(e.source) if e.source is not None else "cluster egress IPs",
        }
        for e in precedence.egress
    ]
    return {
        "cluster": cluster.id,
        "globalCIDRs": [str(c) for c in cluster.global_cidrs],
        "pool": {"used": len(held), "size": _pool_size(cluster.global_cidrs)},
        "objects": objects,
        "pods": pods,
    }


def _as_allocated(gn: Globalnet) -> Globalnet:
    """The GlobalEgressIPs with the selector their addresses were allocated for (a changed selector is refused
    by the controller and does not take effect)."""
    egress = []
    for obj in gn.egress_ips:
        status = gn.status_of(ObjectRef(GLOBAL_EGRESS_IP, obj.namespace, obj.name))
        if status is not None and status.allocated_ips:
            obj = attrs.evolve(obj, pod_selector=status.pod_selector, pod_selector_error="")
        egress.append(obj)
    return attrs.evolve(gn, egress_ips=egress)


def _objects(gn: Globalnet) -> list[tuple[ObjectRef, dict[str, Any]]]:
    out = [(ObjectRef(CLUSTER_GLOBAL_EGRESS_IP, "", o.name), object_to_doc(o)) for o in gn.cluster_egress_ips]
    out += [(ObjectRef(GLOBAL_EGRESS_IP, o.namespace, o.name), object_to_doc(o)) for o in gn.egress_ips]
    out += [(ObjectRef(GLOBAL_INGRESS_IP, o.namespace, o.name), object_to_doc(o)) for o in gn.ingress_ips]
    return sorted(out, key=lambda p: p[0])


def _object_entry(ref: ObjectRef, spec: dict[str, Any], status: GlobalIPStatus | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name, "spec": spec}
    if status is None:
        entry["status"] = None
    else:
        doc = status_to_doc(ref, status)
        doc.pop("object")
        entry["status"] = doc
    return entry


def _ranges(addresses: Iterable[str]) -> str:
    """``242.1.0.1-242.1.0.8, 242.1.0.12``: runs of consecutive addresses."""
    ints = sorted(int(IPv4Address(a)) for a in addresses)
    parts: list[str] = []
    i = 0
    while i < len(ints):
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        first, last = IPv4Address(ints[i]), IPv4Address(ints[j])
        parts.append(str(first) if i == j else f"{first}-{last}")
        i = j + 1
    return ", ".join(parts) or "-"


def render_text(report: dict[str, Any]) -> str:
    pool = report["pool"]
    lines = [
        f"cluster {report['cluster']}: global CIDRs {', '.join(report['globalCIDRs']) or '-'}; "
        f"pool {pool['used']}/{pool['size']} addresses held",
        "",
    ]
    for obj in report["objects"]:
        name = f"{obj['namespace']}/{obj['name']}" if obj["namespace"] else obj["name"]
        status = obj["status"]
        if status is None:
            lines.append(f"{obj['kind']} {name}: no status yet")
            continue
        addresses = status.get("allocatedIPs") or ([status["allocatedIP"]] if status.get("allocatedIP") else [])
        lines.append(f"{obj['kind']} {name}: {_ranges(addresses)}")
        for block in status.get("gateways", []):
            gone = f" (gateway gone since {block['goneSince']})" if block.get("goneSince") else ""
            lines.append(f"    gateway {block['node']}: {_ranges(block['allocatedIPs'])}{gone}")
        for cond in status["conditions"]:
            message = f": {cond['message']}" if cond["message"] else ""
            lines.append(f"    {cond['type']}={cond['status']} {cond['reason']}{message}")
    lines += ["", "pod egress (highest precedence that applies):"]
    for pod in report["pods"]:
        lines.append(f"    {pod['pod']}: {pod['levelName']} ({pod['level']}), {pod['source']}")
    if not report["pods"]:
        lines.append("    (no pods)")
    return "\n".join(lines) + "\n"
