"""A binding that would put two Services on one port of a VIP is refused (409 kind, one line, nothing changed,
nothing written); a conflict that exists anyway (objects edited by hand) is in the VIP's status, as the line
the planner uses, and leaves it when the conflict goes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from magw.controllers.egressgw import ops
from magw.controllers.egressgw.controller import EgressController
from magw.model.egressgw import EgressBinding, EgressGateway
from magw.sources import FileBroker
from magw.sources.file.egressgw_store import EgressStore
from tests.unit.controllers.port_conflict_world import CLASH, files, make_broker, vip_text

REFUSAL = (
    "port 8080/tcp of VIP a would lead to both blog/feed and blog/web: a VIP's port leads to one Service "
    "(give one of them a VIP of its own)"
)


def _controller(directory: Path) -> EgressController:
    return EgressController(source=FileBroker(directory, local_cluster="east"), store=EgressStore(directory, "east"))


def _bindings(egress: EgressGateway, name: str) -> tuple[EgressBinding, ...]:
    vip = egress.vip(name)
    assert vip is not None
    return vip.bindings


def _status(directory: Path, name: str) -> dict[str, object]:
    loaded = yaml.safe_load((directory / f"egress-status@east@{name}.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_binding_a_namespace_whose_services_share_a_port_is_refused(tmp_path: Path) -> None:
    """ops.bind: namespace blog (web and feed on 8080) to one VIP is a conflict; the egress is unchanged."""
    snapshot = _controller(make_broker(tmp_path)).fresh()
    before = copy.deepcopy(snapshot.egressgw)
    with pytest.raises(ops.EgressOpError) as info:
        ops.bind(snapshot.egressgw, snapshot.globalnet, "a", "blog")
    assert (info.value.kind, str(info.value)) == (ops.ErrorKind.CONFLICT, REFUSAL)
    assert snapshot.egressgw == before


def test_binds_that_add_no_clash_pass(tmp_path: Path) -> None:
    """Services on other ports, a Service of its own VIP, and a Service joining a VIP whose clash was already
    there (made by hand) are all accepted: only a new clash is refused."""
    snapshot = _controller(make_broker(tmp_path, a_bindings="[{namespace: blog}]")).fresh()
    egress, work = snapshot.egressgw, snapshot.globalnet
    assert _bindings(ops.bind(egress, work, "b", "shop"), "b") == (EgressBinding("shop"),)
    joined = ops.bind(egress, work, "a", "blog", "web")  # recorded, no change of traffic: the clash stays as it was
    assert EgressBinding("blog", "web") in _bindings(joined, "a")
    moved = ops.bind(egress, work, "b", "blog", "web")  # web leaves the shared VIP: the clash goes
    assert ops.clashes(moved, work) == () and len(ops.clashes(egress, work)) == 1


def test_the_controller_refuses_and_writes_nothing(tmp_path: Path) -> None:
    """change_binding raises the conflict and every file of the broker stays byte-identical."""
    d = make_broker(tmp_path)
    ctl = _controller(d)
    ctl.reconcile()
    before = files(d)
    with pytest.raises(ops.EgressOpError, match="would lead to both blog/feed and blog/web"):
        ctl.change_binding("bind", "a", "blog")
    assert files(d) == before


def test_a_conflict_made_by_hand_is_in_the_vips_status_until_it_goes(tmp_path: Path) -> None:
    """A VIP file edited to bind namespace blog: its status names the clash; the other VIP's has none (and no
    ``conflicts`` key, as before); once web has a VIP of its own the clash leaves the status."""
    d = make_broker(tmp_path, a_bindings="[{namespace: blog}]")
    ctl = _controller(d)
    ctl.reconcile()
    assert _status(d, "a")["conflicts"] == [CLASH]
    assert _status(d, "a")["services"] == ["blog/api", "blog/feed", "blog/web"]
    assert "conflicts" not in _status(d, "b")
    (d / "vip-b.yaml").write_text(vip_text("b", 11, "[{namespace: blog, service: web}]"))
    ctl.reconcile()
    assert "conflicts" not in _status(d, "a") and _status(d, "a")["services"] == ["blog/api", "blog/feed"]
