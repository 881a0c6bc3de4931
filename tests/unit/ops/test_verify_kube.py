"""``magw verify --kubeconfig``: against two API server emulators with no kubelet, no pod ever runs: every check
fails naming the pod that did not run, and everything the suite made is deleted. The verdict of one probe line.
(With a kubelet, on kube labs: tests/lab/test_lab_kube_pods.py.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from ipaddress import IPv4Network
from typing import Any

import attrs
import pytest

from magw.kubeemu.server import Emulator
from magw.ops.verify import kube
from magw.ops.verify.kubepods import KubeRunError, Settings
from tests.support import kube_objects
from tests.support.kubeemu_fixtures import NAMESPACE, KubeEnv, running_emulator

FAST = Settings(magw_namespace=NAMESPACE, pod_timeout=0.6)


def _submariner(cluster_id: str) -> dict[str, Any]:
    obj = kube_objects.submariner(True)
    obj["spec"]["clusterID"] = cluster_id
    return obj


@contextlib.asynccontextmanager
async def two_clusters(east_id: str = "east", west_id: str = "west") -> AsyncIterator[tuple[KubeEnv, KubeEnv]]:
    async with running_emulator(name="east") as east, running_emulator(name="west") as west:
        east.emulator.load([_submariner(east_id)])
        west.emulator.load([_submariner(west_id)])
        yield east, west


def _objects(emulator: Emulator, plural: str) -> list[str]:
    rt = emulator.store.registry.find("", "v1", plural)
    assert rt is not None
    return sorted(f"{ns}/{name}" for ns, name in emulator.store.objects(rt))


async def test_pods_that_never_run_fail_every_check_and_are_deleted() -> None:
    async with two_clusters() as (east, west):
        result = await kube._run([str(east.kubeconfig), str(west.kubeconfig)], FAST, 1.0, 0)
        assert result.clusters == ("east", "west") and not result.ok and result.left_behind == ()
        assert len(result.checks) == 8 and {c.kind for c in result.checks} == {"pod", "service"}
        for check in result.checks:
            assert not check.ok and check.address is None
            server = f"magw-verify-server-{check.target.split('-')[-1]}"
            assert check.detail == f"pod {server} is Pending", check
        for env in (east, west):
            assert _objects(env.emulator, "pods") == _objects(env.emulator, "services") == []
            assert "/magw-verify" in _objects(env.emulator, "namespaces")


async def test_two_kubeconfigs_of_one_cluster_are_refused() -> None:
    async with two_clusters("east", "east") as (east, west):
        with pytest.raises(KubeRunError, match="the kubeconfigs name the same cluster twice: east, east"):
            await kube._run([str(east.kubeconfig), str(west.kubeconfig)], FAST, 1.0, 0)
        assert _objects(east.emulator, "pods") == _objects(west.emulator, "pods") == []


def test_a_service_line_passes_when_its_pod_answered() -> None:
    server = "west/magw-verify-server-abc"
    assert kube.service_verdict({"ok": True, "server": server, "seen_ip": "242.1.0.1"}, server, "-") == (
        True, f"answered by {server} (source seen: 242.1.0.1)")  # fmt: skip
    ok, why = kube.service_verdict({"ok": True, "server": "west/other", "seen_ip": "x"}, server, "-")
    assert not ok and why == f"answered by west/other, not the Service's pod {server}"
    assert kube.service_verdict({"ok": False, "error": "refused"}, server, "-") == (False, "refused")
    missing = kube.service_verdict(None, server, "pod c is Failed")
    assert missing == (False, "no result in the client's log (pod c is Failed)")


@pytest.mark.parametrize(
    ("doc", "cidr", "ok", "says"),
    [
        ({"ok": True, "seen_ip": "10.1.2.200", "server": "s"}, None, True, "saw the pod's own source 10.1.2.200"),
        ({"ok": True, "seen_ip": "10.1.2.1", "server": "s"}, None, False, "saw source 10.1.2.1, not the client"),
        ({"ok": True, "seen_ip": "242.1.0.1", "server": "s"}, "242.1.0.0/16", True, "saw the global source"),
        ({"ok": True, "seen_ip": "10.1.2.200", "server": "s"}, "242.1.0.0/16", False, "not of the global CIDR"),
        ({"ok": False, "error": "TimeoutError: timed out"}, None, False, "TimeoutError: timed out"),
        (None, None, False, "no result in the client's log (pod c is Failed)"),
    ],
)  # fmt: skip
def test_a_probe_line_passes_only_with_the_expected_source(
    doc: dict[str, Any] | None, cidr: str | None, ok: bool, says: str
) -> None:
    got = kube.verdict(doc, "10.1.2.200", IPv4Network(cidr) if cidr else None, "pod c is Failed")
    assert got[0] is ok and says in got[1]


def _check(ok: bool) -> kube.KubeCheck:
    return kube.KubeCheck(kind="pod", client="east/c", client_ip="10.1.0.5", target="west/s", address="10.2.0.5",
                          via="pod IP", proto="udp", ok=ok, detail="answered" if ok else "TimeoutError: timed out",
                          hop=None if ok else "request died at e-gw1 -> a west gateway (w-gw1)")  # fmt: skip


def test_a_dead_gateway_row_or_an_untraceable_run_fails_the_suite_and_is_named() -> None:
    from magw.ops.verify.gateways import GatewayRow

    good = GatewayRow(gateway="e-gw1", cluster="east", pair="east -> west", flows=4, toward=2, back=2, dead=0)
    dead = GatewayRow(gateway="e-gw2", cluster="east", pair="east -> west", flows=4, toward=2, back=0, dead=2,
                      hops=("request died at e-gw2 -> a west gateway (w-gw1) (2)",))  # fmt: skip
    base = kube.KubeResult(clusters=("east", "west"), checks=(_check(True),), left_behind=(), gateways=(good,),
                           flows=4)  # fmt: skip
    assert base.ok and kube.table(base).endswith("OK: 2/2 checks passed between east, west\n")
    for bad, line in (
        ({"gateways": (good, dead)}, "gateway e-gw2 (east -> west): 2/4 flows toward, 0/4 back, 2 dead: request "
                                     "died at e-gw2 -> a west gateway (w-gw1) (2)"),
        ({"trace_problem": "node east/e-gw2: its tracer did not run (pod x is Pending)"},
         "trace: node east/e-gw2: its tracer did not run (pod x is Pending)"),
        ({"failover_problem": "failover: e-gw1's datapath was not cut (pod y is Failed)"},
         "failover: e-gw1's datapath was not cut (pod y is Failed)"),
        ({"checks": (_check(False),)}, "east/c -> west/s udp (pod IP 10.2.0.5): TimeoutError: timed out; request "
                                      "died at e-gw1 -> a west gateway (w-gw1)"),
    ):  # fmt: skip
        result = attrs.evolve(base, **bad)
        doc = kube.report_json(result)
        assert not result.ok and not doc["ok"] and doc["failing"] == [line]
        assert f"FAIL {line}\n" in kube.table(result) and kube.table(result).splitlines()[-1].startswith("FAIL: ")


async def test_a_tracer_that_never_runs_stops_the_trace_and_every_pod_made_goes() -> None:
    """No kubelet: the tracer pods stay Pending. The trace stops naming the first node, after every tracer was
    asked for (none is created behind the cleanup), and the pods were node tools: privileged, hostNetwork, pinned,
    tolerating every taint, with the run's own table and the host-namespace override."""
    from ipaddress import IPv4Address

    from magw.ops.verify import kubetrace
    from magw.ops.verify.kubepods import Run, close_all, open_clusters

    async with two_clusters() as (east, west):
        clusters = await open_clusters([str(east.kubeconfig), str(west.kubeconfig)], FAST)
        r = Run(FAST)
        try:
            clusters[0].gateways, clusters[1].gateways = ("e-gw1",), ("w-gw1",)
            for c in clusters:
                await r.namespace(c)
            stream = kubetrace.Stream(client="east", node="e-gw1", ip=IPv4Address("10.2.0.5"), port=8080, flows=4)
            with pytest.raises(kubetrace.TraceError, match=rf"^node east/e-gw1: its tracer did not run \(pod "
                               rf"magw-verify-{r.id}-nt0 is Pending\)$"):  # fmt: skip
                await kubetrace.run(r, clusters, [stream])
            pods = [p for c in clusters for p in (await c.api.json("GET", r.path("pods"))).get("items") or ()]
            assert sorted(p["spec"]["nodeName"] for p in pods) == ["e-gw1", "w-gw1"]
            for p in pods:
                spec = p["spec"]
                assert spec["hostNetwork"] is True and spec["tolerations"] == [{"operator": "Exists"}]
                (container,) = spec["containers"]
                assert container["securityContext"] == {"privileged": True}
                argv = container["command"]
                assert argv[:3] == ["python", "-m", "magw.ops.verify.nodetrace"] and "--allow-init-netns" in argv
                assert argv[argv.index("--table") + 1] == f"magw_verify_{r.id}"
        finally:
            left = await r.cleanup()
            await close_all(clusters)
        assert left == ()
        assert _objects(east.emulator, "pods") == _objects(west.emulator, "pods") == []
