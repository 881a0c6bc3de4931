"""``magw show connections``: each path's state, RTT, since and share of flows from a route agent's status and
its kernel's nexthop buckets; the Gateway status fallback; the last failover of ``magw top``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import attrs

from magw.ops.show import render, topics
from magw.ops.show.broker_source import read_broker
from magw.ops.show.connections import connection_rows, duration_seconds, last_failover, via
from magw.ops.show.inputs import Inputs, NodeKernel
from magw.ops.show.kernel import group_shares, path_share
from tests.support import filebroker_world
from tests.unit.ops.show_fixtures import BUCKETS, GW_STATUS, NEXTHOPS, WORKER_STATUS


def test_resilient_group_share_is_its_buckets() -> None:
    """96 of 128 buckets point at west-gw1's nexthop: 75%; the rest at west-gw2: 25%."""
    assert group_shares(NEXTHOPS, BUCKETS) == {900: {"241.19.0.4": 0.75, "241.19.0.9": 0.25}}


def test_plain_group_share_is_its_weights() -> None:
    """Without buckets (an mpath group) the weights decide; ``ip`` omits a weight of 1."""
    nhs = [*NEXTHOPS[:2], {"id": 900, "group": [{"id": 901}, {"id": 902, "weight": 3}], "flags": []}]
    assert group_shares(nhs, []) == {900: {"241.19.0.4": 0.25, "241.19.0.9": 0.75}}


def test_a_path_in_no_group_has_no_share() -> None:
    assert path_share(NEXTHOPS, BUCKETS, "241.19.0.77") is None
    assert path_share(NEXTHOPS[:2], [], "241.19.0.4") is None


def test_the_largest_group_holding_a_path_gives_its_share() -> None:
    """A worker has a group per set of reachable clusters: the one with most members is the one most use."""
    nhs = [
        *NEXTHOPS,
        {"id": 903, "gateway": "241.19.0.5", "dev": "vxlan-tunnel"},
        {"id": 910, "group": [{"id": 901}], "type": "resilient"},
        {"id": 911, "group": [{"id": 901}, {"id": 902}, {"id": 903}]},
    ]
    assert path_share(nhs, BUCKETS, "241.19.0.4") == 1 / 3


def test_gateway_rows_from_its_status_and_kernel() -> None:
    inputs = Inputs(source="t", statuses={"east-gw1": GW_STATUS},
                    kernels={"east-gw1": NodeKernel(nexthops=tuple(NEXTHOPS), buckets=tuple(BUCKETS))})  # fmt: skip
    rows = connection_rows(inputs, ["east-gw1"])
    assert [(r["remote"], r["state"], r["share"], r["cable"], r["from"]) for r in rows] == [
        ("west-gw1", "up", 0.75, "vxlan", "probes"),
        ("west-gw2", "up", 0.25, "vxlan", "probes"),
    ]
    assert rows[0]["rtt"] == {"last": 0.0003, "average": 0.00025, "max": 0.0013}
    assert rows[1]["since"] == "2026-11-28T20:00:05.000+00:00"


def test_worker_paths_are_local_and_have_no_share_without_a_kernel() -> None:
    rows = connection_rows(Inputs(source="t", statuses={"east-w1": WORKER_STATUS}), ["east-w1"])
    assert [(r["remote"], r["cable"], r["state"], r["rtt"], r["share"]) for r in rows] == [
        ("east-gw1", "local", "down", None, None),
        ("east-gw2", "local", "up", {"last": 0.0001, "average": 0.0001, "max": 0.0002}, None),
    ]


def test_gateway_status_is_the_fallback() -> None:
    """Without a status file, the Gateway object's connections: state mapped to the probes' names, RTT parsed."""
    cr = {
        "haStatus": "active",
        "connections": [
            {"endpoint": {"cluster_id": "west", "hostname": "w-gw1", "private_ip": "172.19.0.4"},
             "status": "error", "statusMessage": "health probes not answered"},
            {"endpoint": {"cluster_id": "west", "hostname": "w-gw2", "private_ip": "172.19.0.9"},
             "status": "connected",
             "latencyRTT": {"last": "1.500ms", "min": "1.000ms", "average": "2.000ms", "max": "4.000ms",
                            "stdDev": "0.100ms"}},
        ],
    }  # fmt: skip
    rows = connection_rows(Inputs(source="t", gateway_statuses={"e-gw1": cr}), ["e-gw1"])
    assert [(r["remote"], r["state"], r["from"], r["since"], r["share"]) for r in rows] == [
        ("w-gw1", "down", "gateway status", None, None),
        ("w-gw2", "up", "gateway status", None, None),
    ]
    assert rows[0]["rtt"] is None
    assert rows[1]["rtt"] == {"last": 0.0015, "average": 0.002, "max": 0.004}


