"""The example snapshots' nodes whose planned nft tables the kernel tests load, and nft's listing of a table in a
form that compares (no handles; chain order free)."""

from __future__ import annotations

import json
from typing import Any

from magw.desired.nft.values import NftTable
from magw.desired.node.planner import plan
from magw.snapshot.load import load_snapshot
from tests.support.paths import EXAMPLES

# (file of examples/, node): workers and gateways of the seed, of three clusters and of a Globalnet snapshot.
CASES = [
    ("seed-east.yaml", "e-w1"),
    ("seed-east.yaml", "e-gw1"),
    ("seed-east.yaml", "e-gw2"),
    ("three-clusters.yaml", "e-w1"),
    ("three-clusters.yaml", "e-gw1"),
    ("three-clusters.yaml", "e-gw2"),
    ("globalnet-snapshot.yaml", "e-w1"),
    ("globalnet-snapshot.yaml", "e-gw1"),
    ("globalnet-snapshot.yaml", "e-gw3"),
    ("client-ip.yaml", "e-gw1"),
    ("client-ip.yaml", "e-w1"),
]


def planned(example: str, node: str) -> NftTable:
    """The planner's nft table for ``node`` of ``examples/<example>``."""
    table = plan(load_snapshot(EXAMPLES / example), node).nft
    assert table is not None
    return table


def without_handles(doc: dict[str, Any]) -> dict[str, Any]:
    """nft's listing without handles: objects as a sorted list, rules in order per chain (chain order is free)."""
    objects: list[str] = []
    rules: dict[str, list[str]] = {}
    for item in doc["nftables"]:
        ((kind, body),) = item.items()
        text = json.dumps({k: v for k, v in body.items() if k != "handle"}, sort_keys=True)
        if kind == "rule":
            rules.setdefault(body["chain"], []).append(text)
        elif kind != "metainfo":
            objects.append(f"{kind} {text}")
    return {"objects": sorted(objects), "rules": rules}
