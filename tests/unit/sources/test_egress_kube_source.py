"""KubeSource with ``egressgw=True`` against the API server emulator: EgressConfig and EgressVIP CRs (from
deploy/crds) and the workloads, without Globalnet, give the file broker's Snapshot of the same objects, the
same binding resolution, and follow changes; a bad CR is left out and named."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
from collections.abc import AsyncIterator
from ipaddress import IPv4Address
from pathlib import Path

import pytest
from kubernetes_asyncio.client import CustomObjectsApi

from magw.desired.egressgw.bindings import resolve
from magw.sources.file.broker import FileBroker
from magw.sources.kube import mapping
from magw.sources.kube.reflector import Timing
from magw.sources.kube.resources import resources
from magw.sources.kube.source import KubeSource
from tests.support import egress_kube_objects as eko
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures
from tests.support.paths import EXAMPLES

kube_env = kubeemu_fixtures.kube_env
EXAMPLE = EXAMPLES / "broker"
FAST = Timing(watch_timeout=5, inactivity=3, request_timeout=5)
until = functools.partial(kubeemu_fixtures.until, timeout=5.0)
MERGE = "application/merge-patch+json"


def _source(env: kubeemu_fixtures.KubeEnv) -> KubeSource:
    return KubeSource(env.client, local_cluster="east", namespace=ko.NS, globalnet=False, egressgw=True, timing=FAST)


@contextlib.asynccontextmanager
async def running(source: KubeSource) -> AsyncIterator[None]:
    task = asyncio.create_task(source.run())
    try:
        yield
    finally:
        source.stop()
        await asyncio.wait_for(task, 5)


def test_egress_lists_its_kinds_and_the_workloads_without_globalnet() -> None:
    kinds = {r.kind for r in resources(ko.NS, globalnet=False, egressgw=True)}
    assert {"EgressConfig", "EgressVIP", "Namespace", "Pod", "Service", "EndpointSlice"} <= kinds
    assert not kinds & {"GlobalEgressIP", "GlobalIngressIP", "ServiceExport"}
    plain = {r.kind for r in resources(ko.NS, globalnet=False)}
    assert not plain & {"EgressConfig", "EgressVIP", "Pod"}
    agent = {r.kind for r in resources(ko.NS, globalnet=False, workloads=False, egressgw=True)}
    assert {"EgressVIP", "EgressConfig", "Node"} <= agent and not agent & {"Pod", "Service", "Namespace"}


async def test_egress_crs_and_workloads_are_the_file_brokers_snapshot(
    kube_env: kubeemu_fixtures.KubeEnv, tmp_path: Path
) -> None:
    eko.serve_egress_crds(kube_env.emulator)
    kube_env.emulator.load([*ko.east(), *eko.world()])
    broker_dir = tmp_path / "broker"
    shutil.copytree(EXAMPLE, broker_dir)
    (broker_dir / "egress.yaml").write_text(eko.WORLD_DOCUMENTS)
    broker = FileBroker(broker_dir, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None and broker.problem_files() == frozenset()
    source = KubeSource(
        kube_env.client, local_cluster="east", namespace=ko.NS, globalnet=False, egressgw=True, timing=FAST
    )
    async with running(source):
        await until(lambda: source.initial_sync_done)
        snap = source.snapshot
        assert snap is not None and source.problem_files() == frozenset()
        assert snap == broker.snapshot
        # what the planners and the controller compute from it, written out by hand
        assert [v.name for v in snap.egressgw.vips] == ["a", "b", "c"]
        assert snap.egressgw.config.advert_int == 0.1 and snap.egressgw.config.conntrack_sync is False
        users = resolve(snap.egressgw, snap.globalnet.services, snap.globalnet.pods)
        assert users.of("a").services == ("shop/web",) and users.of("a").pods == (IPv4Address("10.1.3.10"),)
        assert users.of("b").services == ("shop/db",) and users.of("b").pods == (IPv4Address("10.1.3.11"),)
        assert users.of("c").services == () and users.conflicts == ()
        status = snap.egressgw.status_of("a")
        assert status is not None and status.holder == "e-gw1"

        # a binding changed in the CR is followed: c now takes blog
        custom = CustomObjectsApi(kube_env.client)
        patch = {"spec": {"bindings": [{"namespace": "blog"}]}}
        await custom.patch_namespaced_custom_object(
            "submariner.io", "v1alpha1", ko.NS, "egressvips", "c", patch, _content_type=MERGE
        )

        def c_users() -> tuple[str, ...]:
            s = source.snapshot
            assert s is not None
            return resolve(s.egressgw, s.globalnet.services, s.globalnet.pods).of("c").services

        await until(lambda: c_users() == ("blog/api",))


async def test_a_vip_outside_the_ranges_and_a_second_config_are_left_out_and_named(
    kube_env: kubeemu_fixtures.KubeEnv,
) -> None:
    eko.serve_egress_crds(kube_env.emulator)
    outside = eko.egress_vip("d", 13, [])
    outside["spec"]["vip"] = "198.51.100.13"
    other = eko.egress_config("other", vipRanges=["198.51.100.0/24"])
    kube_env.emulator.load([*ko.east(), *eko.world(), outside, other])
    source = KubeSource(
        kube_env.client, local_cluster="east", namespace=ko.NS, globalnet=False, egressgw=True, timing=FAST
    )
    async with running(source):
        await until(lambda: source.initial_sync_done)
        snap = source.snapshot
        assert snap is not None
        assert [v.name for v in snap.egressgw.vips] == ["a", "b", "c"]
        assert [str(n) for n in snap.egressgw.config.vip_ranges] == ["192.0.2.0/24"]
        problems = source.problem_files()
        assert f"kube:EgressVIP/{ko.NS}/d" in problems
        assert f"kube:EgressConfig/{ko.NS}/other" in problems
        # without the config there are no ranges: every VIP is refused, as with the file broker
        await CustomObjectsApi(kube_env.client).delete_namespaced_custom_object(
            "submariner.io", "v1alpha1", ko.NS, "egressconfigs", "default"
        )
        await until(lambda: source.snapshot is not None and not source.snapshot.egressgw.vips)


def test_an_empty_status_written_by_the_controller_maps_back_and_an_unwritten_one_does_not() -> None:
    """A VIP nobody holds or uses has a status too: it must read back, or the controller would write it again at
    every pass; a CR whose status was never written has none."""
    written = eko.egress_vip("c", 12, [], {"holder": "", "services": []})
    docs = mapping.egress_vip_docs(written, "east")
    assert [d.kind for d in docs] == ["EgressVIP", "EgressVIPStatus"]
    assert docs[1].fields == {"cluster": "east", "name": "c", "holder": "", "services": []}
    assert [d.kind for d in mapping.egress_vip_docs(eko.egress_vip("c", 12, []), "east")] == ["EgressVIP"]


def test_only_the_egress_config_named_default_is_read() -> None:
    (doc,) = mapping.egress_config_docs(eko.egress_config(vipRanges=["192.0.2.0/24"], advertInt=0.5), "east")
    assert doc.fields == {"cluster": "east", "vipRanges": ["192.0.2.0/24"], "advertInt": 0.5}
    with pytest.raises(mapping.MappingError, match="only the EgressConfig named default"):
        mapping.egress_config_docs(eko.egress_config("other"), "east")