def test_duration_strings() -> None:
    assert duration_seconds("1.234ms") == 0.001234
    assert duration_seconds("250us") == 0.00025
    assert duration_seconds("2s") == 2.0
    assert duration_seconds("fast") is None
    assert duration_seconds(None) is None


def test_last_failover_and_when_it_came_back() -> None:
    event = last_failover(GW_STATUS["health"]["transitions"])
    assert event is not None
    assert (event["peer"], event["detection_seconds"], event["recovered_at"]) == (
        "west-gw2",
        0.0712,
        "2026-11-28T20:00:05.000+00:00",
    )
    still = last_failover(GW_STATUS["health"]["transitions"][:2])
    assert still is not None and still["recovered_at"] is None
    assert last_failover(GW_STATUS["health"]["transitions"][:1]) is None


def test_connections_table() -> None:
    inputs = Inputs(source="t", statuses={"east-gw1": GW_STATUS},
                    kernels={"east-gw1": NodeKernel(nexthops=tuple(NEXTHOPS), buckets=tuple(BUCKETS))})  # fmt: skip
    now = datetime(2026, 11, 28, 20, 1, 10, tzinfo=UTC)
    lines = render.connections_text(connection_rows(inputs), now)
    assert lines[0].split() == ["NODE", "CLUSTER", "REMOTE", "REMOTE", "CLUSTER", "CABLE", "VIA", "STATE", "RTT",
                                "LAST/AVG/MAX", "ms", "SINCE", "SHARE", "FLOWS"]  # fmt: skip
    assert lines[1].split() == ["east-gw1", "east", "west-gw1", "west", "vxlan", "-", "up", "0.30/0.25/1.30",
                                "19:58:00", "(3m10s", "ago)", "75%", "-"]  # fmt: skip
    assert lines[2].split()[-5:] == ["20:00:05", "(1m05s", "ago)", "25%", "-"]


def test_via_is_where_the_cable_sends_to(tmp_path: Path) -> None:
    """From the node's cluster's snapshot: a remote gateway's public IP (with the port a load balancer gives it),
    its private IP when it publishes no public one, and a local gateway's node IP for a worker's path."""
    d = tmp_path / "broker"
    d.mkdir()
    filebroker_world.populate(d)
    inputs = read_broker(str(d), endpoint_ttl=None)
    assert via(inputs, "west", "e-gw1", "east") == "public 198.18.0.6"
    assert via(inputs, "east", "w-gw1", "west") == "private 172.19.0.4"
    assert via(inputs, "east", "e-gw1", "east") == "local 172.18.0.6"
    assert via(inputs, "east", "nobody", "west") is None and via(inputs, "mars", "e-gw1", "east") is None
    snaps = {
        cid: attrs.evolve(snap, endpoints=tuple(
            attrs.evolve(e, public_port=45001) if e.hostname == "e-gw1" else e for e in snap.endpoints
        ))
        for cid, snap in inputs.snapshots.items()
    }  # fmt: skip
    lb = attrs.evolve(inputs, snapshots=snaps)
    assert via(lb, "west", "e-gw1", "east") == "public 198.18.0.6:45001"
    rows = topics.endpoints(lb)
    assert [render.public_text(r) for r in rows if r["hostname"] == "e-gw1"] == ["198.18.0.6:45001"]


def test_a_discovered_private_path_is_what_via_says() -> None:
    status = {**GW_STATUS, "nat_discovery": {"port": 4490, "peers": {
        "west-gw1": {"cluster": "west", "private_ip": "172.19.0.4", "path": "private"},
        "west-gw2": {"cluster": "west", "private_ip": "172.19.0.9", "path": "public"},
    }}}  # fmt: skip
    rows = connection_rows(Inputs(source="t", statuses={"east-gw1": status}), ["east-gw1"])
    assert [(r["remote"], r["via"]) for r in rows] == [
        ("west-gw1", "private 172.19.0.4 (discovered)"),
        ("west-gw2", None),  # public: what the snapshot says (none here)
    ]
