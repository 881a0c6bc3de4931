"""Every crash the fuzzers found, as a named test with its minimal input, plus the seeds replayed through every
target and the readers' refusal of bytes that are not UTF-8 (docs/fuzzing.md)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import yaml

from magw.drivers.netlink.nexthop import decode_nexthop
from magw.drivers.netlink.nlattr import MalformedMessage
from magw.drivers.netlink.routes import parse_route
from magw.drivers.nft.codec import ListingError, parse_table
from magw.lab.errors import LabInputError
from magw.lab.spec.topology import load_topology
from magw.snapshot.load import SnapshotError, load_snapshot
from magw.sources.kube import mapping
from tests.fuzz import targets


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_every_seed_passes_its_target(name: str) -> None:
    seeds = targets.corpus(name)
    assert seeds, f"tests/data/fuzz/{name}/ has no seed"
    for seed in seeds:
        targets.TARGETS[name](seed)


def test_an_empty_rtm_newnexthop_is_a_one_line_value_error() -> None:
    """atheris, netlink_nexthop: b'' raised struct.error out of decode_nexthop."""
    with pytest.raises(MalformedMessage, match=r"^RTM_NEWNEXTHOP: malformed message \(0 bytes\): .*16 bytes"):
        decode_nexthop(b"")


def test_an_rtm_newnexthop_with_a_short_id_attribute_is_a_one_line_value_error() -> None:
    header = struct.pack("=IHHII", 16 + 8 + 6, 104, 0, 0, 0)  # RTM_NEWNEXTHOP
    msg = header + bytes(8) + struct.pack("=HH", 6, 1) + b"\x01\x00"  # NHA_ID of 2 bytes instead of 4
    with pytest.raises(ValueError, match=r"^RTM_NEWNEXTHOP: malformed message \(30 bytes\): ") as err:
        decode_nexthop(msg)
    assert "\n" not in str(err.value)


def test_an_rtm_newroute_whose_length_exceeds_the_buffer_is_read_as_far_as_it_goes() -> None:
    """Found by reading the attribute walker while fixing the above: a header claiming more bytes than the buffer
    made attrs_of unpack past its end (struct.error)."""
    body = struct.pack("=BBBBBBBBI", 2, 33, 0, 0, 100, 157, 0, 1, 0)  # AF_INET, dst_len 33, table 100, proto magw
    msg = struct.pack("=IHHII", 400, 24, 0, 0, 0) + body + struct.pack("=HH", 8, 1)  # RTA_DST header, no payload
    with pytest.raises(MalformedMessage, match=r"^RTM_NEWROUTE: malformed message \(32 bytes\): .*33"):
        parse_route(msg, lambda i: f"if{i}")


def test_a_map_without_a_type_in_an_nft_listing_is_a_listing_error() -> None:
    """atheris, nft_json: {"map": {...}} without "type" raised KeyError out of parse_table."""
    doc = {"nftables": [{"map": {"family": "ip", "table": "magw", "name": "m"}}]}
    with pytest.raises(ListingError, match=r"^nft -j list table ip magw: not a listing libnftables writes \(KeyError"):
        parse_table(doc, "ip", "magw")


def test_a_rule_expression_nested_too_deeply_is_a_listing_error() -> None:
    """atheris, nft_json (60 s run): a rule whose expr nests a few hundred lists deep passed json.loads, then
    RecursionError escaped the counters' normalisation (_zero_counters)."""
    expr: object = []
    for _ in range(5000):
        expr = [expr]
    doc = {"nftables": [{"rule": {"family": "ip", "table": "magw", "chain": "c", "expr": expr}}]}
    with pytest.raises(ListingError, match=r"^nft -j list table ip magw: .*RecursionError") as err:
        parse_table(doc, "ip", "magw")
    assert "\n" not in str(err.value)


def test_a_set_range_element_with_one_bound_is_a_listing_error() -> None:
    """atheris, nft_json (60 s run): {"range": [x]} in a set's elem raised IndexError out of elements.from_json."""
    body = {"family": "ip", "table": "magw", "name": "s", "type": "ipv4_addr", "elem": [{"range": ["10.0.0.1"]}]}
    with pytest.raises(ListingError, match=r"^nft -j list table ip magw: .*IndexError"):
        parse_table({"nftables": [{"set": body}]}, "ip", "magw")


