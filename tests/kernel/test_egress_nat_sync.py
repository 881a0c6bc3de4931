"""Established NATed TCP flows survive a VIP move with conntrackd (docs/egress-ha.md, "The NAT evidence"; real
kernel, keepalived, conntrackd 1.4.7 in FTFW over UDP between the two candidates). The world is
tests/support/egress_nat_net.py.

Each case: a flow through n1 (the VIP holder) exchanges bytes; n1's keepalived is stopped by PID, the VIP
moves to n2 (read from the kernel); with conntrackd n2 runs the MASTER transition (commit, flush, resync,
bulk send); then the side that is *not* the pod speaks first (the server for egress, the client for
ingress), then the other. Controls without conntrackd show what breaks and how. The raw ``conntrack -L``
of n2 before and after the commit is printed (``pytest -s``) and quoted in docs/egress-ha.md.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import attrs
import pytest

from magw.drivers.conntrackd.config import ConntrackdNode
from magw.drivers.conntrackd.config import render as render_ctd
from magw.drivers.conntrackd.process import Conntrackd
from magw.drivers.conntrackd.purge import deleted, purge_nat_through
from magw.drivers.keepalived.config import KeepalivedNode
from magw.drivers.keepalived.config import render as render_ka
from magw.drivers.keepalived.process import Keepalived
from magw.model.egressgw import EgressConfig, EgressVIP
from tests.support.egress_ha_net import VIP, holders, wait_until
from tests.support.egress_nat_net import NatWorld, add_guard, build_world, exchange, flow, guarded
from tests.support.netns import run

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(
        shutil.which("keepalived") is None or shutil.which("conntrackd") is None or shutil.which("conntrack") is None,
        reason="keepalived, conntrackd and conntrack (Debian) are needed",
    ),
]
WEB = EgressVIP(name="web", vip=VIP, vrid=61, candidates=("n1", "n2"))


@attrs.define
class Candidates:
    world: NatWorld
    kas: list[Keepalived]
    ctds: list[Conntrackd]

    def conntrack(self, i: int) -> str:
        """``conntrack -L -p tcp`` of node i: the kernel's table, read independently of conntrackd."""
        done = run(self.world.net.nodes[i - 1], "conntrack", "-L", "-p", "tcp", check=False)
        return done.stdout.strip()

    def external_cache(self, i: int) -> str:
        return self.ctds[i - 1].client("-e").output


@contextlib.contextmanager
def candidates(tmp: Path, sync: bool, multicast: bool = False,
               ignore: tuple[IPv4Network, ...] = ()) -> Iterator[Candidates]:  # fmt: skip
    """n1 and n2 with keepalived (and conntrackd if ``sync``). ``multicast``: a third, absent peer in the
    sync set makes the config use multicast instead of UDP to the one peer. ``ignore``: networks conntrackd
    leaves unsynced besides the VIP (as the agent does with the remote clusters' CIDRs)."""
    with contextlib.ExitStack() as stack:
        world = build_world(stack)
        net = world.net
        ips = {"n1": net.ip(1), "n2": net.ip(2)}
        kas, ctds = [], []
        extra = (IPv4Address("172.31.0.9"),) if multicast else ()
        for i, name in ((1, "n1"), (2, "n2")):
            ns = net.nodes[i - 1]
            if sync:
                ctd = Conntrackd(tmp / f"ctd{i}", ns)
                paths = {"socket": str(ctd.socket), "lock_file": str(ctd.lock_file), "log_file": str(ctd.log)}
                node = ConntrackdNode(interface="eth0", ip=ips[name], peers=(*ips.values(), *extra), **paths)
                stack.callback(ctd.stop)
                ctd.start(render_ctd(node, ignore=(VIP, *ignore)))
                ctds.append(ctd)
            ka = Keepalived(tmp / f"ka{i}", ns)
            stack.callback(ka.stop)
            ka.apply(render_ka(KeepalivedNode(name=name, interface="eth0", ip=ips[name], fifo=str(ka.fifo)),
                               (WEB,), ips, EgressConfig(advert_int=0.1)))  # fmt: skip
            if i == 1:
                wait_until(lambda: holders(net) == [1], "n1 holds the VIP")
            kas.append(ka)
        yield Candidates(world=world, kas=kas, ctds=ctds)


def fail_over(c: Candidates) -> None:
    c.kas[0].stop()
    wait_until(lambda: holders(c.world.net) == [2], "the VIP moves to n2")


