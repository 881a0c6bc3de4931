"""``magw show`` endpoints, gateways, networks and the whole document, read from a file broker directory and
from a cluster's Kubernetes objects: what the daemons' own sources assemble, shown once per object."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from magw.ops.show import render, topics
from magw.ops.show.broker_source import SourceError, read_broker
from magw.ops.show.kube_source import infer_cluster, inputs_from_objects
from magw.ops.show.report import TOPICS, document, text
from tests.support import filebroker_world, kube_objects
from tests.support.cli import MagwCli


def _broker(tmp_path: Path) -> Path:
    d = tmp_path / "broker"
    d.mkdir(parents=True)
    filebroker_world.populate(d)
    return d


def test_endpoints_and_networks_from_a_broker(tmp_path: Path) -> None:
    inputs = read_broker(str(_broker(tmp_path)), endpoint_ttl=None)
    assert sorted(inputs.snapshots) == ["east", "west"]
    assert [(e["cluster"], e["hostname"], e["private_ip"], e["public_ip"]) for e in topics.endpoints(inputs)] == [
        ("east", "e-gw1", "172.18.0.6", "198.18.0.6"),
        ("west", "w-gw1", "172.19.0.4", None),
    ]
    nets = {n["cluster"]: n for n in topics.networks(inputs)}
    assert nets["east"]["pod_cidrs"] == ["10.1.0.0/16"]
    assert nets["west"]["service_cidrs"] == ["100.2.0.0/16"]
    assert (nets["east"]["strategy"], nets["east"]["cable"], nets["east"]["multi_active"]) == ("group", "vxlan", True)


def test_gateways_health_comes_from_the_clusters_own_nodes(tmp_path: Path) -> None:
    """A gateway is down in its cluster's view when one of that cluster's nodes' probes says so."""
    inputs = read_broker(str(_broker(tmp_path)), endpoint_ttl=None)
    status = {"node": "e-w1", "cluster": "east",
              "health": {"peers": [{"hostname": "e-gw1", "cluster": "east", "address": "240.18.0.6",
                                    "state": "down", "reach": {"west": "down"}}]}}  # fmt: skip
    with_status = type(inputs)(source="t", snapshots=inputs.snapshots, statuses={"e-w1": status})
    rows = {g["node"]: g for g in topics.gateways(with_status)}
    assert (rows["e-gw1"]["health"], rows["e-gw1"]["down_by"], rows["e-gw1"]["published"]) == ("down", ["e-w1"], True)
    assert rows["e-gw1"]["no_reach"] == ["west"]
    assert "down (by e-w1), no reach to west" in render.gateways_text(list(rows.values()))[1]
    assert rows["w-gw1"]["health"] == "unknown"
    assert rows["e-gw1"]["ha_status"] == "active"


def test_one_cluster_of_a_broker(tmp_path: Path) -> None:
    inputs = read_broker(str(_broker(tmp_path)), ["west"], endpoint_ttl=None)
    assert list(inputs.snapshots) == ["west"]
    with pytest.raises(SourceError, match=r"--cluster: .* has no cluster 'north' \(clusters: east, west\)"):
        read_broker(str(_broker(tmp_path / "x")), ["north"])


def test_missing_broker_dir_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="--broker-dir: no such directory"):
        read_broker(str(tmp_path / "nope"))


def test_all_has_every_topic_as_json_and_text(tmp_path: Path) -> None:
    inputs = read_broker(str(_broker(tmp_path)), endpoint_ttl=None)
    doc = document(inputs, "all")
    assert list(doc) == ["source", *TOPICS]
    json.dumps(doc)  # plain JSON all the way down
    out = text(doc, datetime(2026, 11, 28, tzinfo=UTC))
    for title in ("== Connections", "== Endpoints", "== Gateways", "== Networks", "== Globalnet", "== Versions"):
        assert title in out
    assert "(no cluster with a global CIDR)" in out


