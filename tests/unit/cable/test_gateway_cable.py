"""The gateway daemon with ``cable: wireguard``: its Endpoint carries backend wireguard and the public key of
the node's key file (made on first use); with the VXLAN cable neither; a key file it cannot trust is a one-line
reason to publish nothing yet. A file broker directory is the source."""

from __future__ import annotations

import shutil
import subprocess
from ipaddress import IPv4Address
from pathlib import Path

import pytest
import yaml

from magw.daemons.common.cable import CableKeys
from magw.daemons.gateway.app import Gateway, desired_endpoint
from magw.drivers.wireguard import keys
from magw.model import Endpoint
from magw.model.cable import Cable
from magw.sources.file.broker import FileBroker
from tests.support.filebroker_world import populate
from tests.unit.cable.data import E_GW1_PRIV, E_GW1_PUB

pytestmark = pytest.mark.skipif(shutil.which("wg") is None, reason="needs wireguard-tools' wg")

WIREGUARD = "kind: Config\ncable: wireguard\nwireguard_port: 51999\n"
VXLAN = "kind: Config\ncable: vxlan\n"


def broker(directory: Path, config: str) -> FileBroker:
    directory.mkdir()
    populate(directory, config=config)  # east: gateway e-gw1 (172.18.0.6), worker e-w1; west: w-gw1
    source = FileBroker(directory, local_cluster="east")
    source.scan()
    assert source.snapshot is not None
    return source


def state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    return state


def wg_pubkey(private: bytes) -> str:
    done = subprocess.run(["wg", "pubkey"], input=private, capture_output=True, check=True, timeout=5)
    return done.stdout.decode().strip()


def test_cable_wireguard_publishes_the_nodes_public_key(tmp_path: Path) -> None:
    source, state = broker(tmp_path / "broker", WIREGUARD), state_dir(tmp_path)
    want = desired_endpoint(source, "e-gw1", None, None, CableKeys(state))
    assert isinstance(want, Endpoint)
    key_file = keys.key_path(state)
    assert key_file.exists()  # made on first use
    assert want.backend is Cable.WIREGUARD
    assert want.public_key == wg_pubkey(key_file.read_bytes())
    assert (want.cluster, want.hostname, want.private_ip) == ("east", "e-gw1", IPv4Address("172.18.0.6"))
    assert want.cable_ready(Cable.WIREGUARD)


def test_an_existing_key_is_used_as_it_is(tmp_path: Path) -> None:
    source, state = broker(tmp_path / "broker", WIREGUARD), state_dir(tmp_path)
    (state / "wireguard").mkdir(mode=0o700)
    keys.key_path(state).write_text(E_GW1_PRIV + "\n")
    keys.key_path(state).chmod(0o600)
    want = desired_endpoint(source, "e-gw1", None, None, CableKeys(state))
    assert isinstance(want, Endpoint) and want.public_key == E_GW1_PUB


def test_cable_vxlan_publishes_no_key(tmp_path: Path) -> None:
    source, state = broker(tmp_path / "broker", VXLAN), state_dir(tmp_path)
    want = desired_endpoint(source, "e-gw1", None, None, CableKeys(state))
    assert isinstance(want, Endpoint)
    assert (want.backend, want.public_key) == (Cable.VXLAN, None)
    assert not (state / "wireguard").exists()  # no key is made for the VXLAN cable


def test_an_exposed_key_file_is_a_one_line_reason(tmp_path: Path) -> None:
    source, state = broker(tmp_path / "broker", WIREGUARD), state_dir(tmp_path)
    (state / "wireguard").mkdir(mode=0o700)
    keys.key_path(state).write_text(E_GW1_PRIV + "\n")
    keys.key_path(state).chmod(0o644)
    want = desired_endpoint(source, "e-gw1", None, None, CableKeys(state))
    assert isinstance(want, str)
    assert want.startswith(f"cable wireguard: {keys.key_path(state)}: mode 0644 ")
    assert "\n" not in want and E_GW1_PRIV not in want


def test_a_missing_state_dir_is_a_one_line_reason(tmp_path: Path) -> None:
    source = broker(tmp_path / "broker", WIREGUARD)
    want = desired_endpoint(source, "e-gw1", None, None, CableKeys(tmp_path / "missing"))
    assert want == f"cable wireguard: {tmp_path / 'missing'}: the state directory does not exist"


def test_no_key_directory_at_all_is_a_reason(tmp_path: Path) -> None:
    source = broker(tmp_path / "broker", WIREGUARD)
    want = desired_endpoint(source, "e-gw1", None, None, None)
    assert want == "cable wireguard, but this gateway has no key directory (--state-dir)"


def test_a_worker_is_no_gateway_whatever_the_cable(tmp_path: Path) -> None:
    source, state = broker(tmp_path / "broker", WIREGUARD), state_dir(tmp_path)
    assert (
        desired_endpoint(source, "e-w1", None, None, CableKeys(state)) == "Node e-w1 is not a gateway (gateway: false)"
    )
    assert not (state / "wireguard").exists()


def read_endpoint(directory: Path) -> dict[str, object]:
    return dict(yaml.safe_load((directory / "endpoint-east@e-gw1.yaml").read_text()))


def test_the_gateway_publishes_the_key_and_republishes_it_after_a_rotation(tmp_path: Path) -> None:
    directory, state = tmp_path / "broker", state_dir(tmp_path)
    source = broker(directory, WIREGUARD)
    cable_keys = CableKeys(state)
    Gateway(source=source, node="e-gw1", resync_period=60, cable_keys=cable_keys).ensure("test")
    doc = read_endpoint(directory)
    first = wg_pubkey(keys.key_path(state).read_bytes())
    assert doc["backend"] == "wireguard"
    assert doc["backend_config"] == {"publicKey": first}
    assert keys.key_path(state).read_text().strip() not in (directory / "endpoint-east@e-gw1.yaml").read_text()
    assert not cable_keys.changed()
    keys.rotate(state)
    assert cable_keys.changed()  # what the serve loop checks to publish at once
    Gateway(source=source, node="e-gw1", resync_period=60, cable_keys=cable_keys).ensure("key")
    second = read_endpoint(directory)["backend_config"]
    assert second == {"publicKey": wg_pubkey(keys.key_path(state).read_bytes())} and second != {"publicKey": first}
    assert not cable_keys.changed()
