"""The egress gateway's broker documents (EgressConfig, EgressVIP, EgressVIPStatus) -> Snapshot.egressgw of the
local cluster; every bad document is left out with one line naming its file, field and reason; the rest
stays; a broken edit keeps the last good version; the snapshot YAML carries the same section both ways."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from magw.model.egressgw import EgressBinding, EgressConfig, EgressGateway, EgressVIP, EgressVIPStatus
from magw.model.globalnet import Namespace
from magw.snapshot.load import dump_snapshot, parse_snapshot_text
from magw.sources import FileBroker
from magw.sources.file.assemble import assemble
from magw.sources.file.documents import parse_file

A = IPv4Address

BASE = """\
kind: Cluster
id: east
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
---
kind: Node
cluster: east
name: n1
ip: 172.18.0.2
cni_ip: 10.1.1.1
"""

CONFIG = """\
kind: EgressConfig
cluster: east
vipRanges: [192.0.2.0/24]
advertInt: 0.1
conntrackSync: false
"""

SHOP = """\
kind: EgressVIP
cluster: east
name: shop
vip: 192.0.2.10
vrid: 10
candidates: [n1, n2]
bindings:
- {namespace: shop}
- {namespace: blog, service: api}
"""

WORKLOADS = """\
{kind: Namespace, cluster: east, name: shop}
---
{kind: Service, cluster: east, namespace: shop, name: web, selector: {app: web}}
"""

STATUS = """\
{kind: EgressVIPStatus, cluster: east, name: shop, holder: n1, since: '2025-01-01T00:00:00Z', services: [shop/web]}
"""

SHOP_VIP = EgressVIP(
    name="shop",
    vip=A("192.0.2.10"),
    vrid=10,
    candidates=("n1", "n2"),
    bindings=(EgressBinding("shop"), EgressBinding("blog", "api")),
)


def _assemble(*texts: str) -> tuple[EgressGateway | None, list[str]]:
    docs = [d for i, t in enumerate(texts) for d in parse_file(t, file=f"f{i}.yaml")]
    a = assemble("east", docs, {})
    return (a.snapshot.egressgw if a.snapshot else None), [p.error for p in a.problems]


def test_documents_fill_the_local_clusters_egress_and_workloads_load_without_globalnet(tmp_path: Path) -> None:
    for name, text in {"base": BASE, "cfg": CONFIG, "shop": SHOP, "wl": WORKLOADS, "st": STATUS}.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    # Another cluster's egress documents are not ours.
    (tmp_path / "west.yaml").write_text(SHOP.replace("cluster: east", "cluster: west").replace("vrid: 10", "vrid: 0"))
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    snap = broker.snapshot
    assert snap is not None and broker.problem_files() == frozenset()
    assert snap.cluster("east").global_cidrs == ()  # not a Globalnet cluster...
    assert snap.globalnet.namespaces == (Namespace(name="shop"),)  # ...and its workloads are there
    assert [s.name for s in snap.globalnet.services] == ["web"]
    assert snap.egressgw == EgressGateway(
        config=EgressConfig(vip_ranges=(IPv4Network("192.0.2.0/24"),), advert_int=0.1, conntrack_sync=False),
        vips=(SHOP_VIP,),
        statuses=(("shop", EgressVIPStatus(holder="n1", since="2025-01-01T00:00:00Z", services=("shop/web",))),),
    )


def test_defaults_an_empty_config_and_no_bindings() -> None:
    egress, problems = _assemble(BASE, "{kind: EgressConfig, cluster: east, vipRanges: [192.0.2.0/24]}", SHOP)
    assert problems == [] and egress is not None
    assert egress.config.advert_int == 1.0 and egress.config.conntrack_sync is True
    bare = SHOP.split("bindings:")[0]
    egress, problems = _assemble(BASE, CONFIG, bare)
    assert problems == [] and egress is not None and egress.vips[0].bindings == ()


BAD_VIPS = [
    (
        "vip: 192.0.2.10",
        "vip: 192.0.2.300",
        "f2.yaml: document 1 (EgressVIP east/shop): vip: '192.0.2.300' is not an IPv4 address",
    ),
    ("vrid: 10", "vrid: 0", "vrid: 0 is out of range 1..255"),
    ("vrid: 10", "vrid: 256", "vrid: 256 is out of range 1..255"),
    ("candidates: [n1, n2]", "candidates: []", "candidates: at least one candidate node is needed to hold the VIP"),
    ("candidates: [n1, n2]", "candidates: [n1, n1]", "candidates[1]: node n1 is listed twice"),
    ("vrid: 10", "vrid: 10\ncolour: red", "colour: unknown key"),
    ("vip: 192.0.2.10", "vip: 198.51.100.10", "vip: 198.51.100.10 is outside the egress VIP ranges (192.0.2.0/24)"),
    ("vip: 192.0.2.10", "vip: 224.0.0.18", "vip: 224.0.0.18 cannot be a VIP"),
    ("name: shop", "name: Shop", "name: name 'Shop' must be lower-case letters"),
    ("- {namespace: shop}", "- {namespace: shop}\n- {namespace: shop}", "bindings[1]: namespace shop is listed twice"),
]


@pytest.mark.parametrize(("old", "new", "error"), BAD_VIPS)
def test_a_bad_vip_is_left_out_with_one_line_and_the_others_stay(old: str, new: str, error: str) -> None:
    other = (
        SHOP.replace("name: shop", "name: other").replace("192.0.2.10", "192.0.2.11").replace("vrid: 10", "vrid: 11")
    )
    egress, problems = _assemble(BASE, CONFIG, SHOP.replace(old, new), other)
    assert egress is not None and [v.name for v in egress.vips] == ["other"]
    assert len(problems) == 1 and error in problems[0] and "\n" not in problems[0]
    assert problems[0].startswith("f2.yaml: document 1 (EgressVIP east/")


@pytest.mark.parametrize(
    ("field", "error"),
    [
        ("vrid: 10", "vrid: vrid 10 is also VIP shop's"),
        ("vip: 192.0.2.10", "vip: vip 192.0.2.10 is also VIP shop's"),
        ("name: shop", "duplicate EgressVIP document (also f2.yaml: document 1 (EgressVIP east/shop))"),
    ],
)
def test_a_vip_that_repeats_a_name_vrid_or_address_is_refused_and_the_first_kept(field: str, error: str) -> None:
    key = field.split(":")[0]
    changes = {
        "name": ("name: shop", "name: zzz"),
        "vrid": ("vrid: 10", "vrid: 12"),
        "vip": ("192.0.2.10", "192.0.2.12"),
    }
    second = SHOP
    for k, (a, b) in changes.items():
        if k != key:
            second = second.replace(a, b)
    egress, problems = _assemble(BASE, CONFIG, SHOP, second)
    assert egress is not None and egress.vips == (SHOP_VIP,)
    assert len(problems) == 1 and problems[0].startswith("f3.yaml: document 1") and error in problems[0]


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("advertInt: 0.1", "advertInt: 0.001", "advertInt: 0.001 s is out of range 0.01..40.95 (VRRPv3)"),
        ("advertInt: 0.1", "advertInt: 41", "advertInt: 41 s is out of range 0.01..40.95 (VRRPv3)"),
        ("advertInt: 0.1", "advertInt: 0.015", "advertInt: 0.015 s is not a whole number of centiseconds"),
        ("advertInt: 0.1", "advertInt: true", "advertInt: expected a number of seconds"),
        ("vipRanges: [192.0.2.0/24]", "vipRanges: [192.0.2.1/24]", "vipRanges[0]: '192.0.2.1/24' has host bits"),
        ("conntrackSync: false", "conntrackSync: maybe", "conntrackSync: expected a boolean"),
        ("conntrackSync: false", "conntrack: false", "conntrack: unknown key, did you mean 'conntrackSync'?"),
    ],
    ids=["advert-low", "advert-high", "advert-centi", "advert-bool", "range", "bool", "unknown"],
)
def test_a_bad_config_is_refused_with_one_line(old: str, new: str, error: str) -> None:
    egress, problems = _assemble(BASE, CONFIG.replace(old, new))
    assert egress == EgressGateway()
    assert problems == [f"f1.yaml: document 1 (EgressConfig east): {error}"] or (
        len(problems) == 1 and problems[0].startswith(f"f1.yaml: document 1 (EgressConfig east): {error}")
    )


def test_a_bad_config_without_a_last_good_one_refuses_every_vip_as_outside_the_ranges() -> None:
    egress, problems = _assemble(BASE, CONFIG.replace("advertInt: 0.1", "advertInt: 0.001"), SHOP)
    assert egress is not None and egress.vips == () and egress.config == EgressConfig()
    assert problems == [
        "f1.yaml: document 1 (EgressConfig east): advertInt: 0.001 s is out of range 0.01..40.95 (VRRPv3)",
        "f2.yaml: document 1 (EgressVIP east/shop): vip: 192.0.2.10 is outside the egress VIP ranges (none configured)",
    ]


def test_a_broken_edit_keeps_the_last_good_version(tmp_path: Path) -> None:
    for name, text in {"base": BASE, "cfg": CONFIG, "shop": SHOP}.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None and broker.snapshot.egressgw.vips == (SHOP_VIP,)
    (tmp_path / "shop.yaml").write_text(SHOP.replace("vrid: 10", "vrid: 300"))
    (tmp_path / "cfg.yaml").write_text(CONFIG.replace("advertInt: 0.1", "advertInt: 99"))
    broker.scan()
    assert broker.snapshot is not None and broker.snapshot.egressgw.vips == (SHOP_VIP,)
    assert broker.snapshot.egressgw.config.advert_int == 0.1
    assert broker.problem_files() == frozenset({"shop.yaml", "cfg.yaml"})


def test_a_bad_status_is_left_out_and_the_vip_stays() -> None:
    bad = STATUS.replace("services: [shop/web]", "services: [web]")
    egress, problems = _assemble(BASE, CONFIG, SHOP, bad)
    assert egress is not None and egress.vips == (SHOP_VIP,) and egress.statuses == ()
    assert problems == ["f3.yaml: document 1 (EgressVIPStatus east/shop): services[0]: 'web' is not namespace/name"]


def test_the_snapshot_yaml_carries_egress_both_ways() -> None:
    text = """\
