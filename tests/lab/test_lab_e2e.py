"""End to end: the real daemons in a lab carry pod and service traffic between clusters over several gateways.

Kernel tests. Every lab has a unique random name and is removed afterwards, also
on failure; the tests that build their own lab also check that `down` leaves no
namespace, process or state file behind. Counters and FDB entries are read with
``ip -s -j`` and ``bridge -json``, not through the lab's own code.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build.state import LabState
from magw.lab.observe.healthlog import health_history
from magw.lab.observe.spread import SpreadResult, run_spread
from magw.lab.planes.daemons import daemons_installed
from magw.lab.spec.layout import LabLayout, PodLayout
from magw.lab.spec.topology import default_topology, load_topology, parse_topology
from magw.lab.verify.matrix import Cell, run_matrix
from tests.support import netns as checker
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, leftovers, running_lab, unique_name
from tests.support.paths import EXAMPLES

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(
        not daemons_installed(),
        reason="magw-route-agent / magw-gateway console scripts are not installed next to the interpreter "
        "(pip install -e . after the daemons are added to pyproject)",
    ),
]

FLOWS, PACKETS = 64, 10


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabLayout, LabState]]:
    """The default topology (east, west; 2 gateways, 2 workers, 2 pods each) with the daemons running."""
    with running_lab(default_topology(), daemons=True) as built:
        yield built


def _summary(cells: list[Cell]) -> list[tuple[str, str, str, bool]]:
    return [(c.client.name, c.target_name, c.target.proto, c.ok) for c in cells]


def test_every_pod_reaches_remote_pods_and_services(lab: tuple[LabLayout, LabState]) -> None:
    """From every pod of every node: a pod and the ClusterIP service of the other cluster answer, TCP and UDP."""
    layout_, _st = lab
    cells = run_matrix(layout_)
    assert len(cells) == len(layout_.pods) * 4
    assert _summary(cells) == [(n, t, p, True) for n, t, p, _ok in _summary(cells)]
    clients_by_node = {c.client.node for c in cells}
    assert clients_by_node == {n.name for n in layout_.nodes}


def test_destination_sees_the_client_pod_ip_despite_the_cni_masquerade(lab: tuple[LabLayout, LabState]) -> None:
    """Pod-to-pod traffic between clusters keeps the client pod's IP though every node has a masquerade table."""
    layout_, _st = lab
    for node in layout_.nodes:
        tables = checker.nft_json(node.namespace, "list", "tables")["nftables"]
        names = sorted(t["table"]["name"] for t in tables if "table" in t)
        lease = ["magw_health"] if node.gateway else []  # the liveness lease of failure detection (docs/health.md)
        assert names == ["lab-cni", "lab-kube", "magw", *lease], node.name
    cells = [c for c in run_matrix(layout_) if c.kind == "pod"]
    assert [(c.client.name, c.seen_ip) for c in cells] == [(c.client.name, str(c.client.ip)) for c in cells]


def _check_no_flooding(layout_: LabLayout) -> None:
    """No all-zero (flood) FDB entry on any tunnel device of any node."""
    for node in layout_.nodes:
        for dev in ("vx-submariner", "vxlan-tunnel") if node.gateway else ("vx-submariner",):
            fdb = checker.bridge_json(node.namespace, "fdb", "show", "dev", dev)
            assert [e for e in fdb if e.get("mac") == "00:00:00:00:00:00"] == [], (node.name, dev)


