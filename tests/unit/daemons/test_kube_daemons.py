"""The daemons with ``--source kube`` as real processes against the emulator (in this test's event loop).

Gateways publish their Endpoint only while they hold their Lease, and give it back at once on SIGTERM; in
single-gateway mode a second gateway waits, takes over when the first leaves and tidies its Endpoint up; the
route agent writes its node's CNI annotation and plans (fake driver) from the API, and keeps its plan while
the API server is away; the Globalnet controller allocates and writes statuses through the status subresource.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import CoordinationV1Api, CustomObjectsApi

from magw.sources.kube import mapping
from tests.support import kube_objects as ko
from tests.support import kubeemu_fixtures
from tests.support.kube_daemons import daemon

kube_env = kubeemu_fixtures.kube_env
KubeEnv = kubeemu_fixtures.KubeEnv


until = kubeemu_fixtures.until


def gateway(env: KubeEnv, node: str, *extra: str) -> contextlib.AbstractAsyncContextManager[Any]:
    return daemon(
        env, "magw.daemons.gateway.main", "--node", node, "--cluster", "east", "--lease-duration", "2", *extra
    )


async def custom(env: KubeEnv, plural: str, name: str) -> dict[str, Any] | None:
    rt = env.emulator.store.registry.find("submariner.io", "v1", plural)
    return env.emulator.store.objects(rt).get((ko.NS, name))


async def lease_holder(env: KubeEnv, name: str) -> str | None:
    try:
        lease = await CoordinationV1Api(env.client).read_namespaced_lease(name, ko.NS)
    except Exception:
        return None
    return lease.spec.holder_identity


async def test_a_gateway_publishes_while_it_holds_its_lease_and_releases_it_on_sigterm(kube_env: KubeEnv) -> None:
    kube_env.emulator.load([o for o in ko.east() if o["kind"] != "Endpoint" or o["spec"]["cluster_id"] == "west"])
    async with gateway(kube_env, "e-gw1", "--identity", "gw1") as proc:
        await until(lambda: custom(kube_env, "endpoints", "east-e-gw1"), what="Endpoint east-e-gw1")
        ep = await custom(kube_env, "endpoints", "east-e-gw1")
        assert ep is not None and ep["spec"]["private_ip"] == "172.18.0.6" and ep["spec"]["public_ip"] == "198.51.100.6"
        assert await lease_holder(kube_env, "magw-gateway-e-gw1") == "gw1"
        await until(lambda: _ha(kube_env, "e-gw1"), what="Gateway status")
        status = (await custom(kube_env, "gateways", "e-gw1") or {})["status"]
        assert status["haStatus"] == "active"
        assert [c["endpoint"]["hostname"] for c in status["connections"]] == ["w-gw1"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["observedGeneration"] >= 1
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    assert await lease_holder(kube_env, "magw-gateway-e-gw1") in (None, "")  # released at once, not left to expire
    assert await custom(kube_env, "endpoints", "east-e-gw1") is not None  # a restart must change nothing


async def _ha(env: KubeEnv, node: str) -> bool:
    obj = await custom(env, "gateways", node)
    return bool(obj and (obj.get("status") or {}).get("haStatus"))


async def test_single_gateway_mode_the_second_waits_then_takes_over_and_tidies_up(kube_env: KubeEnv) -> None:
    objects = [o for o in ko.east() if o["kind"] not in ("Endpoint", "Submariner")] + [ko.submariner(False)]
    kube_env.emulator.load(objects)
    async with gateway(kube_env, "e-gw1", "--identity", "gw1") as first:
        await until(lambda: custom(kube_env, "endpoints", "east-e-gw1"), what="first gateway's Endpoint")
        async with gateway(kube_env, "e-gw2", "--identity", "gw2"):
            await asyncio.sleep(1.5)
            assert await custom(kube_env, "endpoints", "east-e-gw2") is None  # it waits for the cluster's lease
            assert await lease_holder(kube_env, "magw-gateway") == "gw1"
            first.send_signal(signal.SIGTERM)
            await asyncio.wait_for(first.wait(), 10)
            # the lease was released: taken within a renew interval, not after a lease duration and more
            await until(lambda: custom(kube_env, "endpoints", "east-e-gw2"), timeout=5, what="second's Endpoint")
            assert await lease_holder(kube_env, "magw-gateway") == "gw2"
            await until(lambda: _gone(kube_env, "east-e-gw1"), timeout=5, what="the old leader's Endpoint tidied up")


async def _gone(env: KubeEnv, name: str) -> bool:
    return await custom(env, "endpoints", name) is None


async def test_route_agent_annotates_its_node_plans_from_the_api_and_keeps_its_plan_when_it_is_away(
    kube_env: KubeEnv,
) -> None:
    objects = ko.east()
    objects[6] = ko.node("e-w1", "172.18.0.3", None)  # no CNI annotation yet: its agent writes it
    kube_env.emulator.load(objects)
    status_file = kube_env.directory / "agent.json"
    args = ("--node", "e-w1", "--cluster", "east", "--fake", "--cni-interface", "lo", "--status-file", str(status_file))
    async with daemon(kube_env, "magw.daemons.route_agent.main", *args):
        node_rt = kube_env.emulator.store.registry.find("", "v1", "nodes")
        await until(
            lambda: (
                (kube_env.emulator.store.objects(node_rt)[("", "e-w1")]["metadata"].get("annotations") or {}).get(
                    mapping.CNI_IP_ANNOTATION
                )
                == "127.0.0.1"
            ),
            what="the cniIfaceIp annotation",
        )
        await until(lambda: _planned(status_file), what="a planned sync")
        before = json.loads(status_file.read_text())
        await kube_env.emulator.stop()
        await asyncio.sleep(2.0)
        after = json.loads(status_file.read_text())
        assert after["waiting"] is None and after.get("last_sync", {}).get("error") is None
        assert after["objects"] == before["objects"]  # nothing flushed while the API server is away
        await kube_env.emulator.start()
        custom_api = CustomObjectsApi(kube_env.client)
        await custom_api.delete_namespaced_custom_object("submariner.io", "v1", ko.NS, "endpoints", "west-w-gw1")
        await until(lambda: _no_west(status_file), timeout=20, what="the plan follows after the API returns")


def _planned(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return bool(doc.get("last_sync", {}).get("planned"))


def _no_west(path: Path) -> bool:
    text = path.read_text()
    return "172.19.0.4" not in text and _planned(path)


async def test_multi_active_an_expired_lease_only_tidies_up_the_dead_gateways_endpoint(kube_env: KubeEnv) -> None:
    kube_env.emulator.load([o for o in ko.east() if o["kind"] != "Endpoint" or o["spec"]["cluster_id"] == "west"])
    grace = ("--tidy-grace", "1")
    async with (
        gateway(kube_env, "e-gw1", "--identity", "gw1", *grace),
        gateway(kube_env, "e-gw2", "--identity", "gw2") as gw2,
    ):
        for name in ("east-e-gw1", "east-e-gw2"):  # both publish at once: one lease each
            await until(lambda n=name: custom(kube_env, "endpoints", n), what=name)
        gw2.kill()  # no release: its lease must expire (2 s) and then the grace (1 s) pass
        await gw2.wait()
        await asyncio.sleep(1.5)
        assert await custom(kube_env, "endpoints", "east-e-gw2") is not None  # not before expiry + grace
        await until(lambda: _gone(kube_env, "east-e-gw2"), timeout=8, what="the dead gateway's Endpoint tidied")
        assert await custom(kube_env, "endpoints", "east-e-gw1") is not None


async def test_globalnet_controller_allocates_through_status_subresources(kube_env: KubeEnv) -> None:
    objects = ko.east()
    objects[2]["spec"]["global_cidr"] = ["242.1.0.0/24"]  # east is a Globalnet cluster
    objects[3]["spec"]["global_cidr"] = ["242.2.0.0/24"]
    egress = {
        "apiVersion": "submariner.io/v1",
        "kind": "GlobalEgressIP",
        "metadata": {"name": "db", "namespace": "web"},
        "spec": {"numberOfIPs": 2},
    }
    too_many = {**egress, "metadata": {"name": "big", "namespace": "web"}, "spec": {"numberOfIPs": 21}}
    kube_env.emulator.load([*objects, egress, too_many])
    args = ("--cluster", "east", "--lease-duration", "2", "--identity", "gn1", "--poll-interval", "0.05")
    async with daemon(kube_env, "magw.daemons.globalnet.main", *args):
        await until(lambda: _status(kube_env, "globalegressips", "web", "db"), what="GlobalEgressIP status")
        status = await _status(kube_env, "globalegressips", "web", "db")
        # multi-active: each gateway SNATs the namespace to a block of its own, numberOfIPs addresses each
        assert sorted(g["node"] for g in status["gateways"]) == ["e-gw1", "e-gw2"]
        assert all(len(g["allocatedIPs"]) == 2 for g in status["gateways"])
        assert len(status["allocatedIPs"]) == 4 and all(a.startswith("242.1.0.") for a in status["allocatedIPs"])
        allocated = next(c for c in status["conditions"] if c["type"] == "Allocated")
        assert allocated["status"] == "True" and allocated["observedGeneration"] == 1
        obj = await _object(kube_env, "globalegressips", "web", "db")
        assert obj["spec"] == {"numberOfIPs": 2}  # the status patch left the spec alone
        await until(lambda: _status(kube_env, "globalegressips", "web", "big"), what="the refusal's status")
        refused = next(c for c in (await _status(kube_env, "globalegressips", "web", "big"))["conditions"])
        assert refused["status"] == "False"
        cgeips = kube_env.emulator.store.objects(_rt(kube_env, "clusterglobalegressips"))
        await until(lambda: len(cgeips) >= 2, what="one ClusterGlobalEgressIP per gateway")
        # each gateway's own object carries its addresses: the status written before the object was created
        # is not lost, and the controller does not release it again on the next pass
        await until(lambda: all((o.get("status") or {}).get("allocatedIPs") for o in cgeips.values()), what="CGEIP")
        await asyncio.sleep(1.0)
        assert all(len((o.get("status") or {}).get("allocatedIPs") or ()) == 8 for o in cgeips.values())
        assert await lease_holder(kube_env, "magw-globalnet") == "gn1"


def _rt(env: KubeEnv, plural: str) -> Any:
    return env.emulator.store.registry.find("submariner.io", "v1", plural)


async def _object(env: KubeEnv, plural: str, ns: str, name: str) -> dict[str, Any]:
    return env.emulator.store.objects(_rt(env, plural)).get((ns, name)) or {}


async def _status(env: KubeEnv, plural: str, ns: str, name: str) -> dict[str, Any]:
    return (await _object(env, plural, ns, name)).get("status") or {}


async def test_route_agent_once_waits_for_the_lists_and_syncs_once(kube_env: KubeEnv) -> None:
    kube_env.emulator.load(ko.east())
    args = ("--node", "e-w1", "--cluster", "east", "--fake", "--once", "--cni-interface", "lo")
    async with daemon(kube_env, "magw.daemons.route_agent.main", *args) as proc:
        assert await asyncio.wait_for(proc.wait(), 30) == 0


async def test_bad_kube_flags_are_one_line_and_exit_2(kube_env: KubeEnv, tmp_path: Path) -> None:
    for argv, reason in (
        (["--source", "kube", "--broker-dir", str(tmp_path)], "--broker-dir: only with --source file"),
        (["--source", "kube", "--kubeconfig", str(tmp_path / "nope")], "--kubeconfig: no such file"),
        (["--kubeconfig", str(kube_env.kubeconfig), "--broker-dir", str(tmp_path)], "only with --source kube"),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "magw.daemons.route_agent.main", *argv, "--node", "n", "--cluster", "c",
            stderr=asyncio.subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"},
        )  # fmt: skip
        _, err = await proc.communicate()
        lines = err.decode().strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and reason in lines[0], (argv, lines)


async def test_route_agent_egress_flag_plans_the_egress_datapath_from_the_api(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    """``--egress``: the route agent also lists the EgressVIP/EgressConfig objects and the workloads, and its one
    sync owns the egress gateway's objects too (the status file counts them); without it, it plans none."""
    from tests.support import egress_kube_objects as eko

    eko.serve_egress_crds(kube_env.emulator)
    kube_env.emulator.load([*ko.east(), *eko.world()])
    done = {}
    for flag in ("", "--egress"):
        status = tmp_path / f"status{flag or '-none'}.json"
        args = ("--node", "e-w1", "--cluster", "east", "--fake", "--once", "--cni-interface", "lo",
                "--status-file", str(status), *((flag,) if flag else ()))  # fmt: skip
        async with daemon(kube_env, "magw.daemons.route_agent.main", *args) as proc:
            assert await asyncio.wait_for(proc.wait(), 40) == 0
        doc = json.loads(status.read_text())
        reconciler = doc.get("reconciler", doc)
        done[flag] = reconciler["counts"]["done"]
    # The egress objects of e-w1: the GPE device and its address, a table route and a rule per VIP (3 VIPs),
    # and the ip magw-egress table: 1 + 1 + 3 + 3 + 1 = 9 more than without the flag.
    assert done["--egress"] - done[""] == 9, done
