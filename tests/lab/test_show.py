"""Kernel test: ``magw show`` against a running lab with the Kubernetes control plane (docs/show.md).

One small lab for the module (east and west, two gateways and one worker each, API server emulators), with a
unique name, always removed. ``show connections`` is checked against the kernels themselves: each path's share
is recounted here from ``ip nexthop`` text output (not the JSON ``magw show`` parses). ``show --kubeconfig``,
pointed at each cluster's emulator, must give the lab's answer for what both read. The last test cuts a
gateway's WAN link (its daemons stay alive), so it comes after the tests that need every path up.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from magw.lab.build.state import LabState
from magw.lab.observe.spread import run_spread
from magw.lab.planes import kube
from magw.lab.planes.daemons import daemons_installed
from magw.lab.scenarios.failure import fail
from magw.lab.spec.layout import LabLayout
from tests.support.cli import MagwCli
from tests.support.small_lab import poll_for, small_lab

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    with small_lab(control_plane="kube") as made:
        yield made


def _show(magw_cli: MagwCli, *args: str) -> dict[str, Any]:
    out = magw_cli("show", *args, "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _kernel_shares(namespace: str) -> dict[str, float]:
    """Gateway address -> share of the node's group buckets, recounted from ``ip nexthop`` text."""
    nhs = subprocess.run(["ip", "-n", namespace, "nexthop", "show"], capture_output=True, text=True, check=True)
    via = {m[0]: m[1] for m in re.findall(r"^id (\d+) via (\S+) dev", nhs.stdout, re.M)}
    buckets = subprocess.run(["ip", "-n", namespace, "nexthop", "bucket", "show"], capture_output=True, text=True,
                             check=True)  # fmt: skip
    counted = Counter(re.findall(r"nhid (\d+)", buckets.stdout))
    total = sum(counted.values())
    return {via[nh]: n / total for nh, n in counted.items()}


def _reader(magw_cli: MagwCli, topic: str, *flags: str) -> Callable[[], list[dict[str, Any]]]:
    def read() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = _show(magw_cli, topic, *flags)[topic]
        return rows

    return read


def _both_connected(rows: list[dict[str, Any]]) -> bool:
    return len(rows) == 2 and all(r["paths"] == 2 and r["paths_up"] == 2 for r in rows)


def _all_up(doc: dict[str, Any]) -> bool:
    rows = doc["connections"]
    return len(rows) == 8 and all(r["state"] == "up" and r["rtt"] and r["since"] for r in rows)


