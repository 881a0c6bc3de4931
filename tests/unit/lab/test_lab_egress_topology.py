"""The egress lab's topology (``egress:``), its outside namespace, and its broker documents read back by the file
broker into the snapshot the egress gateway plans from."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from magw.desired.egressgw.bindings import resolve
from magw.lab.errors import LabInputError
from magw.lab.planes.daemons import write_broker
from magw.lab.planes.egressgw import egressgw_model, outside_commands, outside_ip, outside_ns
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import load_topology, parse_topology
from magw.model.egressgw import EgressBinding
from magw.sources.file.broker import FileBroker
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "lab-egress-gateway.yaml"


def _doc(**egress: Any) -> dict[str, Any]:
    return {"clusters": [{"id": "east", "gateways": 2, "workers": 1}, {"id": "west"}], "egress": egress}


def test_the_example_round_trips_and_gives_full_node_names_and_the_underlay_range() -> None:
    topo = load_topology(EXAMPLE)
    assert parse_topology(topo.to_doc()) == topo
    lab = layout("eg", topo)
    model = egressgw_model(lab)
    shop = model.vip("shop")
    assert shop is not None and shop.candidates == ("east-gw1", "east-gw2")
    assert shop.vip == IPv4Address("172.17.0.200") and shop.vrid == 50
    assert model.config.vip_ranges == (IPv4Network("172.17.0.192/27"),) and model.config.advert_int == 0.1
    web = model.vip("web")
    assert web is not None and web.bindings == (EgressBinding("blog", "web"),)
    assert outside_ns(lab) == "eg-outside" and "eg-outside" in lab.namespaces
    assert outside_ip(lab) == IPv4Address("172.17.0.250")
    assert "addr add 172.17.0.250/24 dev eth0" in outside_commands(lab)


def test_a_lab_without_egress_has_no_outside() -> None:
    lab = layout("eg", parse_topology({"clusters": [{"id": "east"}, {"id": "west"}]}))
    assert outside_ns(lab) is None and not any(ns.endswith("outside") for ns in lab.namespaces)


def test_the_documents_parse_through_the_file_broker_into_the_snapshot(tmp_path: Path) -> None:
    lab = layout("eg", load_topology(EXAMPLE))
    write_broker(lab, tmp_path)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert broker.problem_files() == frozenset()
    snap = broker.snapshot
    assert snap is not None
    assert snap.egressgw.vips == egressgw_model(lab).vips
    assert snap.egressgw.config == egressgw_model(lab).config
    # The workloads came along: the resolver finds the bound pods from what the broker read.
    r = resolve(snap.egressgw, snap.globalnet.services, snap.globalnet.pods)
    east = lab.cluster("east")
    by_short = {p.short: p.ip for p in east.pods}
    assert r.of("shop").services == ("shop/cart", "shop/pay")
    assert r.of("shop").pods == tuple(sorted((by_short["cart-0"], by_short["cart-1"], by_short["pay-0"])))
    assert r.of("web").pods == (by_short["web-0"],)
    assert r.conflicts == ()
    assert not any(p in r.of("shop").pods + r.of("web").pods for p in (by_short["feed-0"], by_short["w1-p1"]))
    egress_files = sorted(p.name for p in tmp_path.glob("egress@*"))
    assert egress_files == ["egress@east@config.yaml", "egress@east@vip@shop.yaml", "egress@east@vip@web.yaml"]
    assert yaml.safe_load((tmp_path / "egress@east@vip@web.yaml").read_text())["candidates"] == ["east-gw2", "east-gw1"]


@pytest.mark.parametrize(
    ("egress", "message"),
    [
        ({"cluster": "north"}, "egress.cluster: no cluster 'north' (clusters: east, west)"),
        ({"advert_int": 0.001}, "egress.advert_int: must be a number of seconds in 0.01..40.95"),
        ({"advert_int": 0.125}, "egress.advert_int: VRRPv3 carries centiseconds"),
        ({"vips": [{"name": "a", "candidates": ["gw9"]}]}, "egress.vips[0].candidates: no node 'gw9' in cluster east"),
        ({"vips": [{"name": "a", "candidates": []}]}, "egress.vips[0].candidates: must be a non-empty list"),
        ({"vips": [{"name": "a", "candidates": ["gw1", "gw1"]}]}, "a node is listed twice"),
        ({"vips": [{"name": "a", "vip": "172.17.0.50", "candidates": ["gw1"]}]}, "outside the lab's VIP range"),
        ({"vips": [{"name": "a", "vip": "nope", "candidates": ["gw1"]}]}, "'nope' is not an IPv4 address"),
        (
            {"vips": [{"name": "a", "candidates": ["gw1"]}, {"name": "b", "vrid": 50, "candidates": ["gw2"]}]},
            "egress.vips[1].vrid: 50 is used by another VIP",
        ),
        ({"vips": [{"name": "A", "candidates": ["gw1"]}]}, "egress.vips[0].name"),
        ({"vips": [{"name": "a", "candidates": ["gw1"], "bindings": [{"service": "x"}]}]}, "bindings[0].namespace"),
        ({"vips": [{"name": "a", "candidates": ["gw1"], "extra": 1}]}, "egress.vips[0].extra: unknown key"),
    ],
)
def test_bad_egress_keys_are_refused_in_one_line(egress: dict[str, Any], message: str) -> None:
    with pytest.raises(LabInputError) as err:
        parse_topology(_doc(**egress))
    assert message in str(err.value) and "\n" not in str(err.value)