@pytest.mark.parametrize("transport", ["udp", "multicast"])
@pytest.mark.parametrize("kind", ["egress", "ingress"])
def test_flow_survives_the_move_with_conntrackd(tmp_path: Path, kind: str, transport: str) -> None:
    with candidates(tmp_path, sync=True, multicast=transport == "multicast") as c, flow(c.world, kind) as f:
        assert ("Multicast {" in c.ctds[0].conf.read_text()) == (transport == "multicast")
        if kind == "egress":
            assert f.seen_from[0] == str(VIP)  # the server sees the VIP: n1 SNATed
        else:
            assert f.seen_from[0] == "203.0.113.10"  # the backend sees the client: DNAT, no SNAT
        assert exchange(f.client, f.server, b"before-1") == "ok"
        assert exchange(f.server, f.client, b"before-2") == "ok"
        wait_until(lambda: "ESTABLISHED" in c.external_cache(2), "n2's external cache holds the flow")
        before = c.conntrack(2)
        print(f"\n[{kind}] n2 external cache before the move:\n{c.external_cache(2)}")
        print(f"[{kind}] n2 conntrack -L -p tcp before the commit:\n{before}")
        assert "ESTABLISHED" not in before  # synced, but not in n2's kernel yet

        fail_over(c)
        steps = c.ctds[1].become_master()
        assert [s.returncode for s in steps] == [0, 0, 0, 0], steps
        after = c.conntrack(2)
        print(f"[{kind}] n2 conntrack -L -p tcp after the commit:\n{after}")
        # the NAT binding came along: the reply tuple names the VIP (SNAT) or the backend (DNAT)
        if kind == "egress":
            assert "src=203.0.113.10 dst=172.31.0.100 sport=9000" in after
        else:
            assert "src=10.1.3.10 dst=203.0.113.10 sport=8080" in after

        assert exchange(f.server, f.client, b"after-1") == "ok"  # the non-pod side first
        assert exchange(f.client, f.server, b"after-2") == "ok"


@pytest.mark.parametrize("kind", ["egress", "ingress"])
def test_flows_with_an_end_in_an_ignored_network_are_not_synced(tmp_path: Path, kind: str) -> None:
    """The agent gives conntrackd the remote clusters' CIDRs to ignore: a gateway's inter-cluster flows carry its
    own NAT, and committed on another candidate they would break there (docs/robustness.md). Here the outside
    network stands for a remote cluster: its flows, either way, stay out of n2's external cache; a flow of the
    same kind is synced when only the VIP is ignored (test_flow_survives_the_move_with_conntrackd), so the
    filter, not the sync, keeps it out: n1's own internal cache (what it would send) does not hold it either."""
    outside = IPv4Network("203.0.113.0/24")
    with candidates(tmp_path, sync=True, ignore=(outside,)) as c, flow(c.world, kind) as f:
        assert f"IPv4_address {outside}" in c.ctds[0].conf.read_text()
        assert exchange(f.client, f.server, b"before-1") == "ok"
        assert exchange(f.server, f.client, b"before-2") == "ok"
        assert "ESTABLISHED" in c.conntrack(1)  # n1 tracks and NATs the flow
        assert "203.0.113.10" not in c.ctds[0].client("-i").output  # n1's internal cache: filtered out
        c.ctds[0].client("-B")  # n1 bulk-sends all it holds
        with pytest.raises(AssertionError):  # bounded: the flow never reaches n2's external cache
            wait_until(lambda: "ESTABLISHED" in c.external_cache(2), "n2's external cache holds the flow", timeout=3.0)
        assert "203.0.113.10" not in c.external_cache(2)


@pytest.mark.parametrize("kind", ["egress", "ingress"])
def test_without_conntrackd_the_flow_is_reset_when_the_outside_speaks_first(tmp_path: Path, kind: str) -> None:
    """n2 has no entry: egress, the server's segment to VIP:port is for n2's own stack, which answers RST;
    ingress, the backend's reply is a new flow that n2 SNATs to VIP:8080, and the client answers RST."""
    with candidates(tmp_path, sync=False) as c, flow(c.world, kind) as f:
        assert exchange(f.client, f.server, b"before-1") == "ok"
        fail_over(c)
        assert exchange(f.server, f.client, b"after-1") == "timeout"  # never delivered
        assert exchange(f.client, f.server, b"after-2") == "reset"  # the server's side was reset meanwhile


def test_without_conntrackd_egress_survives_only_if_the_pod_speaks_first(tmp_path: Path) -> None:
    """Mid-stream pickup (nf_conntrack_tcp_loose=1, the default): n2 takes the pod's segment as a new
    flow, SNATs it to the VIP keeping the source port (it is free), and the server's replies match it.
    Recorded as evidence: without conntrackd survival depends on who speaks first after the move."""
    with candidates(tmp_path, sync=False) as c, flow(c.world, "egress") as f:
        assert exchange(f.client, f.server, b"before-1") == "ok"
        fail_over(c)
        assert exchange(f.client, f.server, b"after-1") == "ok"
        assert exchange(f.server, f.client, b"after-2") == "ok"