def test_flows_use_every_gateway_with_wire_amplification_one(lab: tuple[LabLayout, LabState]) -> None:
    """64 UDP flows east -> west cross every gateway of both clusters, each packet exactly one gateway each way."""
    layout_, st = lab
    _check_no_flooding(layout_)
    res = run_spread(layout_, flows=FLOWS, packets=PACKETS)
    assert (res.sent, res.received) == (FLOWS * PACKETS, FLOWS * PACKETS)
    east, west = res.of("east"), res.of("west")
    assert [g.gateway for g in east] == ["east-gw1", "east-gw2"]
    history = "\n".join(health_history(st))  # a gateway left out of the groups shows here (none should be)
    assert [g.tunnel_tx > 0 for g in east] == [True, True], history
    assert [g.tunnel_rx > 0 for g in west] == [True, True], history
    sums = {
        "east tunnel tx": sum(g.tunnel_tx for g in east),
        "west tunnel rx": sum(g.tunnel_rx for g in west),
        "west tunnel tx": sum(g.tunnel_tx for g in west),
        "east tunnel rx": sum(g.tunnel_rx for g in east),
        # Worker -> gateway legs go over vx-submariner (requests in east, replies in west); gateway -> pod
        # legs take the CNI's own routes over the underlay.
        "east vx-submariner rx": sum(g.intra_rx for g in east),
        "west vx-submariner rx": sum(g.intra_rx for g in west),
    }
    # The flows' own datagrams, counted at the tunnel devices (magw.lab.observe.spread): exact, whatever the probes do;
    # a flooded copy per packet would double a sum.
    assert sums == dict.fromkeys(sums, res.sent)
    assert res.amplification == 1.0


def _spread_on(res: SpreadResult, cluster: str, direction: str) -> dict[str, bool]:
    return {g.gateway: getattr(g, f"tunnel_{direction}") > 0 for g in res.of(cluster)}


def _pods_one_per_node(layout_: LabLayout) -> list[PodLayout]:
    return [c.pods_of(n.name)[0] for c in layout_.clusters for n in c.nodes]


def test_single_gateway_mode() -> None:
    """With multi_active false only the elected gateway (first by name) of each cluster carries traffic."""
    topo = parse_topology({"multi_active": False, "clusters": [{"id": "east", "pods_per_node": 1},
                                                               {"id": "west", "pods_per_node": 1}]})  # fmt: skip
    with running_lab(topo, daemons=True) as (layout_, st):
        cells = run_matrix(layout_, clients=_pods_one_per_node(layout_))
        assert [c.passed for c in cells] == [True] * len(cells)
        res = run_spread(layout_, flows=FLOWS, packets=PACKETS)
        assert (res.sent, res.received) == (FLOWS * PACKETS, FLOWS * PACKETS)
        assert _spread_on(res, "east", "tx") == {"east-gw1": True, "east-gw2": False}
        assert _spread_on(res, "west", "rx") == {"west-gw1": True, "west-gw2": False}
        assert sum(g.tunnel_rx for g in res.of("west")) == res.sent
        processes = st.processes
    assert leftovers(st.name, processes) == NOTHING_LEFT


def test_three_clusters() -> None:
    """A three-cluster topology (one with a single gateway): every pod reaches both other clusters."""
    topo = load_topology(EXAMPLES / "lab-three-clusters.yaml")
    with running_lab(topo, daemons=True) as (layout_, st):
        cells = run_matrix(layout_)
        assert len(cells) == len(layout_.pods) * 2 * 4
        assert [(c.client.name, c.target_name, c.target.proto, c.passed) for c in cells] == [
            (c.client.name, c.target_name, c.target.proto, True) for c in cells
        ]
        processes = st.processes
    assert len([p for p in processes if p.kind == "route-agent"]) == len(layout_.nodes)
    assert leftovers(st.name, processes) == NOTHING_LEFT


def test_cli_demo(magw_cli: MagwCli) -> None:
    """`magw lab demo` brings the default lab up, prints an all-OK matrix and the spread, removes the lab, exits 0."""
    name = unique_name()
    try:
        proc = magw_cli("lab", "demo", "--name", name, timeout=300)
    finally:
        report = build.down(name)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert "64/64 OK" in lines
    assert "wire amplification: 1.00 (1.00 = each request crossed one gateway)" in lines
    assert "== result: all OK" in lines
    assert lines[-1] == "removed 27 namespaces and 28 processes"
    assert report.namespaces == ()
