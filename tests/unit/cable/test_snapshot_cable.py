"""The snapshot format of the WireGuard cable: ``cable``, ``wireguard_port``, an endpoint's ``backend`` and
``backend_config.publicKey``; the dump reads back equal; every refusal is one line naming the field."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

import pytest

from magw.model import Config
from magw.model.cable import Cable
from magw.snapshot.load import SnapshotError, dump_snapshot, parse_snapshot, parse_snapshot_text, snapshot_to_doc
from tests.unit.cable.data import (
    E_GW1_PUB,
    OTHER_PUB,
    PORT,
    S_GW1_PUB,
    W_GW1_PUB,
    W_GW2_PUB,
    clusterset_doc,
    endpoint_item,
)

SOURCE = "snapshot.yaml"


def test_a_wireguard_clusterset_parses_into_the_model() -> None:
    snap = parse_snapshot(clusterset_doc(), source=SOURCE)
    assert snap.config.cable is Cable.WIREGUARD
    assert snap.config.wireguard_port == PORT
    by_host = {e.hostname: e for e in snap.endpoints}
    assert (by_host["e-gw1"].backend, by_host["e-gw1"].public_key) == (Cable.WIREGUARD, E_GW1_PUB)
    assert (by_host["w-gw1"].backend, by_host["w-gw1"].public_key) == (Cable.WIREGUARD, W_GW1_PUB)
    assert (by_host["w-gw2"].backend, by_host["w-gw2"].public_key) == (Cable.WIREGUARD, W_GW2_PUB)
    assert (by_host["s-gw1"].backend, by_host["s-gw1"].public_key) == (Cable.WIREGUARD, S_GW1_PUB)
    assert (by_host["w-gw3"].backend, by_host["w-gw3"].public_key) == (Cable.VXLAN, None)
    assert by_host["w-gw2"].public_ip is None and by_host["w-gw2"].underlay_ip == IPv4Address("172.19.1.5")


def test_cable_ready_needs_the_wireguard_backend_and_a_key() -> None:
    by_host = {e.hostname: e for e in parse_snapshot(clusterset_doc()).endpoints}
    assert by_host["w-gw1"].cable_ready(Cable.WIREGUARD)
    assert not by_host["w-gw3"].cable_ready(Cable.WIREGUARD)
    assert by_host["w-gw3"].cable_ready(Cable.VXLAN)  # the VXLAN cable needs nothing
    assert by_host["w-gw1"].cable_ready(Cable.VXLAN)


def test_without_the_new_keys_the_defaults_hold() -> None:
    doc = clusterset_doc()
    del doc["cable"], doc["wireguard_port"]
    doc["endpoints"] = [endpoint_item(doc, "w-gw3")]
    snap = parse_snapshot(doc)
    assert snap.config.cable is Cable.VXLAN
    assert snap.config.wireguard_port == 51820
    assert Config().cable is Cable.VXLAN and Config().wireguard_port == 51820


def test_a_public_key_beside_the_vxlan_backend_is_kept() -> None:
    """backend_config.publicKey is read whatever the backend (a gateway switching cables publishes both)."""
    doc = clusterset_doc()
    endpoint_item(doc, "w-gw3")["backend_config"] = {"publicKey": W_GW1_PUB, "natt-discovery-port": "4490"}
    endpoint_item(doc, "w-gw1")["backend_config"] = {"publicKey": OTHER_PUB}
    by_host = {e.hostname: e for e in parse_snapshot(doc).endpoints}
    assert by_host["w-gw1"].public_key == OTHER_PUB
    assert (by_host["w-gw3"].backend, by_host["w-gw3"].public_key) == (Cable.VXLAN, W_GW1_PUB)
    assert not by_host["w-gw3"].cable_ready(Cable.WIREGUARD)


def test_dump_then_parse_is_equal() -> None:
    snap = parse_snapshot(clusterset_doc())
    assert parse_snapshot_text(dump_snapshot(snap)) == snap
    assert parse_snapshot(snapshot_to_doc(snap)) == snap


def test_the_dump_carries_the_cable_fields_in_the_input_form() -> None:
    doc = snapshot_to_doc(parse_snapshot(clusterset_doc()))
    assert doc["cable"] == "wireguard"
    assert doc["wireguard_port"] == PORT
    endpoints = {e["hostname"]: e for e in doc["endpoints"]}  # type: ignore[attr-defined]
    assert endpoints["w-gw2"]["backend"] == "wireguard"
    assert endpoints["w-gw2"]["backend_config"] == {"publicKey": W_GW2_PUB}
    assert "backend" not in endpoints["w-gw3"] and "backend_config" not in endpoints["w-gw3"]


def test_the_dump_of_a_vxlan_clusterset_names_no_cable() -> None:
    """Defaults stay out of the dump, so dumps of VXLAN clustersets read the same as before the cable."""
    doc = clusterset_doc()
    del doc["cable"], doc["wireguard_port"]
    dumped = snapshot_to_doc(parse_snapshot(doc))
    assert "cable" not in dumped and "wireguard_port" not in dumped
    assert parse_snapshot(dumped) == parse_snapshot(doc)


def _set_top(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc[key] = value

    return mutate


def _set_endpoint(host: str, key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        endpoint_item(doc, host)[key] = value

    return mutate


def _del_endpoint(host: str, key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        del endpoint_item(doc, host)[key]

    return mutate


# endpoints[1] is w-gw1 (the document's order: e-gw1, w-gw1, w-gw2, w-gw3, s-gw1)
REJECTIONS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "unknown-cable",
        _set_top("cable", "ipsec"),
        "snapshot.yaml: cable: unknown cable 'ipsec' (expected one of: vxlan, wireguard)",
    ),
    ("cable-not-a-string", _set_top("cable", 3), "snapshot.yaml: cable: expected a string, got integer 3"),
    (
        "unknown-backend",
        _set_endpoint("w-gw1", "backend", "libreswan"),
        "snapshot.yaml: endpoints[1].backend: unknown backend 'libreswan' (expected one of: vxlan, wireguard)",
    ),
    (
        "wireguard-without-backend-config",
        _del_endpoint("w-gw1", "backend_config"),
        "snapshot.yaml: endpoints[1].backend_config: backend wireguard needs backend_config.publicKey",
    ),
    (
        "wireguard-without-public-key",
        _set_endpoint("w-gw1", "backend_config", {"natt-discovery-port": "4490"}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: backend wireguard needs a WireGuard public key",
    ),
    (
        "backend-config-not-a-mapping",
        _set_endpoint("w-gw1", "backend_config", "publicKey"),
        "snapshot.yaml: endpoints[1].backend_config: expected a mapping, got string 'publicKey'",
    ),
    (
        "key-too-short",
        _set_endpoint("w-gw1", "backend_config", {"publicKey": W_GW1_PUB[:-2]}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: a WireGuard key is 44 base64 characters, not 42",
    ),
    (
        "key-too-long",
        _set_endpoint("w-gw1", "backend_config", {"publicKey": W_GW1_PUB + "AAAA"}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: a WireGuard key is 44 base64 characters, not 48",
    ),
    (
        "key-not-base64",
        _set_endpoint("w-gw1", "backend_config", {"publicKey": "!" * 43 + "="}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: not base64",
    ),
    (
        "key-with-a-newline",  # a key pasted with its line end
        _set_endpoint("w-gw1", "backend_config", {"publicKey": W_GW1_PUB[:-1] + "\n"}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: not base64",
    ),
    (
        "key-of-33-bytes",  # 44 characters without padding: 33 bytes
        _set_endpoint("w-gw1", "backend_config", {"publicKey": "A" * 44}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: decodes to 33 bytes, not 32",
    ),
    (
        "key-not-a-string",
        _set_endpoint("w-gw1", "backend_config", {"publicKey": 5}),
        "snapshot.yaml: endpoints[1].backend_config.publicKey: expected a string, got integer 5",
    ),
    ("port-zero", _set_top("wireguard_port", 0), "snapshot.yaml: wireguard_port: 0 is out of range 1..65535"),
    (
        "port-too-big",
        _set_top("wireguard_port", 70000),
        "snapshot.yaml: wireguard_port: 70000 is out of range 1..65535",
    ),
    (
        "port-a-string",
        _set_top("wireguard_port", "51820"),
        "snapshot.yaml: wireguard_port: expected an integer, got string '51820'",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [(m, msg) for _, m, msg in REJECTIONS], ids=[i for i, _, _ in REJECTIONS]
)
def test_rejections_are_one_line_naming_the_field(mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    doc = clusterset_doc()
    mutate(doc)
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(doc, source=SOURCE)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_a_bad_key_in_yaml_text_is_one_line_too() -> None:
    # the dump sorts endpoints by (cluster, hostname): e-gw1, s-gw1, w-gw1, w-gw2, w-gw3
    text = dump_snapshot(parse_snapshot(clusterset_doc())).replace(W_GW2_PUB, "not-a-key")
    with pytest.raises(SnapshotError) as info:
        parse_snapshot_text(text, source=SOURCE)
    assert str(info.value) == (
        "snapshot.yaml: endpoints[3].backend_config.publicKey: a WireGuard key is 44 base64 characters, not 9"
    )


# 44 characters, base64 of 32 bytes, but the last character carries bits past the 256th: wg's key_from_base64
# refuses it ("Key is not the correct length or format"), so `wg set ... peer KEY` would fail, and with it the
# one `wg set` line that configures every peer.
NON_CANONICAL_KEY = "A" * 42 + "B="


def test_wg_itself_refuses_the_non_canonical_key() -> None:
    """The premise of the next test, checked with the real tool."""
    if shutil.which("wg") is None:
        pytest.skip("needs wireguard-tools' wg")
    done = subprocess.run(["wg", "pubkey"], input=NON_CANONICAL_KEY.encode() + b"\n", capture_output=True, timeout=5)
    assert done.returncode != 0
    ok = subprocess.run(["wg", "pubkey"], input=b"A" * 43 + b"=\n", capture_output=True, timeout=5)
    assert ok.returncode == 0  # the same length with canonical padding bits is accepted


def test_a_key_wg_refuses_is_refused_by_the_snapshot() -> None:
    doc = clusterset_doc()
    endpoint_item(doc, "w-gw1")["backend_config"] = {"publicKey": NON_CANONICAL_KEY}
    with pytest.raises(SnapshotError):
        parse_snapshot(doc, source=SOURCE)
