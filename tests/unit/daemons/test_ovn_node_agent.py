"""The route agent's OVN mode as a process (``magw-route-agent --once``) in a node namespace: with ``--ovs-db`` it
keeps br-submariner on a real ovs-vswitchd (and repairs it), without it it says that ovn-k8s-sub0 is missing.
Oracles: ``ovs-vsctl`` and ``ip -json`` run by the test."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from magw.model import Endpoint
from magw.sources import publish_endpoint
from tests.support.broker_docs import broker_document
from tests.support.daemon_procs import (
    Daemon,
    agent_args,
    audited_changes,
    drivers_ready,
    named,
    read_status,
    run_daemon,
    wait_for,
)
from tests.support.kernel_node import add_cni_device
from tests.support.netns import ip_json, netns
from tests.support.ovs_fixture import Ovs, ovs_in_netns, ovs_missing

DOCS = broker_document("clusters-east-west.yaml") + """\
---
kind: Config
strategy: multipath
cni: ovn
---
kind: Node
cluster: east
name: e-gw1
ip: 172.18.0.6
cni_ip: 10.1.1.2
gateway: true
---
kind: Node
cluster: east
name: e-w1
ip: 172.18.0.3
cni_ip: 10.1.3.2
"""


def broker(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "clusterset.yaml").write_text(DOCS)
    publish_endpoint(directory, Endpoint(cluster="east", hostname="e-gw1", private_ip=IPv4Address("172.18.0.6")))
    publish_endpoint(directory, Endpoint(cluster="west", hostname="w-gw1", private_ip=IPv4Address("172.19.0.4")))
    return directory


def mgmt_port(ns: str, cni_ip: str) -> None:
    add_cni_device(ns, cni_ip, name="ovn-k8s-mp0")  # OVN-K's management port holds the node's cni_ip


@pytest.fixture
def gateway() -> Iterator[tuple[str, Ovs]]:
    missing = ovs_missing()
    if missing:
        pytest.skip(missing)
    with netns("magwt-ovnag") as ns, ovs_in_netns(ns) as ovs:
        yield ns, ovs


def sub0_state(ns: str) -> tuple[list[str], bool]:
    (link,) = ip_json(ns, "-4", "addr", "show", "ovn-k8s-sub0")
    return [f"{a['local']}/{a['prefixlen']}" for a in link["addr_info"]], "UP" in link["flags"]


@pytest.mark.kernel
def test_gateway_agent_keeps_the_bridge_and_table_149(tmp_path: Path, gateway: tuple[str, Ovs]) -> None:
    ns, ovs = gateway
    mgmt_port(ns, "10.1.1.2")
    args = (*agent_args(broker(tmp_path / "broker"), node="e-gw1"), "--ovs-db", ovs.db, "--ovs-datapath-type", "netdev")
    done = run_daemon("route_agent", *args, "--once", netns=ns)
    assert done.returncode == 0, done.stderr
    assert ovs.vsctl("list-ports", "br-submariner") == "ovn-k8s-sub0"
    assert sub0_state(ns) == (["169.254.254.10/29"], True)
    routes = ip_json(ns, "route", "show", "table", "149")
    assert sorted((r["dst"], r["gateway"], r["dev"]) for r in routes) == [
        ("10.1.0.0/16", "169.254.254.9", "ovn-k8s-sub0"),
        ("100.1.0.0/16", "169.254.254.9", "ovn-k8s-sub0"),
    ]
    assert [(r["priority"], r.get("iif")) for r in ip_json(ns, "rule", "show") if r.get("table") == "149"] == [
        (149, "vxlan-tunnel")
    ]
    ovs.vsctl("del-port", "br-submariner", "ovn-k8s-sub0")  # behind our back: the device and its routes go
    again = run_daemon("route_agent", *args, "--once", netns=ns)
    assert again.returncode == 0, again.stderr
    assert named(again.stderr, "route_agent.ovn_bridge_ensured")
    assert ovs.vsctl("list-ports", "br-submariner") == "ovn-k8s-sub0"
    assert sub0_state(ns) == (["169.254.254.10/29"], True)
    assert len(ip_json(ns, "route", "show", "table", "149")) == 2


def repaired(ns: str, ovs: Ovs) -> bool:
    """br-submariner has ovn-k8s-sub0 again, up with its address, and table 149 holds its two routes."""
    try:
        state = sub0_state(ns)
    except (subprocess.CalledProcessError, ValueError):
        return False  # the device is not there (yet)
    ports = ovs.vsctl("list-ports", "br-submariner")
    return (ports, state, len(ip_json(ns, "route", "show", "table", "149"))) == (
        "ovn-k8s-sub0",
        (["169.254.254.10/29"], True),
        2,
    )


@pytest.mark.kernel
def test_the_resync_audit_of_a_gateway_in_ovn_mode_keeps_the_bridge(
    tmp_path: Path,
    gateway: tuple[str, Ovs],
    daemons: Callable[..., Daemon],
) -> None:
    """A running agent (not --once): its periodic resync is an audit on a second driver, and that driver is the
    OVN node driver too. A port deleted behind the agent's back is put back by the audit's bridge check, and its
    address and two table 149 routes by the full sync that uses the audit's observation, with no failure (an
    audit without the bridge check would see them fail on the missing device, and a retry would repair them)."""
    ns, ovs = gateway
    mgmt_port(ns, "10.1.1.2")
    status = tmp_path / "status.json"
    agent = daemons(
        "route_agent", *agent_args(broker(tmp_path / "broker"), node="e-gw1"), "--ovs-db", ovs.db,
        "--ovs-datapath-type", "netdev", "--no-health", "--resync-period", "1", "--status-file", str(status),
        netns=ns,
    )  # fmt: skip
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "converged")
    assert repaired(ns, ovs)
    ensured_before = len(named(agent.stderr, "route_agent.ovn_bridge_ensured"))
    ovs.vsctl("del-port", "br-submariner", "ovn-k8s-sub0")
    wait_for(lambda: repaired(ns, ovs), "ovn-k8s-sub0, its address and table 149 put back")
    assert len(named(agent.stderr, "route_agent.ovn_bridge_ensured")) > ensured_before
    assert audited_changes(agent) == [(True, 3, 0)]
    assert drivers_ready(agent) == ["kernel", "kernel audit"]


@pytest.mark.kernel
def test_worker_agent_without_ovs_db_programs_table_150_and_says_sub0_is_missing(tmp_path: Path) -> None:
    with netns("magwt-ovnaw") as ns:
        mgmt_port(ns, "10.1.3.2")
        done = run_daemon("route_agent", *agent_args(broker(tmp_path / "broker")), "--once", netns=ns)
        assert done.returncode == 0, done.stderr
        assert named(done.stderr, "route_agent.ovn_sub0_missing")
        routes = ip_json(ns, "route", "show", "table", "150")
        assert sorted((r["dst"], r["gateway"], r["dev"], r["prefsrc"]) for r in routes) == [
            ("10.2.0.0/16", "10.1.3.1", "ovn-k8s-mp0", "10.1.3.2"),
            ("100.2.0.0/16", "10.1.3.1", "ovn-k8s-mp0", "10.1.3.2"),
        ]
        link = ip_json(ns, "link", "show")
        assert "vx-submariner" in {lk["ifname"] for lk in link}  # the probe mesh, without routes
        assert [r for r in ip_json(ns, "route", "show") if r.get("protocol") == "157"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--fake", "--ovs-db", "unix:/x"), "--ovs-db: not with --fake (the fake node has no Open vSwitch)"),
        (("--ovs-db", "/run/db.sock"), "--ovs-db: '/run/db.sock' is not unix:PATH, tcp:IP:PORT or ssl:IP:PORT"),
        (("--ovn-mgmt-nexthop", "10.1.3"), "argument --ovn-mgmt-nexthop: '10.1.3' is not an IPv4 address"),
        (("--ovs-datapath-type", "dpdk"), "argument --ovs-datapath-type: invalid choice: 'dpdk' (choose from"),
    ],
)
def test_bad_ovn_node_flags_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    done = run_daemon("route_agent", "--broker-dir", ".", "--node", "n", "--cluster", "c", *args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"magw-route-agent: error: {message}")
