"""A real OVN control plane per test: NB and SB ovsdb-servers and ovn-northd in a temp dir, and an
OVN-Kubernetes-like NB topology built with ``ovn-nbctl`` (the oracle side: not our driver).

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
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from ipaddress import IPv4Network
from pathlib import Path

import attrs
import pytest

OVN_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovn-trace")
NB_SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"
SB_SCHEMA = "/usr/share/ovn/ovn-sb.ovsschema"
CMD_TIMEOUT = 30


def ovn_missing() -> str | None:
    """Why OVN tests cannot run here, or None."""
    missing = [t for t in OVN_TOOLS if shutil.which(t) is None]
    if missing:
        return f"OVN tools missing: {', '.join(missing)} (Debian ovn-central; scripts/setup.sh installs it)"
    if not (os.path.exists(NB_SCHEMA) and os.path.exists(SB_SCHEMA)):
        return f"OVN schemas missing ({NB_SCHEMA}, {SB_SCHEMA})"
    return None


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


def _env(d: Path) -> dict[str, str]:
    return {**os.environ, "OVS_RUNDIR": str(d), "OVS_DBDIR": str(d), "OVS_LOGDIR": str(d)}


@contextmanager
def ovn_databases(d: Path, northd: bool = True) -> Iterator[OvnDbs]:
    """NB + SB ovsdb-servers (and ovn-northd) in ``d``; every process stopped by PID on exit."""
    d.mkdir(parents=True, exist_ok=True)
    env = _env(d)
    pids: list[int] = []
    try:
        for name, schema in (("nb", NB_SCHEMA), ("sb", SB_SCHEMA)):
            subprocess.run(["ovsdb-tool", "create", str(d / f"{name}.db"), schema], check=True, env=env)
            subprocess.run(
                [
                    "ovsdb-server", "--detach", "--no-chdir", f"--pidfile={d / name}.pid", f"--unixctl={d / name}.ctl",
                    f"--remote=punix:{d / name}.sock", f"--log-file={d / name}.log", str(d / f"{name}.db"),
                ],
                check=True, env=env, timeout=CMD_TIMEOUT,
            )  # fmt: skip
            pids.append(_read_pid(d / f"{name}.pid", time.monotonic() + 10))
        if northd:
            subprocess.run(
                [
                    "ovn-northd", "--detach", "--no-chdir", f"--pidfile={d}/northd.pid", f"--unixctl={d}/northd.ctl",
                    f"--ovnnb-db=unix:{d}/nb.sock", f"--ovnsb-db=unix:{d}/sb.sock", f"--log-file={d}/northd.log",
                ],
                check=True, env=env, timeout=CMD_TIMEOUT,
            )  # fmt: skip
            pids.append(_read_pid(d / "northd.pid", time.monotonic() + 10))
        yield OvnDbs(dir=d, nb=f"unix:{d}/nb.sock", sb=f"unix:{d}/sb.sock", pids=tuple(pids))
    finally:
        for pid in reversed(pids):
            _stop(pid)


def _ctl(tool: str, db: str, d: Path, args: tuple[str, ...]) -> str:
    out = subprocess.run(
        [tool, f"--db={db}", "--timeout=20", *args],
        check=True, capture_output=True, text=True, env=_env(d), timeout=CMD_TIMEOUT,
    )  # fmt: skip
    return out.stdout


def nbctl(dbs: OvnDbs, *args: str) -> str:
    return _ctl("ovn-nbctl", dbs.nb, dbs.dir, args)


def sbctl(dbs: OvnDbs, *args: str) -> str:
    return _ctl("ovn-sbctl", dbs.sb, dbs.dir, args)


def nb_dump(dbs: OvnDbs) -> str:
    """The whole NB database as text (``ovsdb-client dump``), for before/after comparisons."""
    sock = dbs.nb.removeprefix("unix:")
    out = subprocess.run(
        ["ovsdb-client", "dump", f"unix:{sock}", "OVN_Northbound"],
        check=True, capture_output=True, text=True, timeout=CMD_TIMEOUT,
    )  # fmt: skip
    return out.stdout


def wait_sb(dbs: OvnDbs) -> None:
    """Wait until northd has compiled the current NB into the SB."""
    nbctl(dbs, "--wait=sb", "sync")


@attrs.frozen
class OvnkTopo:
    nodes: tuple[str, ...]
    pod_cidr: IPv4Network
    service_cidr: IPv4Network
    node_subnets: dict[str, IPv4Network]
    pods: dict[str, tuple[str, str, str]]  # pod port -> (node, mac, ip)
    chassis: dict[str, str]  # node (hostname) -> chassis name
    service_vip: str


def _mac(prefix: str, ip: str) -> str:
    return prefix + ":".join(f"{int(o):02x}" for o in ip.split("."))


def _router_pair(dbs: OvnDbs, router: str, lrp: str, mac: str, net: str, switch: str, lsp: str) -> None:
    nbctl(
        dbs, "lrp-add", router, lrp, mac, net,
        "--", "lsp-add", switch, lsp, "--", "lsp-set-type", lsp, "router",
        "--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, f"router-port={lrp}",
    )  # fmt: skip


def build_ovnk(
    dbs: OvnDbs,
    nodes: Sequence[str] = ("node1", "node2", "gw1", "gw2", "gw3"),
    pod_cidr: str = "10.128.0.0/14",
    service_cidr: str = "10.96.0.0/16",
    chassis: bool = True,
) -> OvnkTopo:
    """OVN-Kubernetes' layout for ``nodes`` (see the module docstring); one pod per node."""
    pods_net = IPv4Network(pod_cidr)
    subnets = dict(zip(nodes, pods_net.subnets(new_prefix=24), strict=False))
    nbctl(dbs, "lr-add", "ovn_cluster_router")
    nbctl(dbs, "ls-add", "join")
    _router_pair(dbs, "ovn_cluster_router", "rtoj-ovn_cluster_router", "0a:58:64:40:00:01", "100.64.0.1/16", "join",
                 "jtor-ovn_cluster_router")  # fmt: skip
    pods: dict[str, tuple[str, str, str]] = {}
    chassis_of: dict[str, str] = {}
    for i, node in enumerate(nodes, start=1):
        net = subnets[node]
        gw_ip = str(net.network_address + 1)
        nbctl(dbs, "ls-add", node, "--", "set", "logical_switch", node, f"other_config:subnet={net}")
        _router_pair(dbs, "ovn_cluster_router", f"rtos-{node}", _mac("0a:58:", gw_ip), f"{gw_ip}/24", node,
                     f"stor-{node}")  # fmt: skip
        mp_ip = str(net.network_address + 2)
        nbctl(dbs, "lsp-add", node, f"k8s-{node}", "--", "lsp-set-addresses", f"k8s-{node}",
              f"{_mac('0a:58:', mp_ip)} {mp_ip}")  # fmt: skip
        pod_ip = str(net.network_address + 5)
        pod = f"default_pod-{node}"
        pods[pod] = (node, _mac("0a:58:", pod_ip), pod_ip)
        nbctl(dbs, "lsp-add", node, pod, "--", "lsp-set-addresses", pod, f"{pods[pod][1]} {pod_ip}")
        gr = f"GR_{node}"
        chassis_name = f"chassis-{node}"
        chassis_of[node] = chassis_name
        join_ip = f"100.64.0.{i + 1}"
        nbctl(dbs, "lr-add", gr, "--", "set", "logical_router", gr, f"options:chassis={chassis_name}")
        _router_pair(dbs, gr, f"rtoj-{gr}", _mac("0a:58:", join_ip), f"{join_ip}/16", "join", f"jtor-{gr}")
        nbctl(dbs, "--policy=src-ip", "lr-route-add", "ovn_cluster_router", str(net), join_ip)
        if chassis:
            sbctl(dbs, "chassis-add", chassis_name, "geneve", f"172.18.0.{i + 1}")
            sbctl(dbs, "set", "chassis", chassis_name, f"hostname={node}")
    # OVN-Kubernetes' own policies: pod to pod and pod to join are allowed as they are.
    nbctl(dbs, "lr-policy-add", "ovn_cluster_router", "102", f"ip4.src == {pod_cidr} && ip4.dst == {pod_cidr}",
          "allow")  # fmt: skip
    nbctl(dbs, "lr-policy-add", "ovn_cluster_router", "102", f"ip4.src == {pod_cidr} && ip4.dst == 100.64.0.0/16",
          "allow")  # fmt: skip
    first_pod = next(iter(pods.values()))
    vip = str(IPv4Network(service_cidr).network_address + 10)
    nbctl(dbs, "lb-add", "svc-default-web", f"{vip}:80", f"{first_pod[2]}:8080", "tcp")
    nbctl(dbs, "create", "Load_Balancer_Group", "name=clusterLBGroup")
    lb = nbctl(dbs, "--bare", "--columns=_uuid", "find", "Load_Balancer", "name=svc-default-web").strip()
    nbctl(dbs, "add", "Load_Balancer_Group", "clusterLBGroup", "load_balancer", lb)
    group = nbctl(dbs, "--bare", "--columns=_uuid", "find", "Load_Balancer_Group", "name=clusterLBGroup").strip()
    for node in nodes:
        nbctl(dbs, "add", "Logical_Router", f"GR_{node}", "load_balancer_group", group)
    return OvnkTopo(
        nodes=tuple(nodes),
        pod_cidr=pods_net,
        service_cidr=IPv4Network(service_cidr),
        node_subnets=subnets,
        pods=pods,
        chassis=chassis_of,
        service_vip=vip,
    )


