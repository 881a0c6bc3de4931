"""The route agent keeps its WireGuard device when only the cable changed: a remote gateway's rotated key
changes no kernel object of the plan (the reconciler then applies nothing), yet the device must get the new peer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from magw.daemons.common.cable import CableKeys
from magw.daemons.route_agent.app import RouteAgent
from magw.daemons.route_agent.cable import CableDriver
from magw.daemons.route_agent.node_driver import LazyDriver, fake_driver
from magw.desired.cable.values import WgObserved, WgObservedPeer
from magw.drivers.wireguard.device import EnsureResult
from magw.sources.file.broker import FileBroker
from tests.unit.cable.data import E_GW1_PUB, OTHER_PUB, W_GW1_PUB

DOCS: list[dict[str, Any]] = [
    {"kind": "Config", "cable": "wireguard"},
    {"kind": "Cluster", "id": "east", "pod_cidrs": ["10.1.0.0/16"], "service_cidrs": ["100.1.0.0/16"]},
    {"kind": "Cluster", "id": "west", "pod_cidrs": ["10.2.0.0/16"], "service_cidrs": ["100.2.0.0/16"]},
    {"kind": "Node", "cluster": "east", "name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1", "gateway": True},
    {"kind": "Endpoint", "cluster": "east", "hostname": "e-gw1", "private_ip": "172.18.0.6",
     "backend": "wireguard", "backend_config": {"publicKey": E_GW1_PUB}},
]  # fmt: skip


def _west(key: str) -> dict[str, Any]:
    return {"kind": "Endpoint", "cluster": "west", "hostname": "w-gw1", "private_ip": "172.19.0.4",
            "public_ip": "203.0.113.4", "backend": "wireguard", "backend_config": {"publicKey": key}}  # fmt: skip


class Recorder:
    """The WireGuard driver's stand-in: records each plan it is asked to hold."""

    def __init__(self) -> None:
        self.plans: list[Any] = []

    def ensure(self, plan: Any) -> EnsureResult:
        self.plans.append(plan)
        return EnsureResult((), E_GW1_PUB, "userspace")

    def observe(self) -> WgObserved:
        """The device as the last plan made it, with per-peer counters the metrics read."""
        planned = self.plans[-1].peers
        peers = tuple(WgObservedPeer(public_key=p.public_key, endpoint=None, allowed_ips=(), latest_handshake=0,
                                     rx_bytes=1000 + i, tx_bytes=2000 + i) for i, p in enumerate(planned))  # fmt: skip
        return WgObserved(public_key=E_GW1_PUB, listen_port=4500, peers=peers)


def _write(directory: Path, west_key: str) -> None:
    (directory / "docs.yaml").write_text(yaml.safe_dump_all([*DOCS, _west(west_key)]))


async def test_a_rotated_remote_key_reaches_the_device_though_no_kernel_object_changes(tmp_path: Path) -> None:
    broker_dir, state = tmp_path / "broker", tmp_path / "state"
    broker_dir.mkdir()
    state.mkdir()
    _write(broker_dir, W_GW1_PUB)
    source = FileBroker(broker_dir, local_cluster="east")
    recorder = Recorder()
    made: list[RouteAgent] = []
    cable = CableDriver(
        LazyDriver(fake_driver, what="fake"),
        lambda: recorder,
        lambda: made[0].cable_plan if made else None,
        CableKeys(state),
        recheck=3600,
    )
    agent = RouteAgent(source=source, node="e-gw1", driver=cable, cable=cable, resync_period=3600)
    made.append(agent)
    source.scan()
    first = await agent.reconciler.sync_once(full=True, reasons=("test",))
    assert first.ok and [p.public_key for p in recorder.plans[-1].peers] == [W_GW1_PUB]
    assert cable.transfers == {W_GW1_PUB: (1000, 2000)}  # read after the device was made to hold the plan
    _write(broker_dir, OTHER_PUB)
    source.scan()
    second = await agent.reconciler.sync_once(full=False, reasons=("broker",))
    await agent.reconciler.aclose()
    assert second.applied == ()  # nothing of the kernel's plan changed ...
    assert [p.public_key for p in recorder.plans[-1].peers] == [OTHER_PUB]  # ... the device got the new peer
