"""Real keepalived (Debian 2.2.7) in namespaces on a bridge, VRRPv3 at advert_int 0.1 s (magw.drivers.keepalived).

The holder is read from the kernel (which node's eth0 carries the VIP), never from keepalived. We assert
moves, not how fast they are (benchmarks/egress_failover.py measures that).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from magw.drivers.keepalived.config import AgentCheck, KeepalivedNode, render
from magw.drivers.keepalived.process import Keepalived
from magw.drivers.nsdaemon import DaemonError, alive, read_pid
from magw.model.egressgw import EgressConfig, EgressVIP
from tests.support.egress_ha_net import VIP, Underlay, build, holders, wait_until
from tests.support.netns import run

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(shutil.which("keepalived") is None, reason="keepalived (Debian) not installed"),
]
CONFIG = EgressConfig(advert_int=0.1)
VIP2 = IPv4Address("172.31.0.101")


class Nodes:
    """One keepalived per node of ``net``; each in its own private directory under ``tmp``."""

    def __init__(self, net: Underlay, tmp: Path, check: bool = False) -> None:
        self.net = net
        self.names = tuple(f"n{i}" for i in range(1, len(net.nodes) + 1))
        self.ips = {n: net.ip(i) for i, n in enumerate(self.names, 1)}
        self.kas = [Keepalived(tmp / n, ns) for n, ns in zip(self.names, net.nodes, strict=True)]
        self.locks = [str(tmp / f"{n}.lock") for n in self.names]
        self.check = check

    def conf(self, i: int, vips: tuple[EgressVIP, ...]) -> str:
        ka = self.kas[i - 1]
        check = AgentCheck(lock_file=self.locks[i - 1]) if self.check else None
        node = KeepalivedNode(name=self.names[i - 1], interface="eth0", ip=self.ips[self.names[i - 1]],
                              fifo=str(ka.fifo), check=check)  # fmt: skip
        return render(node, vips, self.ips, CONFIG)

    def stop_all(self) -> None:
        for ka in self.kas:
            ka.stop()


@contextlib.contextmanager
def cluster(tmp: Path, count: int, check: bool = False) -> Iterator[Nodes]:
    with contextlib.ExitStack() as stack:
        nodes = Nodes(build(stack, count), tmp, check)
        stack.callback(nodes.stop_all)  # runs before the namespaces go
        yield nodes


def web(*candidates: str) -> EgressVIP:
    return EgressVIP(name="web", vip=VIP, vrid=51, candidates=candidates)


def test_preferred_is_master_then_the_vip_moves_on_stop_and_on_link_loss(tmp_path: Path) -> None:
    with cluster(tmp_path, 3) as c:
        vips = (web("n1", "n2", "n3"),)
        assert c.kas[0].apply(c.conf(1, vips)) == "started"
        wait_until(lambda: holders(c.net) == [1], "n1 holds the VIP")
        for i in (2, 3):
            c.kas[i - 1].apply(c.conf(i, vips))
        assert holders(c.net) == [1]

        c.kas[0].stop()  # by PID; keepalived sends priority 0 on its way out
        wait_until(lambda: holders(c.net) == [2], "the VIP moves to n2, the next candidate")

        run(c.net.switch, "ip", "link", "set", c.net.port(2), "down")  # n2 loses its underlay link
        wait_until(lambda: 3 in holders(c.net), "n3 takes the VIP when n2's link fails")


def test_reload_adds_a_vip_without_moving_the_first(tmp_path: Path) -> None:
    with cluster(tmp_path, 2) as c:
        one = (web("n1", "n2"),)
        for i in (1, 2):
            c.kas[i - 1].apply(c.conf(i, one))
            wait_until(lambda: holders(c.net) == [1], "n1 holds the VIP")
        pid = c.kas[0].pid
        two = (*one, EgressVIP(name="api", vip=VIP2, vrid=52, candidates=("n1", "n2")))
        assert c.kas[0].apply(c.conf(1, two)) == "reloaded"
        assert c.kas[0].apply(c.conf(1, two)) == "unchanged"
        c.kas[1].apply(c.conf(2, two))
        wait_until(lambda: holders(c.net, VIP2) == [1], "n1 holds the second VIP after the reload")
        assert holders(c.net) == [1] and c.kas[0].pid == pid


def test_a_node_whose_agent_is_dead_gives_the_vip_up(tmp_path: Path) -> None:
    with cluster(tmp_path, 2, check=True) as c, contextlib.ExitStack() as locks:
        held = []
        for path in c.locks:  # the "agents": each holds its node's lock while it lives
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            locks.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
            held.append(fd)
        vips = (web("n1", "n2"),)
        c.kas[0].apply(c.conf(1, vips))
        wait_until(lambda: holders(c.net) == [1], "n1 holds the VIP")
        c.kas[1].apply(c.conf(2, vips))

        fcntl.flock(held[0], fcntl.LOCK_UN)  # n1's agent "dies"
        wait_until(lambda: holders(c.net) == [2], "n1 goes FAULT and n2 takes the VIP")


def test_refuses_a_pid_file_naming_a_process_that_is_not_ours(tmp_path: Path) -> None:
    ka = Keepalived(tmp_path / "k", None)
    (tmp_path / "k").mkdir()
    ka.pid_file.write_text(f"{os.getpid()}\n")  # this test's own process: alive, and no keepalived of ours
    with pytest.raises(DaemonError, match="not ours"):
        ka.apply("global_defs {\n}\n")
    assert not ka.running()


def test_a_vrrp_child_left_by_a_killed_parent_is_stopped_before_keepalived_starts_again(tmp_path: Path) -> None:
    """SIGKILL of keepalived's parent leaves its VRRP child running (it holds the VIP and sends adverts) and a new
    keepalived refused to start beside it ("daemon is already running"; found by the soak). The next apply stops
    the orphan (ours: our config path on its command line) and starts a keepalived that holds the VIP again."""
    with cluster(tmp_path, 1) as c:
        vips = (web("n1"),)
        ka = c.kas[0]
        assert ka.apply(c.conf(1, vips)) == "started"
        wait_until(lambda: holders(c.net) == [1], "n1 holds the VIP")
        parent, child = ka.pid, read_pid(ka.vrrp_pid_file)
        assert parent is not None and child is not None and child != parent
        os.kill(parent, signal.SIGKILL)
        wait_until(lambda: not ka.running(), "keepalived's parent is gone")
        assert alive(child), "the VRRP child outlives its parent (the case this test is about)"
        assert ka.apply(c.conf(1, vips)) == "started"
        assert not alive(child) and ka.pid not in (None, parent)
        wait_until(lambda: holders(c.net) == [1], "the new keepalived holds the VIP")