def _kinds(objs: list[dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for o in objs:
        out.setdefault(str(o["kind"]), []).append(o)
    return out


def test_kube_objects_give_the_same_answer_as_the_daemons_source() -> None:
    objects = _kinds(kube_objects.east())
    assert infer_cluster(objects) == "east"
    objects["Gateway"] = [{"metadata": {"name": "e-gw1"}, "status": {"haStatus": "active", "connections": []}}]
    inputs = inputs_from_objects(objects, kube_objects.NS, None, source="k")
    assert [(e["cluster"], e["hostname"]) for e in topics.endpoints(inputs)] == [
        ("east", "e-gw1"), ("east", "e-gw2"), ("west", "w-gw1")
    ]  # fmt: skip
    gws = {g["node"]: g for g in topics.gateways(inputs)}
    assert (gws["e-gw1"]["ha_status"], gws["e-gw1"]["paths"]) == ("active", 0)
    assert gws["e-gw2"]["paths"] is None


def test_kube_without_endpoints_of_its_nodes_needs_cluster() -> None:
    objects = _kinds([o for o in kube_objects.east() if o["kind"] != "Endpoint"])
    with pytest.raises(SourceError, match="give --cluster ID"):
        inputs_from_objects(objects, kube_objects.NS, None, source="k")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lab", "no-such-lab-h31"], "magw: error: --lab: no lab named 'no-such-lab-h31'"),
        (["--broker-dir", "/nonexistent/h31"], "magw: error: --broker-dir: no such directory: /nonexistent/h31"),
        (["--kubeconfig", "/nonexistent/h31.yaml"], "magw: error: --kubeconfig: kubeconfig /nonexistent/h31.yaml: "
                                                    "no such file"),
    ],
)  # fmt: skip
def test_bad_sources_exit_2_with_one_line(magw_cli: MagwCli, args: list[str], message: str) -> None:
    out = magw_cli("show", "endpoints", *args)
    assert out.returncode == 2
    assert out.stderr.startswith(message)
    assert out.stderr.count("\n") == 1


def test_unreachable_kubeconfig_is_one_line(tmp_path: Path, magw_cli: MagwCli) -> None:
    """A server that is not there: exit 1, one line naming the kubeconfig."""
    cfg = tmp_path / "kc.yaml"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'unix:///nonexistent/h31.sock'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    out = magw_cli("show", "endpoints", "--kubeconfig", str(cfg))
    assert out.returncode == 1
    assert f"kubeconfig {cfg}: cannot read the API server" in out.stderr
    assert out.stderr.count("\n") == 1


def test_cli_reads_a_static_broker_with_no_expiry(magw_cli: MagwCli) -> None:
    """examples/broker is kept by no gateway daemon: with --endpoint-ttl 0 its Endpoints are all there."""
    out = magw_cli("show", "endpoints", "--broker-dir", "examples/broker", "--endpoint-ttl", "0", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["endpoints"]
    assert [(r["cluster"], r["hostname"]) for r in rows] == [("east", "e-gw1"), ("east", "e-gw2"), ("west", "w-gw1")]


def test_globalnet_pool_and_objects_from_the_controllers_statuses(tmp_path: Path) -> None:
    """What the Globalnet controller wrote: each gateway's cluster egress addresses, a GlobalEgressIP's per gateway,
    the pool's use counted from them."""
    from tests.support.globalnet_broker import controller, converge, gateway, make_broker, put

    d = make_broker(tmp_path / "gn")
    gateway(d, "gw1", 6)
    gateway(d, "gw2", 7)
    put(d, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": 2})
    put(d, "e1", "GlobalEgressIP", {"namespace": "ns", "name": "e1"})
    converge(controller(d))
    (row,) = topics.globalnet(read_broker(str(d), ["east"], endpoint_ttl=None))
    assert (row["cluster"], row["global_cidrs"], row["pool_used"], row["pool_size"]) == (
        "east", ["242.1.0.0/24"], 6, 254
    )  # fmt: skip
    objects = {(o["kind"], o["name"]): o for o in row["objects"]}
    e1 = objects[("GlobalEgressIP", "e1")]
    assert sorted(e1["gateways"]) == ["gw1", "gw2"] and all(len(ips) == 1 for ips in e1["gateways"].values())
    assert e1["allocated"] == "True Success"
    assert len(e1["addresses"]) == 2


def test_egress_vips_with_their_holder(tmp_path: Path) -> None:
    from tests.support.broker_docs import broker_document, egress_vip

    d = tmp_path / "eg"
    d.mkdir()
    (d / "east.yaml").write_text(broker_document("egress-east.yaml"))
    (d / "vip.yaml").write_text(egress_vip("shop", 10, "[{namespace: shop}]"))
    (d / "vip-status.yaml").write_text(
        "kind: EgressVIPStatus\ncluster: east\nname: shop\nholder: n2\nsince: '2026-11-28T20:00:00+00:00'\n"
    )
    (row,) = topics.egressgw(read_broker(str(d), endpoint_ttl=None))
    assert (row["name"], row["vip"], row["candidates"], row["holder"], row["bindings"]) == (
        "shop", "192.0.2.10", ["n1", "n2"], "n2", ["namespace shop"]
    )  # fmt: skip
    lines = render.egressgw_text([row], datetime(2026, 11, 28, 20, 1, tzinfo=UTC))
    assert lines[1].split() == ["east", "shop", "192.0.2.10", "10", "n1,n2", "n2", "20:00:00", "(1m00s", "ago)",
                                "namespace", "shop"]  # fmt: skip
