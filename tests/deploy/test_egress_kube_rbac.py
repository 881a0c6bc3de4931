"""Every request ``magw-egress --source kube`` and ``magw-egress-agent --source kube`` really send is allowed by
their roles in deploy/rbac/egress.yaml (tests/deploy/test_deploy_rbac.py pins that they are least privilege). Each
daemon runs alone, as a subprocess, against an emulator whose request log then holds its requests only. The
agent runs as a node that is nobody's candidate: it starts neither keepalived nor conntrackd."""

from __future__ import annotations

import aiohttp

from tests.support import egress_kube_objects as eko
from tests.support import kube_objects as ko
from tests.support.kube_daemons import daemon
from tests.support.kubeemu_fixtures import KubeEnv, running_emulator, until
from tests.support.rbac_audit import allowed, request_of, rules_of


def _check(env: KubeEnv, service_account: str, *, least: set[str]) -> None:
    requests = [r for r in (request_of(m, p) for m, p in env.emulator.faults.log) if r is not None]
    rules = rules_of(service_account, ko.NS)
    denied = sorted({str(r) for r in requests if not allowed(rules, r)})
    assert denied == [], f"{service_account} sent requests its role does not allow: {denied}"
    verbs = {f"{r.verb} {r.resource}" for r in requests}
    assert least <= verbs, f"the audit saw too little: {sorted(least - verbs)} missing from {sorted(verbs)}"


def _vip(env: KubeEnv, name: str) -> dict[str, object]:
    store = env.emulator.store
    objects = store.objects(store.registry.find("submariner.io", "v1alpha1", "egressvips"))
    return dict(objects[(ko.NS, name)])


async def test_the_egress_controllers_requests_are_allowed() -> None:
    async with running_emulator() as env:
        eko.serve_egress_crds(env.emulator)
        env.emulator.load([*ko.east(), *eko.world()])
        sock = env.directory / "egress.sock"
        async with daemon(env, "magw.daemons.egressgw.main", "--cluster", "east", "--socket", str(sock)):
            await until(lambda: _vip(env, "b").get("status"), what="b's status")
            await until(sock.exists, what="the API socket")
            connector = aiohttp.UnixConnector(path=str(sock))
            body = {"action": "bind", "vip": "c", "namespace": "blog"}
            async with aiohttp.ClientSession(connector=connector) as s, s.post("http://x/vip", json=body) as r:
                assert r.status == 200, await r.text()
        least = {"patch egressvips", "patch egressvips/status", "watch pods", "watch egressconfigs"}
        _check(env, "magw-egress", least=least)


async def test_the_egress_agents_requests_are_allowed() -> None:
    async with running_emulator() as env:
        eko.serve_egress_crds(env.emulator)
        env.emulator.load([*ko.east(), *eko.world()])
        workdir = env.directory / "agent"
        workdir.mkdir()
        args = ("--cluster", "east", "--node", "e-w1", "--workdir", str(workdir), "--status-listen", "127.0.0.1:0")
        async with daemon(env, "magw.daemons.egressgw_agent.main", *args):
            await until(
                lambda: (
                    {"watch egressvips", "watch nodes"}
                    <= {f"{r.verb} {r.resource}" for r in (request_of(m, p) for m, p in env.emulator.faults.log) if r}
                ),
                what="the agent's watches",
            )
        _check(env, "magw-egress-agent", least={"list egressvips", "list egressconfigs", "list nodes"})
