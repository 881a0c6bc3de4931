"""The route agent's ``CableDriver``: the WireGuard device is ensured on every observe, on apply only when the
plan or the key file changed (or ``recheck`` passed); a failure is logged once, retried at the next sync, shown
in the status, and never stops the node's own changes. The WireGuard driver is a recording stand-in that reads
the real key file (magw.drivers.wireguard.keys) as the real one does."""

from __future__ import annotations

import argparse
import json
import shutil
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from magw.daemons.common.cable import CableKeys
from magw.daemons.route_agent import cable as cable_module
from magw.daemons.route_agent.cable import CableDriver, cable_driver
from magw.desired.cable.values import WgDevice, WgPeer
from magw.desired.state import DesiredState
from magw.drivers.wireguard import keys
from magw.drivers.wireguard.device import EnsureResult
from magw.drivers.wireguard.tool import WgError
from magw.reconcile.changeset import ChangeSet
from magw.reconcile.driver import ApplyResult
from tests.unit.cable.data import S_GW1_PUB, W_GW1_PUB

pytestmark = pytest.mark.skipif(shutil.which("wg") is None, reason="needs wireguard-tools' wg")

PEER_W = WgPeer(
    public_key=W_GW1_PUB,
    owner="west/w-gw1",
    endpoint=IPv4Address("203.0.113.4"),
    port=51820,
    allowed_ips=(IPv4Network("242.19.0.4/32"),),
)
PEER_S = WgPeer(
    public_key=S_GW1_PUB,
    owner="south/s-gw1",
    endpoint=IPv4Address("192.0.2.9"),
    port=51820,
    allowed_ips=(IPv4Network("242.20.3.9/32"),),
)
PLAN_A = WgDevice(
    name="magw-wg", listen_port=51820, mtu=1440, address=IPv4Interface("242.18.0.6/8"), peers=(PEER_W, PEER_S)
)
PLAN_B = WgDevice(name="magw-wg", listen_port=51820, mtu=1440, address=IPv4Interface("242.18.0.6/8"), peers=(PEER_W,))
OBSERVED = DesiredState()


