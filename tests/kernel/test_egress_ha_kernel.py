"""The node side end to end with real keepalived and conntrackd in namespaces (magw.daemons.egressgw_agent.node):
three candidates, VRRPv3 at advert_int 0.1 s; the agents hear keepalived through the FIFO, drive conntrackd,
report holder changes, and answer on their status endpoints. Moves are asserted, not their speed."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from magw.daemons.egressgw_agent.node import EgressHANode
from magw.daemons.egressgw_agent.status_http import serve
from magw.model.egressgw import EgressConfig, EgressGateway, EgressVIP
from tests.support.egress_ha_net import VIP, WAIT, build, holders

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(
        shutil.which("keepalived") is None or shutil.which("conntrackd") is None,
        reason="keepalived and conntrackd (Debian) are needed",
    ),
]
EGRESS = EgressGateway(
    config=EgressConfig(advert_int=0.1, conntrack_sync=True),
    vips=[EgressVIP(name="web", vip=VIP, vrid=71, candidates=("n1", "n2", "n3"))],
)


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        await asyncio.sleep(0.02)


async def status(sock: str, path: str = "/status") -> Any:
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=sock)) as http,
        http.get(f"http://node{path}") as r,
    ):
        return await r.json()


async def test_failover_reaches_the_agents_conntrackd_and_status(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        net = build(stack, 3, prefix="magwag")
        ips = {f"n{i}": net.ip(i) for i in (1, 2, 3)}
        changes: dict[str, list[tuple[str, bool]]] = {n: [] for n in ips}
        nodes: list[EgressHANode] = []
        runners = []
        try:
            for i, name in enumerate(ips, 1):

                async def record(vip: str, master: bool, since: str, name: str = name) -> None:
                    changes[name].append((vip, master))

                node = EgressHANode(name, interface="eth0", ip=ips[name], netns=net.nodes[i - 1],
                                    workdir=tmp_path / name, on_holder_change=record)  # fmt: skip
                nodes.append(node)
                node.start_listening()
                runners.append(await serve(node.agent, path=str(tmp_path / f"{name}.sock")))
                await asyncio.to_thread(node.apply, EGRESS, ips)
                if i == 1:
                    await eventually(lambda: nodes[0].agent.masters() == ("web",), "n1's agent hears MASTER")
            n1, n2, n3 = nodes
            await eventually(lambda: all(n.agent.vip("web") is not None for n in nodes), "every agent has a state")
            assert holders(net) == [1]
            body = await status(str(tmp_path / "n1.sock"))
            assert body["node"] == "n1" and body["vips"][0]["master"] is True
            assert (await status(str(tmp_path / "n2.sock"), "/status/web"))["master"] is False
            assert changes["n1"] == [("web", True)]
            assert [t for t, _ in n1.agent.transitions][-1] == "master"

            await asyncio.to_thread(n1.keepalived.stop)  # n1's keepalived dies (by PID)
            await eventually(lambda: n2.agent.masters() == ("web",), "n2's agent hears MASTER")
            assert holders(net) == [2]
            # the state is recorded first, conntrackd's commands and the callback follow (EgressHA.handle)
            await eventually(lambda: changes["n2"] == [("web", True)], "n2's holder change is reported")
            name, steps = n2.agent.transitions[-1]
            assert name == "master" and [(s.option, s.returncode) for s in steps] == [
                ("-c", 0), ("-f", 0), ("-R", 0), ("-B", 0)
            ]  # fmt: skip
            await eventually(lambda: n1.agent.vip("web") is not None and n1.agent.vip("web").state == "STOP",
                             "n1's agent hears STOP")  # fmt: skip
            await eventually(lambda: changes["n1"] == [("web", True), ("web", False)], "n1's loss is reported")
            assert (await status(str(tmp_path / "n2.sock"), "/status/web"))["master"] is True

            n2.lock.release()  # n2's agent "dies": keepalived's check fails, n2 goes FAULT
            await eventually(lambda: n3.agent.masters() == ("web",), "n3 takes over from the FAULTed n2")
            assert holders(net) == [3]
            await eventually(lambda: n2.agent.masters() == (), "n2's agent hears FAULT")
            assert n2.agent.vip("web").state == "FAULT"  # type: ignore[union-attr]
            # the agent records the state before conntrackd's commands of the transition have run
            await eventually(lambda: n2.agent.transitions[-1][0] == "fault", "n2's conntrackd goes fault")
        finally:
            for r in runners:
                await r.cleanup()
            for n in nodes:
                await n.stop()