# --- ovn-trace ---------------------------------------------------------------------------------------------


@attrs.frozen
class Trace:
    """What ``ovn-trace --detailed`` printed, and the facts tests assert on, parsed from that text only."""

    text: str

    @property
    def datapaths(self) -> list[str]:
        """Every logical datapath the packet entered, in order (``ingress(dp="X", ...)``)."""
        return re.findall(r'^\s*ingress\(dp="([^"]+)"', self.text, re.M)

    @property
    def outputs(self) -> list[tuple[str, str]]:
        """Every ``/* output to "PORT", type "TYPE" */``: (port, type)."""
        return re.findall(r'/\* output to "([^"]+)", type "([^"]*)" \*/', self.text)

    @property
    def next_hops(self) -> list[str]:
        """Every routing decision's next hop (``reg0 = A.B.C.D`` set by lr_in_ip_routing)."""
        return re.findall(r"\breg0 = (\d+\.\d+\.\d+\.\d+);", self.text)

    @property
    def last_output(self) -> tuple[str, str] | None:
        outs = self.outputs
        return outs[-1] if outs else None


def microflow(inport: str, eth_src: str, eth_dst: str, src: str, dst: str, sport: int = 40000, dport: int = 80) -> str:
    return (
        f'inport == "{inport}" && eth.src == {eth_src} && eth.dst == {eth_dst} && ip4.src == {src} && '
        f"ip4.dst == {dst} && ip.ttl == 64 && tcp && tcp.src == {sport} && tcp.dst == {dport}"
    )


