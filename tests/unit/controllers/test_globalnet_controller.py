"""The Globalnet controller against a real broker directory: restarts rebuild from the broker, repeated events
allocate once, unreadable statuses block allocation, transient write errors are retried, and a hypothesis
state machine over every kind with restarts and gateway churn keeps the invariants (read back from the files
as plain YAML, not through the controller)."""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from magw.controllers.globalnet.controller import GlobalnetController, LeaseLost
from magw.sources.file.broker import FileBroker
from magw.sources.file.globalnet_store import GlobalnetStore
from tests.support.globalnet_broker import (
    Clock,
    check_files,
    controller,
    converge,
    gateway,
    make_broker,
    put,
    remove,
    statuses,
)


def test_allocates_writes_and_restart_keeps_addresses(tmp_path: Path) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    put(d, "e1", "GlobalEgressIP", {"namespace": "ns", "name": "e1", "numberOfIPs": 2})
    converge(controller(d))
    first = statuses(d)
    assert first[("GlobalEgressIP", "ns", "e1")]["allocatedIPs"] == ["242.1.0.9", "242.1.0.10"]
    assert first[("ClusterGlobalEgressIP", "", "gw1-cluster-egress.submariner.io")]["allocatedIPs"][0] == "242.1.0.1"
    # a new controller (memory dropped) with a new object that sorts first: nothing moves
    put(d, "a0", "GlobalEgressIP", {"namespace": "a", "name": "a0", "numberOfIPs": 3})
    converge(controller(d))
    again = statuses(d)
    assert again[("GlobalEgressIP", "ns", "e1")] == first[("GlobalEgressIP", "ns", "e1")], "status not rewritten"
    assert again[("GlobalEgressIP", "a", "a0")]["allocatedIPs"] == ["242.1.0.11", "242.1.0.12", "242.1.0.13"]
    check_files(d)


def test_an_object_seen_twice_before_its_status_is_visible_is_allocated_once(tmp_path: Path) -> None:
    """The broker's read does not show our first write (simulated: the file is hidden after writing); the
    second pass must not allocate again (Submariner #4122)."""
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    put(d, "e1", "GlobalEgressIP", {"namespace": "ns", "name": "e1", "numberOfIPs": 1})
    ctl = controller(d)
    ctl.reconcile()
    status_path = ctl.store.status_path(
        __import__("magw.model.globalnet", fromlist=["ObjectRef"]).ObjectRef("GlobalEgressIP", "ns", "e1")
    )
    hidden = tmp_path.parent / f"{tmp_path.name}-hidden.yaml"
    shutil.move(status_path, hidden)  # the next read does not see it yet
    result = ctl.reconcile()
    assert result.plan is not None
    st_ = result.plan.statuses
    ips = [s.allocated_ips for r, s in st_.items() if r.name == "e1"]
    assert [str(a) for a in ips[0]] == ["242.1.0.9"], "the same address, from the overlay"
    assert result.plan.pool_used == 9


def test_unreadable_status_blocks_allocation_and_never_reallocates(tmp_path: Path) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    put(d, "e1", "GlobalEgressIP", {"namespace": "ns", "name": "e1", "numberOfIPs": 1})
    converge(controller(d))
    before = statuses(d)
    path = next(d.glob("globalnet-status@east@GlobalEgressIP@ns@e1.yaml"))
    good = path.read_text()
    path.write_text("kind: GlobalnetStatus\ncluster: east\nobject: [broken\n")
    put(d, "e2", "GlobalEgressIP", {"namespace": "ns", "name": "e2", "numberOfIPs": 1})
    ctl = controller(d)  # a restart: no last good version of the broken file in memory
    result = ctl.reconcile()
    assert result.waiting >= 1
    assert ("GlobalEgressIP", "ns", "e2") not in statuses(d), "nothing new while a status cannot be read"
    assert path.read_text().startswith("kind: GlobalnetStatus\ncluster: east\nobject: [broken"), "not re-allocated"
    path.write_text(good)
    converge(ctl)
    after = statuses(d)
    assert after[("GlobalEgressIP", "ns", "e1")] == before[("GlobalEgressIP", "ns", "e1")]
    assert after[("GlobalEgressIP", "ns", "e2")]["allocatedIPs"] == ["242.1.0.10"]
    check_files(d)


def test_a_transient_write_error_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    ctl = controller(d)
    real = ctl.store.write_status
    failures = iter([OSError(28, "No space left on device")])

    def flaky(ref, status):  # type: ignore[no-untyped-def]
        err = next(failures, None)
        if err is not None:
            raise err
        real(ref, status)

    monkeypatch.setattr(ctl.store, "write_status", flaky)
    with pytest.raises(OSError):
        ctl.reconcile()
    converge(ctl)  # the daemon's retry: the next pass completes
    assert ("ClusterGlobalEgressIP", "", "gw1-cluster-egress.submariner.io") in statuses(d)


def test_no_write_without_the_lease(tmp_path: Path) -> None:
    d = make_broker(tmp_path)
    gateway(d, "gw1", 6)
    ctl = GlobalnetController(
        source=FileBroker(d, local_cluster="east"),
        store=GlobalnetStore(d, "east"),
        grace=timedelta(seconds=300),
        may_write=lambda: False,
    )
    with pytest.raises(LeaseLost):
        ctl.reconcile()
    assert statuses(d) == {}


