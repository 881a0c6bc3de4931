"""A real OVN control plane per test: NB and SB ovsdb-servers and ovn-northd in a temp dir, and an
OVN-Kubernetes-like NB topology built with ``ovn-nbctl`` (the oracle side: not our driver). The builder and the
``ovn-trace`` parser live in ``magw.lab.planes.ovn_topology`` and ``magw.lab.verify.ovn_trace`` (``magw lab up --cni
ovn``
uses them too); this module keeps the tests' API over them.

Everything listens on unix sockets inside the test's directory and is stopped by PID at the end.
OVN-Kubernetes' documented layout (docs/design/architecture and its NB dumps) as built by ``build_ovnk``:

- ``ovn_cluster_router``: one ``rtos-<node>`` port per node switch, ``rtoj-ovn_cluster_router`` on ``join``
  (100.64.0.1/16), a src-ip static route per node subnet toward that node's gateway router, and OVN-K's own
  allow policies (priority 102: pod to pod, pod to join);
- a node switch per node (``other_config:subnet``) with ``stor-<node>``, the management port ``k8s-<node>``
  (.2) and pod ports ``<ns>_<pod>``;
- ``join`` (100.64.0.0/16) with a gateway router ``GR_<node>`` per node, pinned to the node's chassis;
- ``clusterLBGroup`` with a load balancer for a service;
- an SB ``Chassis`` per node whose ``hostname`` is the node name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import attrs
import pytest

from magw.lab.planes import ovn_topology
from magw.lab.planes.ovn_servers import create_db, northd_argv, ovn_missing, server_argv
from magw.lab.planes.ovn_topology import CMD_TIMEOUT, OvnkNode, OvnkService, OvnkSpec, PodPort, ovnk_mac, wait_sb
from magw.lab.planes.ovn_topology import tool_env as _env
from magw.lab.verify.ovn_trace import Trace, l3gateway_chassis, microflow, ovn_trace

__all__ = ["CMD_TIMEOUT", "Trace", "microflow", "ovn_missing", "ovn_trace", "sbctl", "wait_sb"]


@attrs.frozen
class OvnDbs:
    dir: Path
    nb: str  # unix:PATH
    sb: str
    pids: tuple[int, ...]


def _read_pid(path: Path, deadline: float) -> int:
    while time.monotonic() < deadline:
        try:
            return int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    raise RuntimeError(f"no pid in {path}")


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited. A detached daemon's parent is init, which may reap it late (or, in some
    sandboxes, never): a zombie counts as exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if _gone(pid):
            return
        time.sleep(0.02)
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextmanager
def ovn_databases(d: Path, northd: bool = True) -> Iterator[OvnDbs]:
    """NB + SB ovsdb-servers (and ovn-northd) in ``d``; every process stopped by PID on exit."""
    d.mkdir(parents=True, exist_ok=True)
    env = _env(d)
    pids: list[int] = []
    try:
        for name in ("nb", "sb"):
            create_db(d, name)
            argv = server_argv(d, name)
            subprocess.run([argv[0], "--detach", *argv[1:]], check=True, env=env, timeout=CMD_TIMEOUT)
            pids.append(_read_pid(d / f"{name}.pid", time.monotonic() + 10))
        if northd:
            argv = northd_argv(d)
            subprocess.run([argv[0], "--detach", *argv[1:]], check=True, env=env, timeout=CMD_TIMEOUT)
            pids.append(_read_pid(d / "northd.pid", time.monotonic() + 10))
        yield OvnDbs(dir=d, nb=f"unix:{d}/nb.sock", sb=f"unix:{d}/sb.sock", pids=tuple(pids))
    finally:
        for pid in reversed(pids):
            _stop(pid)


def nbctl(dbs: OvnDbs, *args: str) -> str:
    return ovn_topology.nbctl(dbs, *args)


def sbctl(dbs: OvnDbs, *args: str) -> str:
    return ovn_topology.sbctl(dbs, *args)


def nb_dump(dbs: OvnDbs) -> str:
    """The whole NB database as text (``ovsdb-client dump``), for before/after comparisons."""
    sock = dbs.nb.removeprefix("unix:")
    out = subprocess.run(
        ["ovsdb-client", "dump", f"unix:{sock}", "OVN_Northbound"],
        check=True, capture_output=True, text=True, timeout=CMD_TIMEOUT,
    )  # fmt: skip
    return out.stdout


@attrs.frozen
class OvnkTopo:
    nodes: tuple[str, ...]
    pod_cidr: IPv4Network
    service_cidr: IPv4Network
    node_subnets: dict[str, IPv4Network]
    pods: dict[str, tuple[str, str, str]]  # pod port -> (node, mac, ip)
    chassis: dict[str, str]  # node (hostname) -> chassis name
    service_vip: str


def build_ovnk(
    dbs: OvnDbs,
    nodes: Sequence[str] = ("node1", "node2", "gw1", "gw2", "gw3"),
    pod_cidr: str = "10.128.0.0/14",
    service_cidr: str = "10.96.0.0/16",
    chassis: bool = True,
) -> OvnkTopo:
    """OVN-Kubernetes' layout for ``nodes`` (see the module docstring); one pod per node: ``default_pod-<node>``
    at .5 of the node's /24, the management port at .2; node i's chassis ``chassis-<node>`` at 172.18.0.(i+1); one
    service ``svc-default-web`` (the service CIDR's .10, port 80) backed by the first pod on 8080."""
    pods_net = IPv4Network(pod_cidr)
    subnets = dict(zip(nodes, pods_net.subnets(new_prefix=24), strict=False))
    pods: dict[str, tuple[str, str, str]] = {}
    specs = []
    for i, node in enumerate(nodes, start=1):
        net = subnets[node]
        pod_ip = net.network_address + 5
        pods[f"default_pod-{node}"] = (node, ovnk_mac(pod_ip), str(pod_ip))
        port = PodPort(name=f"default_pod-{node}", mac=ovnk_mac(pod_ip), ip=pod_ip)
        encap = IPv4Address(f"172.18.0.{i + 1}")
        specs.append(OvnkNode(name=node, subnet=net, chassis=f"chassis-{node}", encap_ip=encap,
                              mgmt_ip=net.network_address + 2, pods=(port,)))  # fmt: skip
    vip = IPv4Network(service_cidr).network_address + 10
    first_pod = IPv4Address(next(iter(pods.values()))[2])
    web = OvnkService(name="svc-default-web", vip=vip, port=80, backends=(first_pod,), target_port=8080)
    ovn_topology.build(dbs, OvnkSpec(pod_cidr=pods_net, nodes=tuple(specs), services=(web,), chassis=chassis))
    return OvnkTopo(
        nodes=tuple(nodes),
        pod_cidr=pods_net,
        service_cidr=IPv4Network(service_cidr),
        node_subnets=subnets,
        pods=pods,
        chassis={node: f"chassis-{node}" for node in nodes},
        service_vip=str(vip),
    )


# --- ovn-trace ---------------------------------------------------------------------------------------------


def port_chassis(dbs: OvnDbs, port: str) -> str:
    """The chassis northd bound an l3gateway port to (SB ``Port_Binding.options:l3gateway-chassis``)."""
    chassis = l3gateway_chassis(dbs, port)
    if chassis is None:
        raise AssertionError(f"port {port} is not an l3gateway port in the SB")
    return chassis


@pytest.fixture
def ovn_dbs(tmp_path: Path) -> Iterator[OvnDbs]:
    reason = ovn_missing()
    if reason:
        pytest.skip(reason)
    with ovn_databases(tmp_path / "ovn") as dbs:
        yield dbs
