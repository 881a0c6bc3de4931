"""``magw-egress-agent --source kube``: what the agent reads from the API server emulator (the egress kinds and
the Nodes, no workloads), a snapshot after the first list and after each change, and its flags."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kubernetes_asyncio.client import CustomObjectsApi

from magw.daemons.egressgw_agent.main import main, parser
from magw.sources.kube.egressgw_watch import agent_source, kube_snapshots, snapshots
from tests.support import egress_kube_objects as eko
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures

kube_env = kubeemu_fixtures.kube_env


async def test_the_agent_reads_vips_and_nodes_and_follows_changes(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    eko.serve_egress_crds(kube_env.emulator)
    kube_env.emulator.load([*ko.east(), *eko.world()])
    source = agent_source(kube_env.client, cluster="east", namespace=ko.NS)
    assert not {"Pod", "Service", "Namespace", "EndpointSlice"} & set(source.reflectors)
    stream = snapshots(source)
    try:
        async with asyncio.timeout(10):
            first = await anext(stream)
        assert first is not None
        assert [(v.name, str(v.vip), v.candidates) for v in first.egressgw.vips] == [
            ("a", "192.0.2.10", ("e-gw1", "e-gw2")),
            ("b", "192.0.2.11", ("e-gw1", "e-gw2")),
            ("c", "192.0.2.12", ("e-gw1", "e-gw2")),
        ]
        assert {n.name: str(n.ip) for n in first.nodes}["e-gw2"] == "172.18.0.8"
        assert first.egressgw.config.advert_int == 0.1
        patch = {"spec": {"candidates": ["e-gw2"]}}
        await CustomObjectsApi(kube_env.client).patch_namespaced_custom_object(
            "submariner.io", "v1alpha1", ko.NS, "egressvips", "c", patch, _content_type="application/merge-patch+json"
        )
        async with asyncio.timeout(10):
            while True:
                snap = await anext(stream)
                vip = snap.egressgw.vip("c") if snap is not None else None
                if vip is not None and vip.candidates == ("e-gw2",):
                    break
    finally:
        await stream.aclose()
    assert source._stop.is_set()  # leaving the iteration stopped the source


async def test_kube_snapshots_opens_and_closes_its_own_client(kube_env: kubeemu_fixtures.KubeEnv) -> None:
    eko.serve_egress_crds(kube_env.emulator)
    kube_env.emulator.load([*ko.east(), *eko.world()])
    stream = kube_snapshots(kube_env.kubeconfig, cluster="east", namespace=ko.NS)
    try:
        async with asyncio.timeout(10):
            snap = await anext(stream)
        assert snap is not None and len(snap.egressgw.vips) == 3
    finally:
        await stream.aclose()


def test_the_agents_source_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("{}")
    argv = ["--cluster", "east", "--node", "e-gw1", "--workdir", str(tmp_path)]
    args = parser().parse_args([*argv, "--source", "kube", "--kubeconfig", str(kubeconfig), "--namespace", ko.NS])
    assert (args.source, args.namespace) == ("kube", ko.NS)
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--source", "kube", "--broker-dir", str(tmp_path)])
    assert exc.value.code == 2 and "--broker-dir: only with --source file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and "--broker-dir: required with --source file" in capsys.readouterr().err
