"""Fixture documents for ``magw show`` and ``magw top``: route agent status files and kernel dumps as the route
agent writes them (``magw.health.view.status_document`` plus ``transitions``) and as ``ip -j`` prints them."""

from __future__ import annotations

from typing import Any

# east-gw1 (VTEP 241.18.0.6) probes west's two gateways; its resilient group 900 has 128 buckets: 96 to
# west-gw1's nexthop 901, 32 to west-gw2's 902 (west-gw2 came back and has not got its buckets back yet).
GW_STATUS: dict[str, Any] = {
    "node": "east-gw1",
    "cluster": "east",
    "health": {
        "mode": "gateway",
        "peers": [
            {
                "hostname": "west-gw2",
                "cluster": "west",
                "address": "241.19.0.9",
                "state": "up",
                "rtt": {"last": 0.0004, "min": 0.0001, "average": 0.0005, "max": 0.0021, "stdDev": 0.0002},
                "since": "2026-11-28T20:00:05.000+00:00",
            },
            {
                "hostname": "west-gw1",
                "cluster": "west",
                "address": "241.19.0.4",
                "state": "up",
                "rtt": {"last": 0.0003, "min": 0.0001, "average": 0.00025, "max": 0.0013, "stdDev": 0.0001},
                "since": "2026-11-28T19:58:00.000+00:00",
            },
        ],
        "down": [],
        "leases": [1],
        "transitions": [
            {"at": "2026-11-28T19:58:00.000+00:00", "peer": "west-gw1", "cluster": "west", "address": "241.19.0.4",
             "what": "alive", "old": "unknown", "new": "up"},
            {"at": "2026-11-28T19:59:50.000+00:00", "peer": "west-gw2", "cluster": "west", "address": "241.19.0.9",
             "what": "alive", "old": "up", "new": "down", "detection_seconds": 0.0712},
            {"at": "2026-11-28T20:00:05.000+00:00", "peer": "west-gw2", "cluster": "west", "address": "241.19.0.9",
             "what": "alive", "old": "down", "new": "up"},
        ],
    },
}  # fmt: skip

NEXTHOPS: list[dict[str, Any]] = [
    {"id": 901, "gateway": "241.19.0.4", "dev": "vxlan-tunnel", "scope": "link", "flags": []},
    {"id": 902, "gateway": "241.19.0.9", "dev": "vxlan-tunnel", "scope": "link", "flags": []},
    {"id": 900, "group": [{"id": 901}, {"id": 902}], "type": "resilient", "flags": []},
]

BUCKETS: list[dict[str, Any]] = [
    {"id": 900, "bucket": {"index": i, "idle_time": 1.5, "nhid": 901 if i < 96 else 902}, "flags": []}
    for i in range(128)
]

# a worker, east-w1, probing its two local gateways on vx-submariner (240/8), with reach ids
WORKER_STATUS: dict[str, Any] = {
    "node": "east-w1",
    "cluster": "east",
    "health": {
        "mode": "worker",
        "peers": [
            {"hostname": "east-gw1", "cluster": "east", "address": "240.18.0.6", "state": "down",
             "reach": {"west": "down"}, "since": "2026-11-28T20:00:00.000+00:00"},
            {"hostname": "east-gw2", "cluster": "east", "address": "240.18.0.8", "state": "up",
             "rtt": {"last": 0.0001, "min": 0.0001, "average": 0.0001, "max": 0.0002, "stdDev": 0.0}},
        ],
        "down": ["east-gw1"],
        "transitions": [],
    },
}  # fmt: skip