@pytest.mark.parametrize("item", [[1], {"set": 1, "map": 2}, "x", {"rule": {"family": "ip", "table": "magw"}}])
def test_odd_items_of_an_nft_listing_are_listing_errors(item: object) -> None:
    with pytest.raises(ListingError):
        parse_table({"nftables": [item]}, "ip", "magw")


def test_an_endpoint_slice_address_with_leading_zeros_is_a_mapping_error_of_the_service() -> None:
    """atheris, kube_object: '09.1.3.21' in a headless Service's EndpointSlice raised AddressValueError."""
    service = {"kind": "Service", "metadata": {"name": "db", "namespace": "shop"}, "spec": {"clusterIP": "None"}}
    slices = [{"endpoints": [{"addresses": ["09.1.3.21"]}]}]
    with pytest.raises(mapping.MappingError, match=r"^kube:Service/shop/db: endpoint slices: .*'09.1.3.21'"):
        mapping.service_docs(service, "east", slices)


def test_an_object_name_with_a_newline_keeps_errors_on_one_line() -> None:
    """atheris, kube_object (suite run): a ConfigMap namespace holding a newline put it into every problem line."""
    cm = {"metadata": {"name": "magw-config", "namespace": "sub\nmariner"}, "data": {"underlayMTU": "x"}}
    with pytest.raises(mapping.MappingError) as err:
        mapping.config_docs(None, cm)
    assert str(err.value).startswith("kube:ConfigMap/'sub\\nmariner'/magw-config: underlayMTU: ")
    assert "\n" not in str(err.value)


def test_a_global_ingress_ip_whose_obj_ref_is_not_an_object_maps_by_service_name() -> None:
    """hypothesis: spec.objRef: true raised AttributeError ('bool' object has no attribute 'get')."""
    obj = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"objRef": True, "serviceName": "web"}}
    (doc,) = mapping.globalnet_docs("GlobalIngressIP", obj, "east")
    assert doc.fields["targetRef"]["name"] == "web"


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        ("Service", {"metadata": {"name": "s", "namespace": "n"}, "spec": {"ports": ["80"]}}),
        ("Service", {"metadata": {"name": "s", "namespace": "n"}, "spec": {"selector": "app=web"}}),
        ("Cluster", {"metadata": {"name": "c"}, "spec": {"cluster_id": "c", "cluster_cidr": 10}}),
        ("GlobalEgressIP", {"metadata": {"name": "g", "namespace": "n"}, "status": {"conditions": ["Ready"]}}),
    ],
)
def test_a_field_of_an_unexpected_shape_is_a_one_line_mapping_error(kind: str, obj: dict[str, object]) -> None:
    """Shapes the CRDs or the core API would refuse but a mapping must not crash on (hypothesis)."""
    call = {
        "Service": lambda: mapping.service_docs(obj, "east"),
        "Cluster": lambda: mapping.cluster_docs(obj),
        "GlobalEgressIP": lambda: mapping.globalnet_docs("GlobalEgressIP", obj, "east"),
    }[kind]
    with pytest.raises(mapping.MappingError, match=rf"^kube:{kind}/") as err:
        call()
    assert "\n" not in str(err.value)


def test_files_that_are_not_utf8_are_refused_in_one_line(tmp_path: Path) -> None:
    """The byte targets skip non-UTF-8 input because each file reader refuses it first: shown here. The lab's
    topology reader let UnicodeDecodeError escape (Path.read_text) before this fix."""
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"clusters:\n- id: \xff\xfe\n")
    with pytest.raises(SnapshotError, match=r"bad.yaml: cannot read: .*utf-8"):
        load_snapshot(bad)
    with pytest.raises(LabInputError, match=r"bad.yaml: cannot read: .*utf-8") as err:
        load_topology(bad)
    assert "\n" not in str(err.value)


def test_kube_object_target_skips_what_is_not_an_object() -> None:
    """The JSON decoder's refusals are the client library's; the target only maps objects."""
    for text in (b"[]", b"{}", b'{"kind": "Node"}', json.dumps({"kind": 1, "metadata": {}}).encode(), b"\xff"):
        targets.kube_object(text)


def test_a_broker_document_named_with_a_newline_is_refused_in_one_line() -> None:
    """hypothesis found a ClusterGlobalEgressIP named ``"\\n"``: the document's name went into the error as is,
    so the error took two lines. Now a name that is not printable is shown escaped."""
    text = yaml.safe_dump_all([{"kind": "ClusterGlobalEgressIP", "cluster": "east", "name": "\n"}])
    targets.broker_file(text.encode())  # raises RuleBroken when an error breaks the one-line rule
