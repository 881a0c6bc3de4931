"""The independent reader's view of a planned SNAT range is what nft prints back (kernel tests).

``tests/support/kernel_dump.planned`` puts a plan's address ranges in the shape ``nft -j`` lists them: nft shows a
range that is exactly a prefix as the prefix (the Globalnet cluster egress range 242.1.0.4-242.1.0.5 comes back as
242.1.0.4/31, which made the kube soak's convergence check report a rule missing and another extra). Here real
rules with such ranges are loaded and read back with the nft command, and compared with the reader's form.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.support.kernel_dump import _nft_objects, planned
from tests.support.netns import nft_json

pytestmark = pytest.mark.kernel

RANGES = [("242.1.0.4", "242.1.0.5"), ("242.1.0.4", "242.1.0.7"), ("242.1.0.4", "242.1.0.6"),
          ("242.1.0.3", "242.1.0.4"), ("242.1.0.0", "242.1.0.255")]  # fmt: skip


def _rule(i: int, lo: str, hi: str) -> dict[str, Any]:
    expr = [{"match": {"left": {"meta": {"key": "mark"}}, "op": "==", "right": i + 1}},
            {"snat": {"addr": {"range": [lo, hi]}}}]  # fmt: skip
    return {"rule": {"family": "ip", "table": "t", "chain": "post", "comment": f"r{i}", "expr": expr}}


def test_planned_ranges_read_back_as_nft_prints_them(ns: str) -> None:
    table = {"table": {"family": "ip", "name": "t"}}
    chain = {"chain": {"family": "ip", "table": "t", "name": "post", "type": "nat", "hook": "postrouting",
                       "prio": 100, "policy": "accept"}}  # fmt: skip
    rules = [_rule(i, lo, hi) for i, (lo, hi) in enumerate(RANGES)]
    doc = {"nftables": [{"add": table}, {"add": chain}, *({"add": r} for r in rules)]}
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "-f", "-"], input=json.dumps(doc), text=True,
                   check=True, timeout=30)  # fmt: skip
    kernel = [o for o in nft_json(ns, "list", "table", "ip", "t")["nftables"] if "rule" in o]
    got = sorted(text for o in kernel for text in _nft_objects(o))
    plan = {"links": [], "addresses": [], "neighbors": [], "fdb": [], "nexthops": [], "groups": [], "routes": [],
            "rules": [], "nft": {"nftables": rules}}  # fmt: skip
    assert got == planned(plan)["nft"]
    # and the printing really differs for the prefix-shaped ones (else the reader's rewrite would be moot)
    printed = {o["rule"]["comment"]: o["rule"]["expr"][1]["snat"]["addr"] for o in kernel}
    assert printed["r0"] == {"prefix": {"addr": "242.1.0.4", "len": 31}}
    assert printed["r2"] == {"range": ["242.1.0.4", "242.1.0.6"]}