def ovn_trace(dbs: OvnDbs, datapath: str, flow: str, select_id: int | None = None, ct: str = "new,trk") -> Trace:
    """``ovn-trace --detailed`` on the SB database (no datapath needed). ``select_id`` fixes the ECMP bucket
    that ``select()`` takes, as a datapath's flow hash would; ``ct`` is the conntrack state every ``ct_*``
    action returns (a new connection by default, so load balancers pick a backend)."""
    args = ["ovn-trace", f"--db={dbs.sb}", "--detailed", f"--ct={ct}"]
    if select_id is not None:
        args.append(f"--select-id={select_id}")
    out = subprocess.run(
        [*args, datapath, flow], check=True, capture_output=True, text=True, env=_env(dbs.dir), timeout=CMD_TIMEOUT
    )
    return Trace(out.stdout)


def port_chassis(dbs: OvnDbs, port: str) -> str:
    """The chassis northd bound an l3gateway port to (SB ``Port_Binding.options:l3gateway-chassis``)."""
    out = sbctl(dbs, "--bare", "--columns=options", "find", "Port_Binding", f"logical_port={port}")
    m = re.search(r"l3gateway-chassis=([^\s,]+)", out)
    if m is None:
        raise AssertionError(f"port {port} is not an l3gateway port in the SB: {out!r}")
    return m.group(1).strip('"')


@pytest.fixture
def ovn_dbs(tmp_path: Path) -> Iterator[OvnDbs]:
    reason = ovn_missing()
    if reason:
        pytest.skip(reason)
    with ovn_databases(tmp_path / "ovn") as dbs:
        yield dbs