NAMES = st.sampled_from(["a", "b", "c"])


class ControllerMachine(RuleBasedStateMachine):
    """Random changes of every kind, gateway churn, time passing and restarts, on a real directory."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = make_broker(Path(tempfile.mkdtemp(prefix="magw-gn-")), cidr="242.1.0.0/26")
        self.clock = Clock()
        self.ctl = controller(self.dir, self.clock)
        self.gateways = {"gw1"}
        gateway(self.dir, "gw1", 6)
        self.seen: dict[tuple[str, str, str], list[str]] = {}
        converge(self.ctl)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def step(self) -> None:
        converge(self.ctl)

    @rule(name=NAMES, n=st.integers(-1, 3), selector=st.sampled_from([None, "x", "bad"]))
    def put_egress(self, name: str, n: int, selector: str | None) -> None:
        fields: dict[str, object] = {"namespace": "ns", "name": f"e{name}", "numberOfIPs": n}
        if selector == "x":
            fields["podSelector"] = {"matchLabels": {"app": "x"}}
        elif selector == "bad":
            fields["podSelector"] = {"matchExpressions": [{"key": "k", "operator": "Maybe"}]}
        put(self.dir, f"e{name}", "GlobalEgressIP", fields)
        self.step()

    @rule(name=NAMES)
    def delete_egress(self, name: str) -> None:
        remove(self.dir, f"e{name}")
        self.step()

    @rule(n=st.integers(0, 4))
    def template(self, n: int) -> None:
        put(self.dir, "tpl", "ClusterGlobalEgressIP", {"name": "cluster-egress.submariner.io", "numberOfIPs": n})
        self.step()

    @rule(name=NAMES, headless=st.booleans(), exported=st.booleans(), last=st.integers(2, 5))
    def service(self, name: str, headless: bool, exported: bool, last: int) -> None:
        svc: dict[str, object] = {"namespace": "ns", "name": f"s{name}"}
        if headless:
            svc.update(cluster_ip="None", selector={"app": "x"})
        else:
            svc["cluster_ip"] = f"100.1.0.{last}"
        put(self.dir, f"svc-{name}", "Service", svc)
        if exported:
            put(self.dir, f"exp-{name}", "ServiceExport", {"namespace": "ns", "name": f"s{name}"})
        else:
            remove(self.dir, f"exp-{name}")
        self.step()

    @rule(name=NAMES, last=st.integers(2, 9), present=st.booleans())
    def pod(self, name: str, last: int, present: bool) -> None:
        if present:
            put(
                self.dir,
                f"pod-{name}",
                "Pod",
                {"namespace": "ns", "name": f"p{name}", "ip": f"10.1.0.{last}", "labels": {"app": "x"}},
            )
        else:
            remove(self.dir, f"pod-{name}")
        self.step()

    @rule(node=st.sampled_from(["gw1", "gw2", "gw3"]))
    def toggle_gateway(self, node: str) -> None:
        present = node not in self.gateways
        self.gateways ^= {node}
        gateway(self.dir, node, {"gw1": 6, "gw2": 7, "gw3": 8}[node], present)
        self.step()

    @rule(seconds=st.sampled_from([5, 200, 400]))
    def time_passes(self, seconds: int) -> None:
        self.clock.now += seconds
        self.step()

    @rule()
    def restart(self) -> None:
        self.ctl = controller(self.dir, self.clock)
        self.step()

    @invariant()
    def files_hold(self) -> None:
        check_files(self.dir, "242.1.0.0/26")

    @precondition(lambda self: True)
    @invariant()
    def live_addresses_never_change(self) -> None:
        current = {}
        for key, doc in statuses(self.dir).items():
            ips = doc.get("allocatedIPs") or ([doc["allocatedIP"]] if doc.get("allocatedIP") else [])
            for block in doc.get("gateways") or [{"node": "", "allocatedIPs": ips}]:
                current[(key, block["node"])] = (block.get("allocatedIPs") or [], self._count(key))
        for k, (ips, count) in current.items():
            old = self.seen.get(k)
            if old is not None and old[1] == count == len(old[0]) and ips:
                assert ips == old[0], f"{k}: {old[0]} -> {ips}"
        self.seen = current  # type: ignore[assignment]

    def _count(self, key: tuple[str, str, str]) -> int:
        import yaml

        for path in self.dir.glob("user-*.yaml"):
            doc = yaml.safe_load(path.read_text())
            if (doc["kind"], doc.get("namespace", ""), doc["name"]) == key:
                return int(doc.get("numberOfIPs", 1))
        tpl = self.dir / "user-tpl.yaml"
        if key[0] == "ClusterGlobalEgressIP" and tpl.exists():
            return int(yaml.safe_load(tpl.read_text())["numberOfIPs"])
        return 1 if key[0] == "GlobalIngressIP" else 8


ControllerMachine.TestCase.settings = settings(max_examples=12, stateful_step_count=15, deadline=None)
test_controller_state_machine = ControllerMachine.TestCase