class FakeWireGuard:
    """Records each ``ensure``; raises ``fail`` when set; otherwise reads the key file like the real driver."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.calls: list[WgDevice | None] = []
        self.fail: Exception | None = None

    def ensure(self, plan: WgDevice | None) -> EnsureResult:
        self.calls.append(plan)
        if self.fail is not None:
            raise self.fail
        if plan is None:
            return EnsureResult((), None, None)
        key, _ = keys.ensure_private_key(self.state_dir)
        return EnsureResult(("device created (userspace)",), keys.public_key(key), "userspace")

    def observe(self) -> None:
        """No device to read counters from (the counters' reading: tests/unit/daemons/test_route_agent_cable.py)."""
        return None


class StubInner:
    def __init__(self) -> None:
        self.applied: list[ChangeSet] = []
        self.observed = 0

    def observe(self) -> DesiredState:
        self.observed += 1
        return OBSERVED

    def apply(self, changes: ChangeSet) -> ApplyResult:
        self.applied.append(changes)
        return ApplyResult()


class World:
    """A CableDriver over the stand-ins. The key file is made first, as the gateway daemon of the node does
    (a key made by the first ensure changes the key file's identity the driver compares: one more ensure)."""

    def __init__(self, state: Path, recheck: float = 3600.0, *, make_key: bool = True) -> None:
        self.state = state
        if make_key:
            keys.ensure_private_key(state)
        self.plan: WgDevice | None = PLAN_A
        self.fake = FakeWireGuard(state)
        self.inner = StubInner()
        self.built = 0
        self.driver = CableDriver(self.inner, self.factory, lambda: self.plan, CableKeys(state), recheck=recheck)

    def factory(self) -> FakeWireGuard:
        self.built += 1
        return self.fake

    def apply(self, times: int = 1) -> None:
        for _ in range(times):
            assert self.driver.apply(ChangeSet()) == ApplyResult()


def private_text(state: Path) -> str:
    return keys.key_path(state).read_text().strip()


def test_observe_always_ensures(tmp_path: Path) -> None:
    w = World(tmp_path)
    for _ in range(3):
        assert w.driver.observe() is OBSERVED
    assert w.fake.calls == [PLAN_A, PLAN_A, PLAN_A]
    assert w.inner.observed == 3


def test_apply_ensures_once_per_plan(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.apply(3)
    assert w.fake.calls == [PLAN_A]
    assert len(w.inner.applied) == 3  # the node's own changes go through every time


def test_apply_after_observe_of_the_same_plan_does_not_ensure_again(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.driver.observe()
    w.apply(2)
    assert w.fake.calls == [PLAN_A]


def test_a_new_plan_is_ensured_once(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.apply()
    w.plan = PLAN_B
    w.apply(2)
    w.plan = PLAN_A
    w.apply()
    assert w.fake.calls == [PLAN_A, PLAN_B, PLAN_A]


def test_a_plan_of_none_is_ensured_once(tmp_path: Path) -> None:
    """A worker, or the VXLAN cable: ensure(None) removes a device of ours, once."""
    w = World(tmp_path, make_key=False)
    w.plan = None
    w.apply(3)
    assert w.fake.calls == [None]
    assert not keys.key_path(tmp_path).exists()  # no key is made for no device


def test_a_rotated_key_is_ensured_again(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.apply()
    w.apply()
    assert w.fake.calls == [PLAN_A]
    first_public = w.driver.public_key
    keys.rotate(tmp_path)
    w.apply(2)
    assert w.fake.calls == [PLAN_A, PLAN_A]
    assert w.driver.public_key is not None and w.driver.public_key != first_public


def test_recheck_ensures_again_after_its_period(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(cable_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    w = World(tmp_path, recheck=30.0)
    w.apply()
    now[0] = 1029.0
    w.apply()
    assert len(w.fake.calls) == 1
    now[0] = 1030.0
    w.apply()
    assert len(w.fake.calls) == 2
    now[0] = 1059.0
    w.apply()
    assert len(w.fake.calls) == 2


def test_failures_are_logged_once_retried_and_recovered(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.fake.fail = WgError("wg set magw-wg: Unable to modify interface: Operation not permitted")
    with capture_logs() as logs:
        w.apply(3)
    assert w.fake.calls == [PLAN_A, PLAN_A, PLAN_A]  # retried at each sync
    assert len(w.inner.applied) == 3  # the rest of the plan is applied anyway
    assert [(e["event"], e["error"], e["log_level"]) for e in logs] == [
        ("route_agent.cable_failed", "wg set magw-wg: Unable to modify interface: Operation not permitted", "error")
    ]
    status = w.driver.status_json()
    assert status is not None
    assert status["error"] == "wg set magw-wg: Unable to modify interface: Operation not permitted"

    w.fake.fail = WgError("wg show magw-wg: no answer in 5 s")  # another reason: logged too
    with capture_logs() as logs:
        w.apply(2)
    assert [e["error"] for e in logs if e["event"] == "route_agent.cable_failed"] == [
        "wg show magw-wg: no answer in 5 s"
    ]

    w.fake.fail = None
    with capture_logs() as logs:
        w.apply(2)
    assert [e["event"] for e in logs] == ["route_agent.cable_recovered"]
    assert len(w.fake.calls) == 6  # 3 + 2 failures, 1 success, then nothing new
    status = w.driver.status_json()
    assert status is not None and status["error"] is None and status["backend"] == "userspace"


def test_an_exposed_key_file_fails_without_leaking_the_key(tmp_path: Path) -> None:
    key, _ = keys.ensure_private_key(tmp_path)
    key.path.chmod(0o644)
    secret = private_text(tmp_path)
    w = World(tmp_path, make_key=False)
    with capture_logs() as logs:
        w.apply(2)
    status = w.driver.status_json()
    assert status is not None and status["error"] is not None
    assert "mode 0644" in status["error"]
    assert len([e for e in logs if e["event"] == "route_agent.cable_failed"]) == 1
    assert secret not in json.dumps(status) and secret not in repr(logs)
    key.path.chmod(0o600)
    w.apply()
    status = w.driver.status_json()
    assert status is not None and status["error"] is None
    assert status["public_key"] == keys.public_key(key)
    assert secret not in json.dumps(status)


def test_status_json_describes_the_device(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.apply()
    status = w.driver.status_json()
    key = keys.current_key(tmp_path)
    assert key is not None
    assert status == {
        "type": "wireguard",
        "device": "magw-wg",
        "backend": "userspace",
        "public_key": keys.public_key(key),
        "peers": ["south/s-gw1", "west/w-gw1"],  # in the plan's order: by public key, "0dsO..." < "OVic..."
        "error": None,
    }
    assert private_text(tmp_path) not in json.dumps(status)


def test_status_json_is_none_without_a_plan_or_an_error(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.plan = None
    w.apply()
    assert w.driver.status_json() is None
    w.fake.fail = WgError("magw-wg: a device of that name exists; refusing")
    w.driver.observe()
    assert w.driver.status_json() == {
        "type": "wireguard",
        "device": None,
        "backend": None,
        "public_key": None,
        "peers": [],
        "error": "magw-wg: a device of that name exists; refusing",
    }


def test_cable_driver_is_the_inner_driver_with_fake(tmp_path: Path) -> None:
    inner = StubInner()
    args = argparse.Namespace(fake=True, state_dir=str(tmp_path), wireguard_backend="auto", resync_period=30.0)
    assert cable_driver(args, inner, lambda: None) is inner  # type: ignore[arg-type]


def test_cable_driver_builds_no_wireguard_driver_before_use(tmp_path: Path) -> None:
    inner = StubInner()
    args = argparse.Namespace(fake=False, state_dir=str(tmp_path), wireguard_backend="auto", resync_period=12.5)
    driver: Any = cable_driver(args, inner, lambda: None)  # type: ignore[arg-type]
    assert isinstance(driver, CableDriver)
    assert driver.recheck == 12.5 and driver.inner is inner
    assert driver.keys.state_dir == tmp_path
    assert driver.status_json() is None