local_cluster: east
clusters: [{id: east, pod_cidrs: [10.1.0.0/16], service_cidrs: [100.1.0.0/16]}]
egress:
  config: {vipRanges: [192.0.2.0/24], advertInt: 0.25}
  vips:
  - {name: shop, vip: 192.0.2.10, vrid: 10, candidates: [n2, n1], bindings: [{namespace: shop, service: web}]}
  statuses:
  - {name: shop, holder: n2, since: '2025-01-01T00:00:00Z', services: [shop/web]}
"""
    snap = parse_snapshot_text(text)
    assert snap.egressgw.vips[0].candidates == ("n2", "n1")  # priority order is kept
    assert snap.egressgw.vips[0].bindings == (EgressBinding("shop", "web"),)
    assert parse_snapshot_text(dump_snapshot(snap)) == snap
    plain = parse_snapshot_text(text.split("egress:")[0])
    assert "egress" not in dump_snapshot(plain)


def test_the_snapshot_yaml_refuses_a_bad_egress_section_with_its_path() -> None:
    text = """\
local_cluster: east
clusters: [{id: east, pod_cidrs: [10.1.0.0/16], service_cidrs: [100.1.0.0/16]}]
egress:
  config: {vipRanges: [192.0.2.0/24]}
  vips: [{name: a, vip: 192.0.2.10, vrid: 7, candidates: [n1]}, {name: b, vip: 192.0.2.11, vrid: 7, candidates: [n1]}]
"""
    with pytest.raises(ValueError, match=r"^<snapshot>: egress\.vips\[1\]\.vrid: vrid 7 is also VIP a's"):
        parse_snapshot_text(text)


def test_the_example_cr_maps_to_documents_the_broker_accepts() -> None:
    from magw.sources.kube.mapping import egress_vip_docs
    from tests.support.deploy_checks import manifests

    cr = next(m.doc for m in manifests("examples") if m.kind == "EgressVIP")
    mapped = egress_vip_docs(cr, "east")
    base = parse_file(BASE + "---\n" + CONFIG, file="base.yaml")
    a = assemble("east", [*base, *mapped], {})
    assert a.problems == () and a.snapshot is not None
    vip = a.snapshot.egressgw.vip("shop")
    assert vip is not None and vip.candidates == ("e-gw1", "e-gw2")
    assert vip.bindings == (EgressBinding("shop"), EgressBinding("shop", "web"))
    assert a.snapshot.egressgw.status_of("shop") == EgressVIPStatus(
        holder="e-gw1", since="2025-01-01T00:00:00Z", services=("shop/db", "shop/web")
    )