@pytest.mark.parametrize("guard", [False, True])
@pytest.mark.parametrize("kind", ["egress", "ingress"])
def test_a_segment_from_the_far_side_before_the_commit(tmp_path: Path, kind: str, guard: bool) -> None:
    """The window between the GARP and conntrackd's commit: the side that is not the client speaks first, and
    its segment reaches n2 before the commit. EgressGateway, the outside server's segment to the VIP: without the
    guard n2's own stack answers RST. Ingress, the backend's reply: without the guard n2 picks it up as a new
    flow and SNATs it to VIP:8080, not VIP:80, and the client answers RST. Either way the flow is lost
    *despite* conntrackd; with the guard the segment is dropped, the sender retransmits (RTO >= 200 ms, longer
    than the commit here), and the flow survives."""
    with candidates(tmp_path, sync=True) as c, flow(c.world, kind) as f:
        add_guard(c.world, drop=guard)
        assert exchange(f.client, f.server, b"before-1") == "ok"
        wait_until(lambda: "ESTABLISHED" in c.external_cache(2), "n2's external cache holds the flow")
        fail_over(c)
        f.server.sendall(b"early")  # before the commit
        wait_until(lambda: guarded(c.world.net.nodes[1]) > 0, "the early segment reaches n2")
        steps = c.ctds[1].become_master()
        assert all(s.returncode == 0 for s in steps), steps
        if guard:
            assert f.client.recv(5) == b"early"
            assert exchange(f.client, f.server, b"after") == "ok"
        else:
            assert exchange(f.client, f.server, b"after") == "reset"


def test_a_node_that_lost_the_vip_purges_only_the_vips_entries_not_its_other_nat_flows(tmp_path: Path) -> None:
    """The backup transition asks for a resync and schedules no kernel flush (conntrackd's ``-t`` would: in 1.4.7 it
    flushes, after PurgeTimeout, every entry its filter lets through, which includes the node's own NATed flows, a
    pod's Service connection among them). The purge then deletes the entries NATed through the VIP, and only them.
    Read with ``conntrack -L`` and conntrackd's own log."""
    with candidates(tmp_path, sync=True) as c, flow(c.world, "egress") as f:
        n1 = c.world.net.nodes[0]
        assert exchange(f.client, f.server, b"before-1") == "ok"
        # n1's own NATed flow: a pod's connection to a ClusterIP, DNATed to a backend (not the VIP's)
        run(n1, "conntrack", "-I", "-p", "tcp", "-s", "10.1.3.11", "-d", "10.96.0.10", "--sport", "41000",
            "--dport", "443", "-r", "10.1.4.20", "-q", "10.1.3.11", "--reply-port-src", "8443", "--reply-port-dst",
            "41000", "--state", "ESTABLISHED", "-u", "SEEN_REPLY", "-t", "600")  # fmt: skip
        fail_over(c)
        steps = c.ctds[0].become_backup()
        assert [(s.option, s.returncode) for s in steps] == [("-n", 0)], steps
        assert "flushing conntrack table in" not in c.ctds[0].log.read_text()  # no kernel flush scheduled
        assert f"dst={VIP} sport=9000" in c.conntrack(1)  # the VIP's flow, stale on n1 now

        purged = c.ctds[0].purge([VIP])
        assert [(s.option, s.returncode, deleted(s)) for s in purged] == [
            (f"-D --reply-dst {VIP}", 0, 1),  # the egress flow, SNATed to the VIP
            (f"-D --orig-dst {VIP}", 0, 0),  # no ingress flow here: conntrack exits 1, not a failure
        ]
        table = c.conntrack(1)
        assert str(VIP) not in table
        assert "src=10.1.3.11 dst=10.96.0.10 sport=41000 dport=443" in table  # the node's own NATed flow stays

        # for the record, what -t does: conntrackd schedules the flush of its filter's whole share of the table
        assert c.ctds[0].client("-t").returncode == 0
        assert "flushing conntrack table in 60 secs" in c.ctds[0].log.read_text()


def test_a_purge_that_cannot_run_says_so(tmp_path: Path) -> None:
    with candidates(tmp_path, sync=False) as c:
        steps = purge_nat_through([VIP], c.world.net.nodes[0], binary="/nonexistent/conntrack")
        assert len(steps) == 2 and all(s.returncode != 0 and deleted(s) == 0 for s in steps), steps
