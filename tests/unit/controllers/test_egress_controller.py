"""The egress controller over a real broker directory: statuses written from the bindings, holder reports,
bind/unbind/rebind written back to the VIP's own file, stale statuses deleted, and every refusal leaves every
file byte-identical. Expected statuses are written out by hand, not computed by the code under test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from magw.controllers.egressgw import ops
from magw.controllers.egressgw.controller import EgressController, rfc3339
from magw.sources import FileBroker
from magw.sources.file.egressgw_store import EgressStore, StoreRefused
from tests.support.broker_docs import BrokerDocuments, egress_vip, files


def _status(directory: Path, name: str) -> dict[str, object]:
    loaded = yaml.safe_load((directory / f"egress-status@east@{name}.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture
def world(tmp_path: Path, broker_documents: BrokerDocuments) -> tuple[Path, EgressController]:
    (tmp_path / "base.yaml").write_text(broker_documents("egress-east.yaml"))
    (tmp_path / "vip-a.yaml").write_text(egress_vip("a", 10, "[{namespace: shop}]"))
    (tmp_path / "vip-b.yaml").write_text(egress_vip("b", 11))
    broker = FileBroker(tmp_path, local_cluster="east")
    ctl = EgressController(source=broker, store=EgressStore(tmp_path, "east"), clock=lambda: 1_700_000_000.0)
    return tmp_path, ctl


def test_a_pass_writes_each_vips_status_once(world: tuple[Path, EgressController]) -> None:
    d, ctl = world
    assert ctl.reconcile().written == 2
    assert _status(d, "a") == {
        "kind": "EgressVIPStatus",
        "cluster": "east",
        "name": "a",
        "holder": "",
        "since": "",
        "services": ["shop/db", "shop/web"],
    }
    assert _status(d, "b")["services"] == []
    before = files(d)
    assert ctl.reconcile().written == 0 and files(d) == before  # level-driven: nothing to do


def test_bind_unbind_and_rebind_at_runtime_shared_and_exclusive(world: tuple[Path, EgressController]) -> None:
    d, ctl = world
    ctl.reconcile()
    answer = ctl.change_binding("bind", "192.0.2.11", "shop", "web")  # exclusive, by address
    assert answer.status.services == ("shop/web",)
    assert yaml.safe_load((d / "vip-b.yaml").read_text())["bindings"] == [{"namespace": "shop", "service": "web"}]
    assert _status(d, "a")["services"] == ["shop/db"]  # the exclusive VIP wins over the namespace's
    ctl.change_binding("unbind", "b", "shop", "web")
    assert _status(d, "a")["services"] == ["shop/db", "shop/web"] and _status(d, "b")["services"] == []
    ctl.change_binding("bind", "a", "shop", "db")  # joins the shared VIP
    with pytest.raises(ops.EgressOpError, match="still used by services shop/db: unbind them first"):
        ctl.change_binding("unbind", "a", "shop")
    ctl.change_binding("unbind", "a", "shop", "db")
    ctl.change_binding("unbind", "a", "shop")
    ctl.change_binding("bind", "b", "shop")  # rebind the namespace to another VIP
    assert _status(d, "a")["services"] == [] and _status(d, "b")["services"] == ["shop/db", "shop/web"]
    assert yaml.safe_load((d / "vip-a.yaml").read_text())["bindings"] == []


def test_holder_reports_write_holder_and_since(world: tuple[Path, EgressController]) -> None:
    d, ctl = world
    ctl.reconcile()
    ctl.report(ops.HolderReport(vip="a", node="n2"))
    assert (_status(d, "a")["holder"], _status(d, "a")["since"]) == ("n2", "2023-11-14T22:13:20.000000Z")
    assert rfc3339(1_700_000_000.0) == "2023-11-14T22:13:20.000000Z"
    ctl.report(ops.HolderReport(vip="a", node="n2", state=ops.VrrpState.FAULT))
    assert _status(d, "a")["holder"] == "" and _status(d, "a")["services"] == ["shop/db", "shop/web"]


def test_the_status_of_a_deleted_vip_is_removed(world: tuple[Path, EgressController]) -> None:
    d, ctl = world
    ctl.reconcile()
    (d / "vip-b.yaml").unlink()
    assert ctl.reconcile().deleted == 1
    assert not (d / "egress-status@east@b.yaml").exists() and (d / "egress-status@east@a.yaml").exists()


def test_a_vip_written_without_a_file_of_its_own_is_refused_and_nothing_changes(
    tmp_path: Path, broker_documents: BrokerDocuments
) -> None:
    (tmp_path / "base.yaml").write_text(broker_documents("egress-east.yaml") + "---\n" + egress_vip("a", 10))
    ctl = EgressController(source=FileBroker(tmp_path, local_cluster="east"), store=EgressStore(tmp_path, "east"))
    ctl.reconcile()
    before = files(tmp_path)
    with pytest.raises(StoreRefused, match=r"^VIP a is defined in base.yaml together with 9 other document\(s\)"):
        ctl.change_binding("bind", "a", "shop")
    assert files(tmp_path) == before


REFUSALS: list[tuple[str, Callable[[EgressController], object], str]] = [
    ("bound-twice", lambda c: c.change_binding("bind", "a", "shop"), "already bound to this VIP"),
    ("unknown-namespace", lambda c: c.change_binding("bind", "b", "nope"), "namespace nope does not exist"),
    ("unknown-service", lambda c: c.change_binding("bind", "b", "shop", "x"), "service shop/x does not exist"),
    ("outside", lambda c: c.change_binding("bind", "10.0.0.1", "shop"), "outside the egress VIP ranges"),
    ("not-bound", lambda c: c.change_binding("unbind", "b", "shop"), "namespace shop is not bound to VIP b"),
    ("unknown-vip", lambda c: c.notify("zz"), "no EgressVIP named 'zz'"),
    ("non-candidate", lambda c: c.report(ops.HolderReport(vip="a", node="n3")), "node n3 is not a candidate"),
    ("bad-action", lambda c: c.change_binding("rebind", "a", "shop"), "'rebind' is not bind, unbind or notify"),
]


@pytest.mark.parametrize(("call", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_refused_operation_leaves_every_file_byte_identical(
    world: tuple[Path, EgressController], call: Callable[[EgressController], object], message: str
) -> None:
    d, ctl = world
    ctl.reconcile()
    before = files(d)
    with pytest.raises(ops.EgressOpError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(ctl)
    assert files(d) == before


def test_notify_writes_a_status_the_broker_lost(world: tuple[Path, EgressController]) -> None:
    d, ctl = world
    ctl.reconcile()
    (d / "egress-status@east@a.yaml").unlink()
    assert ctl.notify("192.0.2.10").status.services == ("shop/db", "shop/web")
    assert _status(d, "a")["services"] == ["shop/db", "shop/web"]
