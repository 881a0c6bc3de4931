"""KubeEgressView: the controller's own writes over the Kubernetes source's snapshot, until the source has seen
them (by resourceVersion) or they are too old; the precondition of the next binding change is our own last
write while the source lags. A stub source and store: no API server needed."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

import attrs

from magw.model import Snapshot
from magw.model.egressgw import EgressBinding, EgressGateway, EgressVIP, EgressVIPStatus
from magw.sources.kube.egressgw_store import Written
from magw.sources.kube.egressgw_view import KubeEgressView, overlay

NS = "submariner-operator"


def _vip(bindings: tuple[EgressBinding, ...] = ()) -> EgressVIP:
    return EgressVIP(name="c", vip=IPv4Address("192.0.2.12"), vrid=12, candidates=("n1",), bindings=bindings)


@attrs.define
class _Source:
    snapshot: Snapshot | None
    rv: str
    namespace: str = NS
    local_cluster: str = "east"

    def objects(self, kind: str) -> dict[tuple[str, str], Any]:
        assert kind == "EgressVIP"
        return {(NS, "c"): {"metadata": {"name": "c", "resourceVersion": self.rv}}}


@attrs.define
class _Store:
    written: dict[str, Written] = attrs.Factory(dict)


def _snapshot(egress: EgressGateway) -> Snapshot:
    return Snapshot(local_cluster="east", clusters=(), nodes=(), endpoints=(), egressgw=egress)


def _view(rv: str, now: list[float]) -> tuple[KubeEgressView, _Source, _Store]:
    snapshot = _snapshot(EgressGateway(vips=(_vip(),), statuses=(("c", EgressVIPStatus(holder="n1")),)))
    source, store = _Source(snapshot, rv), _Store()
    return KubeEgressView(source, store, hold=10.0, clock=lambda: now[0]), source, store  # type: ignore[arg-type]


def test_own_writes_show_until_the_source_has_seen_their_version() -> None:
    now = [100.0]
    view, source, store = _view("5", now)
    blog = (EgressBinding("blog"),)
    store.written["c"] = Written(
        vip=_vip(blog), status=EgressVIPStatus(services=("blog/api",)), resource_version="7", at=100.0
    )
    snap = view.snapshot
    assert snap is not None and snap.egressgw.vip("c") == _vip(blog)
    assert snap.egressgw.status_of("c") == EgressVIPStatus(services=("blog/api",))
    assert view.seen("c") == "7"  # our own write is the version to patch on, not the source's stale 5
    source.rv = "7"
    snap = view.snapshot
    assert snap is not None and snap.egressgw.vip("c") == _vip() and store.written == {}  # the source's word again
    assert view.seen("c") == "7"


def test_an_old_write_the_watch_never_brought_gives_way_and_a_deleted_status_is_hidden() -> None:
    now = [100.0]
    view, _source, store = _view("5", now)
    store.written["c"] = Written(status_deleted=True, resource_version="6", at=100.0)
    snap = view.snapshot
    assert snap is not None and snap.egressgw.status_of("c") is None
    now[0] = 111.0
    snap = view.snapshot
    assert snap is not None and snap.egressgw.status_of("c") == EgressVIPStatus(holder="n1") and view.seen("c") == "5"


def test_overlay_without_writes_is_the_snapshot_itself() -> None:
    snapshot = _snapshot(EgressGateway(vips=(_vip(),)))
    assert overlay(snapshot, {}) is snapshot