def test_connections_per_gateway_pair(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """Every gateway has one up path to each remote gateway, with RTT and since, over the vxlan cable; each
    path's share is its part of the gateway's group buckets as the kernel holds them."""
    lab_layout, st = lab
    doc = poll_for("every path up", lambda: _show(magw_cli, "connections", "--lab", st.name), _all_up)
    gateways = {g.name: g for g in lab_layout.gateways}
    rows = doc["connections"]
    assert sorted({r["node"] for r in rows}) == sorted(gateways)
    for r in rows:
        assert r["cable"] == "vxlan"
        assert r["remote_cluster"] == gateways[r["remote"]].cluster != r["cluster"]
        assert 0 <= r["rtt"]["last"] < 1.0 and r["rtt"]["average"] <= r["rtt"]["max"]
    for name, g in gateways.items():
        expected = _kernel_shares(g.namespace)
        mine = _show(magw_cli, "connections", "--lab", st.name, "--node", name)["connections"]
        shown = {r["address"]: r["share"] for r in mine}
        assert shown.keys() == expected.keys()
        for address, share in expected.items():
            # the buckets may move between the two reads (a group still balancing): a bucket or two at most
            assert shown[address] == pytest.approx(share, abs=2 / 128)
        assert sum(shown.values()) == pytest.approx(1.0)


def test_a_worker_shows_its_paths_to_local_gateways(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    _lab, st = lab
    rows = poll_for(
        "east-w1's paths up",
        lambda: _show(magw_cli, "connections", "--lab", st.name, "--node", "east-w1")["connections"],
        lambda rows: len(rows) == 2 and all(r["state"] == "up" for r in rows),
    )
    assert sorted((r["remote"], r["cable"]) for r in rows) == [("east-gw1", "local"), ("east-gw2", "local")]
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)


def test_flows_per_path_match_what_the_gateways_carried(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """32 UDP flows from east-w1's pod to west-w1's: the flows show connections counts on each of east-w1's paths
    are at least the flows the gateway at its end counted leaving through its tunnel (nft counters on the
    gateways, magw.lab.observe.spread), and together at least the 32 sent (older tracked flows may add)."""
    lab_layout, _st = lab
    client = lab_layout.cluster("east").pods_of("east-w1")[0]
    server = lab_layout.cluster("west").pods_of("west-w1")[0]
    packets = 2
    result = run_spread(lab_layout, flows=32, packets=packets, pair=(client, server))
    assert result.received == result.sent == 64
    rows = _show(magw_cli, "connections", "--lab", lab_layout.name, "--node", "east-w1")["connections"]
    shown = {r["remote"]: r["flows"] for r in rows}
    carried = {g.gateway: g.tunnel_tx // packets for g in result.of("east")}
    assert sum(carried.values()) == 32
    assert shown.keys() == carried.keys()
    for gateway, flows in carried.items():
        assert shown[gateway] >= flows
    assert sum(shown.values()) >= 32


def test_kubeconfig_reads_what_the_lab_reads(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """Each cluster's API server, read with --kubeconfig, gives the endpoints and networks the lab shows; its
    gateways carry the Gateway statuses their daemons wrote (active, every path connected)."""
    _lab, st = lab
    whole = _show(magw_cli, "all", "--lab", st.name)
    for cid in ("east", "west"):
        api = kube.cluster_api(st, cid)
        flags = ("--kubeconfig", str(api.kubeconfig), "--namespace", api.namespace)
        one = _show(magw_cli, "endpoints", *flags)
        assert one["endpoints"] == whole["endpoints"]
        nets = _show(magw_cli, "networks", *flags)["networks"]
        assert [n for n in nets if n["cluster"] == cid] == [n for n in whole["networks"] if n["cluster"] == cid]
        gws = poll_for(f"{cid}'s Gateway statuses", _reader(magw_cli, "gateways", *flags), _both_connected)
        assert {(g["node"], g["ha_status"]) for g in gws} == {(f"{cid}-gw1", "active"), (f"{cid}-gw2", "active")}
        conns = _show(magw_cli, "connections", *flags)["connections"]
        assert {(r["node"], r["remote"], r["from"]) for r in conns} == {
            (f"{cid}-gw{i}", f"{other}-gw{j}", "gateway status")
            for i in (1, 2)
            for j in (1, 2)
            for other in ({"east", "west"} - {cid})
        }


def test_all_as_text(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    _lab, st = lab
    out = magw_cli("show", "all", "--lab", st.name)
    assert out.returncode == 0, out.stderr
    for title in ("== Connections", "== Endpoints", "== Gateways", "== Networks", "== Versions"):
        assert title in out.stdout
    versions = _show(magw_cli, "versions", "--lab", st.name)["versions"]
    agents = sorted(v["where"] for v in versions if v["component"] == "route-agent")
    assert agents == sorted(n.name for n in lab[0].nodes)


def test_a_cut_gateway_is_down_and_gets_no_flows(lab: tuple[LabLayout, LabState], magw_cli: MagwCli) -> None:
    """west-gw2's WAN link cut: east's gateways show that path down since after the cut, with no share (it left
    their groups), and the other path carrying all their flows."""
    _lab, st = lab
    cut_at = time.time()
    fail(st.name, "west-gw2", wan_only=True)

    def east_rows() -> list[dict[str, Any]]:
        rows = _show(magw_cli, "connections", "--lab", st.name)["connections"]
        return [r for r in rows if r["cluster"] == "east"]

    rows = poll_for(
        "west-gw2 down on east's gateways",
        east_rows,
        lambda rows: (
            {(r["remote"], r["state"], r["share"]) for r in rows}
            == {("west-gw2", "down", None), ("west-gw1", "up", 1.0)}
        ),
    )
    for r in rows:
        if r["remote"] == "west-gw2":
            assert datetime.fromisoformat(r["since"]).timestamp() >= cut_at - 0.01
