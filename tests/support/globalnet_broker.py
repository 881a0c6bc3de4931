"""A file broker directory for the Globalnet controller tests: writing objects as a user would, reading
the controller's results back independently (plain YAML of the status files, not the broker's parser), and
the controller over such a directory with a clock the test sets."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import yaml

from magw.controllers.globalnet.controller import GlobalnetController
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore

CLUSTERS = """\
kind: Cluster
id: east
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
global_cidrs: [{cidr}]
---
kind: Cluster
id: west
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
global_cidrs: [242.2.0.0/16]
"""


def make_broker(directory: Path, cidr: str = "242.1.0.0/24") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "clusters.yaml").write_text(CLUSTERS.format(cidr=cidr))
    return directory


def put(directory: Path, name: str, kind: str, fields: Mapping[str, Any]) -> None:
    """Write a user's document atomically (as users must: temp file + rename)."""
    path = directory / f"user-{name}.yaml"
    tmp = directory / f".user-{name}.tmp"
    tmp.write_text(yaml.safe_dump({"kind": kind, "cluster": "east", **fields}))
    tmp.rename(path)


def remove(directory: Path, name: str) -> None:
    (directory / f"user-{name}.yaml").unlink(missing_ok=True)


def gateway(directory: Path, node: str, last: int, present: bool = True) -> None:
    if not present:
        remove(directory, f"node-{node}")
        return
    put(
        directory,
        f"node-{node}",
        "Node",
        {"name": node, "ip": f"172.18.0.{last}", "cni_ip": f"10.1.{last}.1", "gateway": True},
    )


def statuses(directory: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every status file, read as plain YAML: (kind, namespace, name) -> document."""
    out = {}
    for path in sorted(directory.glob("globalnet-status@*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text())
            obj = doc["object"]
            obj["kind"]
        except (yaml.YAMLError, TypeError, KeyError):
            continue  # a file a test broke on purpose

        out[(obj["kind"], obj.get("namespace", ""), obj["name"])] = doc
    return out


def user_objects(directory: Path) -> set[tuple[str, str, str]]:
    out = set()
    for path in directory.glob("user-*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc["kind"] in ("GlobalEgressIP", "ClusterGlobalEgressIP"):
            out.add((doc["kind"], doc.get("namespace", ""), doc["name"]))
    return out


def made_objects(directory: Path) -> set[tuple[str, str, str]]:
    out = set()
    for pattern in ("globalingressip@*.yaml", "clusterglobalegressip@*.yaml"):
        for path in directory.glob(pattern):
            doc = yaml.safe_load(path.read_text())
            out.add((doc["kind"], doc.get("namespace", ""), doc["name"]))
    return out


def check_files(directory: Path, cidr: str = "242.1.0.0/24") -> dict[IPv4Address, tuple[str, str, str]]:
    """The invariants, read from the files: no address twice, every held address in one live object's status,
    no status of a deleted object, all inside the CIDR. Returns address -> holder."""
    net = IPv4Network(cidr)
    live = user_objects(directory) | made_objects(directory)
    holders: dict[IPv4Address, tuple[str, str, str]] = {}
    for key, doc in statuses(directory).items():
        assert key in live, f"a status of deleted {key}"
        for text in doc.get("allocatedIPs") or ([doc["allocatedIP"]] if doc.get("allocatedIP") else []):
            address = IPv4Address(text)
            assert address not in holders, f"{address} held by {holders[address]} and {key}"
            assert address in net and address not in (net.network_address, net.broadcast_address), address
            holders[address] = key
        allocated = next((c for c in doc.get("conditions", []) if c["type"] == "Allocated"), None)
        assert allocated is not None, f"{key}: no Allocated condition"
        if allocated["status"] == "False":
            assert allocated["reason"], f"{key}: an error without a reason"
    return holders


class Clock:
    """A clock the test sets: ``clock.now`` is what the controller reads."""

    def __init__(self) -> None:
        self.now = 1_763_874_000.0

    def __call__(self) -> float:
        return self.now


def controller(directory: Path, clock: Clock | None = None, grace: float = 300) -> GlobalnetController:
    """The controller of cluster east over the broker ``directory`` (the file broker and the file store)."""
    return GlobalnetController(
        source=FileBroker(directory, local_cluster="east"),
        store=GlobalnetStore(directory, "east"),
        grace=timedelta(seconds=grace),
        clock=clock or Clock(),
    )


def converge(ctl: GlobalnetController, rounds: int = 5) -> None:
    """Reconcile until a round writes and deletes nothing; fail if ``rounds`` are not enough."""
    for _ in range(rounds):
        result = ctl.reconcile()
        if not (result.written or result.deleted):
            return
    raise AssertionError("no fixpoint")
