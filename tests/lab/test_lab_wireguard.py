"""End to end: the WireGuard cable (``cable: wireguard``) in a lab, with the real daemons and wireguard-go.

Kernel tests. What they prove, from outside the daemons:

- on the lab's WAN (every frame of every port of its bridge, caught with an AF_PACKET socket opened inside the
  WAN namespace, tests/support/wan_capture.py) only WireGuard between the gateways' public addresses is seen:
  no payload marker, no pod address, no VXLAN; the same capture on a ``cable: vxlan`` lab finds all three, so
  the check bites. The datagrams are answered by the pods' echo servers (they got there);
- a gateway that loses power moves only its own flows, and once back it shakes hands again with every remote
  gateway and carries new flows;
- with ``--control-plane kube`` the lab comes up and the broker's Endpoints say ``backend: wireguard`` with the
  node's public key;
- the private key stays in its 0600 file: in no other file of the lab, no log, no status, no command line.

Every lab has a unique name (tests/support/labkit.py) and is always taken down; a failed gateway is always
recovered; every wait is a bounded poll, every traffic loop bounded in count and time.
"""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
import yaml

from magw.drivers.netns import run_in_netns
from magw.drivers.wireguard.keys import KEY_DIR, KEY_FILE
from magw.lab.build import lifecycle as build
from magw.lab.build import netns as lab_netns
from magw.lab.build.state import LabState
from magw.lab.planes import kube
from magw.lab.planes.daemons import agent_status, daemons_installed, node_state_dir
from magw.lab.scenarios import failure
from magw.lab.scenarios.failover import FailoverResult, FlowOutcome, measure_event, measure_failover, measure_recovery
from magw.lab.spec.layout import ECHO_PORT, LabLayout, NodeLayout, PodLayout, layout
from magw.lab.spec.topology import Topology, parse_topology
from magw.model.cable import WG_DEVICE, WG_PORT, check_public_key
from magw.model.vtep import vtep_ip
from magw.sources.file.endpoint_files import endpoint_path
from tests.support import netns as checker
from tests.support.labkit import poll, running_lab, unique_name
from tests.support.wan_capture import ETH_P_ARP, Frame, capture, containing

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not daemons_installed(), reason="magw-route-agent / magw-gateway are not installed (pip -e .)"),
]

DATAGRAMS = 50  # per direction (east -> west, west -> east), spread over the pod pairs
REPLY_WAIT = 1.0  # seconds for each datagram's echo
PAYLOAD_BYTES = 200
# Failover streams: 32 flows of 20 datagrams/s each. Every datagram is encrypted and decrypted by wireguard-go in
# userspace on two gateways each way; the VXLAN lab's 200/s per flow starved these 2-CPU shared machines.
FLOWS = 32
RATE = 20


def topology(cable: str, *, gateways: int, workers: int) -> Topology:
    spec = {"gateways": gateways, "workers": workers, "pods_per_node": 1}
    return parse_topology({"cable": cable, "clusters": [{"id": "east", **spec}, {"id": "west", **spec}]})


@pytest.fixture(scope="module")
def wg_lab() -> Iterator[tuple[LabLayout, LabState]]:
    """east and west, 3 gateways and 1 worker each, one pod per node, cable wireguard, daemons running.

    Three gateways, as in tests/lab/test_lab_failover.py: a resilient group keeps two members when one fails
    (with one member left the kernel does no bucket selection, and a returning member would move flows)."""
    with running_lab(topology("wireguard", gateways=3, workers=1), daemons=True) as built:
        yield built


# -- traffic with a marker -------------------------------------------------------------------------


def _udp_socket() -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def exchange(client: PodLayout, server: PodLayout, marker: str, count: int) -> list[dict[str, Any]]:
    """``count`` UDP datagrams carrying ``marker`` from ``client`` to ``server``'s echo server, one at a time, each
    waited for at most REPLY_WAIT seconds; the echo replies received (each names the server and the source it saw).

    The socket is made inside the client pod's namespace (run_in_netns) and keeps it: it is used from here."""
    sock = run_in_netns(client.namespace, _udp_socket)
    replies: list[dict[str, Any]] = []
    with sock:
        sock.connect((str(server.ip), ECHO_PORT))
        for i in range(count):
            head = f"{marker} {client.name}->{server.name} #{i} ".encode()
            sock.send(head + b"." * max(0, PAYLOAD_BYTES - len(head)))
            ready, _w, _x = select.select([sock], [], [], REPLY_WAIT)
            if ready:
                replies.append(json.loads(sock.recv(4096)))
        deadline = time.monotonic() + REPLY_WAIT  # late echoes of the last datagrams (bounded)
        while len(replies) < count and time.monotonic() < deadline:
            ready, _w, _x = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                replies.append(json.loads(sock.recv(4096)))
    return replies


def pod_pairs(lab: LabLayout) -> list[tuple[PodLayout, PodLayout]]:
    """Every east pod to a west pod, and every west pod back to an east pod (another node than its forward pair)."""
    east, west = lab.cluster("east").pods, lab.cluster("west").pods
    forward = list(zip(east, west, strict=True))
    back = [(w, east[(i + 1) % len(east)]) for i, w in enumerate(west)]
    return forward + back


def send_marked(lab: LabLayout, marker: str, per_direction: int = DATAGRAMS) -> dict[str, tuple[int, list[str]]]:
    """Marked datagrams over every pod pair; pair -> (sent, what is wrong with the replies: missing, or not from
    the right server, or the server saw another source than the client pod)."""
    pairs = pod_pairs(lab)
    per_pair = -(-per_direction * 2 // len(pairs))
    out = {}
    for client, server in pairs:
        replies = exchange(client, server, marker, per_pair)
        wrong = [f"{len(replies)}/{per_pair} echoed"] if len(replies) != per_pair else []
        wrong += [f"reply {r}" for r in replies if (r.get("server"), r.get("seen_ip")) != (server.name, str(client.ip))]
        out[f"{client.name}->{server.name}"] = (per_pair, wrong)
    return out


def captured_while_sending(lab: LabLayout, marker: str, per_direction: int = DATAGRAMS) -> list[Frame]:
    """Every WAN frame while the marked datagrams go both ways; asserts that each datagram was echoed."""
    with capture(lab.wan_ns, max_frames=200_000, max_seconds=60.0) as cap:
        results = send_marked(lab, marker, per_direction)
        frames = cap.finish()
        assert (cap.truncated, cap.error) == (False, None)
    assert sum(sent for sent, _ in results.values()) >= 2 * per_direction
    assert {pair: wrong for pair, (_sent, wrong) in results.items() if wrong} == {}
    return frames


def pod_address_bytes(lab: LabLayout) -> dict[str, bytes]:
    return {f"{p.name} {p.ip}": p.ip.packed for p in lab.pods}


def not_wireguard(lab: LabLayout, frames: Sequence[Frame]) -> list[str]:
    """The frames that are neither ARP nor WireGuard (UDP port WG_PORT to WG_PORT) between two gateways' public
    addresses."""
    public = {gw.public_ip for gw in lab.gateways}
    odd = []
    for f in frames:
        if f.ethertype == ETH_P_ARP:
            continue
        udp = f.udp()
        if udp is None or not ({udp[0], udp[1]} <= public and udp[0] != udp[1] and udp[2] == udp[3] == WG_PORT):
            odd.append(f.describe())
    return odd


def udp_ports(frames: Sequence[Frame]) -> set[int]:
    return {u[3] for f in frames if (u := f.udp()) is not None}


def leaks(lab: LabLayout, frames: Sequence[Frame], marker: str) -> dict[str, int]:
    """What of the pods' traffic is readable on the WAN: the marker, a pod address; -> number of frames."""
    found = {"marker": len(containing(frames, marker.encode()))}
    found |= {what: len(containing(frames, raw)) for what, raw in pod_address_bytes(lab).items()}
    return {what: n for what, n in found.items() if n}


def new_marker() -> str:
    return f"magw-wg-secret-{uuid.uuid4().hex}"


# -- no cleartext on the WAN --------------------------------------------------------------------


def test_vxlan_cable_shows_the_pods_traffic_on_the_wan() -> None:
    """The control: with ``cable: vxlan`` the same capture reads the marker, the pods' addresses and VXLAN
    (UDP 4500) on the WAN, and sees no WireGuard."""
    with running_lab(topology("vxlan", gateways=1, workers=1), daemons=True) as (lab, _st):
        marker = new_marker()
        frames = captured_while_sending(lab, marker)
    found = leaks(lab, frames, marker)
    assert found.get("marker", 0) >= 2 * DATAGRAMS  # every request, at least once (each crosses two ports)
    assert set(found) == {"marker", *pod_address_bytes(lab)}
    ports = udp_ports(frames)
    assert 4500 in ports and WG_PORT not in ports


# -- control plane kube -------------------------------------------------------------------------


def wg_pubkey(private: str) -> str:
    done = subprocess.run(["wg", "pubkey"], input=private.encode(), capture_output=True, timeout=10, check=True)
    return done.stdout.decode().strip()


def private_key(st: LabState, gw: NodeLayout) -> str:
    return (node_state_dir(st, gw) / KEY_DIR / KEY_FILE).read_text().strip()


def test_kube_control_plane_publishes_wireguard_endpoints() -> None:
    """``control_plane="kube"`` with ``cable: wireguard``: ``up`` returns (it waited for pods to reach the other
    cluster), every gateway's Endpoint in the broker's emulator (and in each cluster's) says ``backend:
    wireguard`` with ``backend_config.publicKey`` the public key of that node's private key file, no Endpoint
    holds a private key, and the WAN carries only WireGuard while pods talk."""
    topo = topology("wireguard", gateways=2, workers=1)
    name = unique_name()
    try:
        st = build.up(topo, name=name, daemons=True, wait_timeout=90.0, control_plane="kube")
        lab = layout(name, topo)
        keys = {gw.name: private_key(st, gw) for gw in lab.gateways}
        want = {
            f"{gw.cluster}-{gw.name}": {
                "cluster_id": gw.cluster,
                "hostname": gw.name,
                "private_ip": str(gw.node_ip),
                "public_ip": str(gw.public_ip),
                "backend": "wireguard",
                "backend_config": {"publicKey": wg_pubkey(keys[gw.name])},
            }
            for gw in lab.gateways
        }
        assert all(check_public_key(v["backend_config"]["publicKey"]) is None for v in want.values())
        assert len({v["backend_config"]["publicKey"] for v in want.values()}) == len(want)
        for api in (kube.broker_api(st), *kube.api_servers(st)):
            objects = api.http().list("Endpoint", api.namespace)
            assert {o["metadata"]["name"]: o["spec"] for o in objects} == want, api.name
            text = json.dumps(objects)
            assert [gw for gw, key in keys.items() if key in text] == []
        frames = captured_while_sending(lab, new_marker(), per_direction=10)
        assert not_wireguard(lab, frames) == []
        assert WG_PORT in udp_ports(frames)
    finally:
        build.down(name)


# -- the WireGuard lab: WAN, failover, key ------------------------------------------------------------


def test_wireguard_cable_shows_only_wireguard_on_the_wan(wg_lab: tuple[LabLayout, LabState]) -> None:
    """With ``cable: wireguard``, while 50 marked datagrams go east -> west and 50 west -> east (each echoed),
    no WAN frame holds the marker or any pod address, and every WAN frame but ARP is WireGuard (UDP 51820 both
    ends) between two gateways' public addresses; such frames were seen, both ways between the clusters."""
    lab, _st = wg_lab
    marker = new_marker()
    frames = captured_while_sending(lab, marker)
    assert leaks(lab, frames, marker) == {}
    assert not_wireguard(lab, frames) == []
    clusters = {gw.public_ip: gw.cluster for gw in lab.gateways}
    directions = {(clusters[u[0]], clusters[u[1]]) for f in frames if (u := f.udp()) is not None}
    assert directions == {("east", "west"), ("west", "east")}


# -- failover with WireGuard -----------------------------------------------------------------------


def referenced_vteps(node: NodeLayout) -> set[IPv4Address]:
    """Every VTEP a route (any table) or nexthop group of ``node`` sends to (``ip -json``).
    Not keep_client_ip's steer table (11000): it routes to the nodes that host a service's pods, a gateway among
    them as any node, not through gateways (docs/client-ip.md); its return tables (11001-11014) count."""
    vteps = set()
    for route in checker.ip_json(node.namespace, "route", "show", "table", "all"):
        if str(route.get("table")) == "11000":
            continue
        hops = route.get("nexthops") or ([route] if "gateway" in route else [])
        vteps |= {IPv4Address(h["gateway"]) for h in hops if "gateway" in h}
    nexthops = checker.ip_json(node.namespace, "nexthop", "show")
    by_id = {nh["id"]: nh for nh in nexthops}
    for group in (nh for nh in nexthops if "group" in nh):
        vteps |= {IPv4Address(by_id[m["id"]]["gateway"]) for m in group["group"] if "gateway" in by_id[m["id"]]}
    return {v for v in vteps if v.packed[0] in (240, 241)}


def vteps_of(gw: NodeLayout) -> set[IPv4Address]:
    return {vtep_ip(gw.node_ip, inter_cluster=False), vtep_ip(gw.node_ip, inter_cluster=True)}


def users_of(lab: LabLayout, gw: NodeLayout) -> list[NodeLayout]:
    """The nodes that group toward ``gw``: the workers of its cluster and the gateways of the others."""
    return [n for n in lab.nodes if (n.cluster == gw.cluster) != n.gateway]


def wg_pid(st: LabState, gw: NodeLayout) -> int:
    return int((node_state_dir(st, gw) / KEY_DIR / "wireguard-go.pid").read_text().strip())


def pid_alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] != "Z"


def latest_handshakes(st: LabState, gw: NodeLayout) -> dict[str, int]:
    """Peer public key -> unix time of its latest handshake (0: none) on ``gw``'s magw-wg, from ``wg show`` run in
    the mount namespace of the gateway's wireguard-go (where its control socket is); {} without one."""
    try:
        pid = wg_pid(st, gw)
    except (OSError, ValueError):
        return {}
    done = subprocess.run(
        ["nsenter", f"--target={pid}", "--mount", "--net", "wg", "show", WG_DEVICE, "latest-handshakes"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {}
    return {key: int(ts) for key, ts in (line.split() for line in done.stdout.splitlines() if line.strip())}


def published_keys(st: LabState, lab: LabLayout) -> dict[str, str]:
    """Gateway -> the public key of its Endpoint in the file broker."""
    out = {}
    for gw in lab.gateways:
        doc = yaml.safe_load(endpoint_path(st.broker_dir, gw.cluster, gw.name).read_text())
        out[gw.name] = doc["backend_config"]["publicKey"]
    return out


def shook_hands_since(st: LabState, lab: LabLayout, gw: NodeLayout, since: float) -> bool:
    """True when ``gw`` and every gateway of the other clusters have a handshake with each other at or after
    ``since`` (whole seconds, as wg reports them), on both ends."""
    keys = published_keys(st, lab)
    remotes = [g for g in lab.gateways if g.cluster != gw.cluster]
    mine = latest_handshakes(st, gw)
    if any(mine.get(keys[r.name], 0) < int(since) for r in remotes):
        return False
    return all(latest_handshakes(st, r).get(keys[gw.name], 0) >= int(since) for r in remotes)


def seen_up(st: LabState, lab: LabLayout, observer: str, peer: str) -> bool:
    health = (agent_status(st, lab.node(observer)) or {}).get("health") or {}
    return any(p["hostname"] == peer and p["state"] == "up" for p in health.get("peers", []))


def new_gateways(flow: FlowOutcome) -> list[str]:
    """The gateways a flow crosses at the end but did not cross before the event. Only these count as a move: on a
    busy machine a starved sender pauses longer than the sets remember a flow (400 ms), so a read can miss a
    gateway the flow still crosses, but it never shows one the flow does not cross."""
    return sorted(flow.after.gateways - flow.before.gateways)


def assert_clean_failover(result: FailoverResult) -> None:
    """Flows that never crossed the victim lost nothing and cross no other gateway than before; every flow runs at
    the end (nothing lost at the tail), none through the victim."""
    untouched, why = result.untouched, result.summary()
    assert len(result.crossed) > 0 and len(untouched) > 0, why  # 32 flows over 3x3 gateways: both kinds exist
    assert [(f.sport, f.lost) for f in untouched] == [(f.sport, 0) for f in untouched], why
    assert [(f.sport, new_gateways(f)) for f in untouched] == [(f.sport, []) for f in untouched], why
    assert [(f.sport, f.lost_tail) for f in result.flows] == [(f.sport, 0) for f in result.flows], why
    assert [f.sport for f in result.flows if result.victim in f.after.gateways] == [], why


def test_failover_moves_only_the_dead_gateways_flows_and_recovery_shakes_hands_again(
    wg_lab: tuple[LabLayout, LabState],
) -> None:
    """32 paced UDP flows east-w1 -> west-w1 through WireGuard; east-gw2 loses power mid-stream (links down, its
    daemons and wireguard-go killed): the flows that crossed it move and run on, the others lose nothing and keep
    their gateways. It comes back mid-stream: no established flow moves or loses anything; its new wireguard-go
    shakes hands with every west gateway (both ends see a handshake newer than the recovery), and new flows
    cross it and run."""
    lab, st = wg_lab
    victim = lab.node("east-gw2")
    client, server = lab.cluster("east").pods_of("east-w1")[0], lab.cluster("west").pods_of("west-w1")[0]
    stream: dict[str, Any] = {"client": client, "server": server, "flows": FLOWS, "rate": RATE}
    old_pid = wg_pid(st, victim)
    assert pid_alive(old_pid)
    try:
        failed = measure_failover(lab, st, victim=victim.name, **stream, duration=10.0, fail_at=2.0)
        assert_clean_failover(failed)
        assert not pid_alive(old_pid)  # power loss: the device is gone with the node
        recovered = measure_recovery(lab, st, victim=victim.name, **stream, duration=10.0, recover_at=1.5)
    finally:
        failure.recover(st.name, victim.name)
    # Resilient groups move only idle buckets back: no established flow changes gateway or loses a datagram.
    flows, why = recovered.flows, recovered.summary()
    assert [(f.sport, new_gateways(f)) for f in flows] == [(f.sport, []) for f in flows], why
    assert [(f.sport, f.lost) for f in flows] == [(f.sport, 0) for f in flows], why

    assert wg_pid(st, victim) != old_pid and pid_alive(wg_pid(st, victim))
    poll("east-gw2 and every west gateway shook hands since the recovery",
         lambda: shook_hands_since(st, lab, victim, recovered.failed_at))  # fmt: skip
    poll("every user groups toward east-gw2 again", lambda: all(
        referenced_vteps(n) & vteps_of(victim) for n in users_of(lab, victim)))  # fmt: skip
    poll("east-w1 and west-gw1 see east-gw2 up", lambda: all(
        seen_up(st, lab, o, victim.name) for o in ("east-w1", "west-gw1")))  # fmt: skip
    fresh = measure_event(lab, st, event=lambda: None, victim=victim.name, **stream, duration=6.0, event_at=1.5)
    # New flows go through the recovered gateway again, and run (echoed to the end). Not asserted: no loss at all
    # in this steady stream; on a loaded 2-CPU machine a lone datagram is sometimes lost (wireguard-go starved).
    through = fresh.crossed
    assert len(through) > 0, fresh.summary()
    assert [(f.sport, f.lost_tail, f.sent > f.lost) for f in through] == [(f.sport, 0, True) for f in through]


# -- the private key stays on the node --------------------------------------------------------


def key_forms(key: str) -> dict[str, bytes]:
    raw = base64.b64decode(key, validate=True)
    return {"base64": key.encode(), "hex": raw.hex().encode(), "raw": raw}


def lab_files(st: LabState, skip: set[Path]) -> list[Path]:
    """Every regular file under the lab's state directory but ``skip`` (bounded: 10 000 files)."""
    out = []
    for root, _dirs, files in os.walk(st.dir):
        for f in files:
            path = Path(root) / f
            if path not in skip and stat.S_ISREG(path.lstat().st_mode):
                out.append(path)
        if len(out) > 10_000:
            break
    return out


def test_private_key_never_leaves_its_file(wg_lab: tuple[LabLayout, LabState]) -> None:
    """Each gateway's ``state/<node>/wireguard/private.key`` is a regular file of mode 0600 in a 0700 directory,
    holding a WireGuard key whose public key is the one its Endpoint publishes. No other file of the lab (the
    broker's documents, every log, every status file, wireguard-go's log, the state file) and no command line
    or environment of a process in the lab's namespaces holds it, as base64, hex or raw bytes."""
    lab, st = wg_lab
    paths = {gw.name: node_state_dir(st, gw) / KEY_DIR / KEY_FILE for gw in lab.gateways}
    modes = {
        gw: (stat.S_ISREG(p.lstat().st_mode), oct(stat.S_IMODE(p.lstat().st_mode)),
             oct(stat.S_IMODE(p.parent.lstat().st_mode)))
        for gw, p in paths.items()
    }  # fmt: skip
    assert modes == dict.fromkeys(paths, (True, "0o600", "0o700"))
    keys = {gw: p.read_text().strip() for gw, p in paths.items()}
    assert {gw: check_public_key(k) for gw, k in keys.items()} == dict.fromkeys(keys)  # 32 bytes, base64
    assert {gw: wg_pubkey(k) for gw, k in keys.items()} == published_keys(st, lab)

    files = lab_files(st, skip=set(paths.values()))
    looked_at = {p.relative_to(st.dir).parts[0] for p in files}
    assert {"broker", "logs", "status", "state", "state.json"} <= looked_at
    assert [p for p in files if p.parent == st.logs_dir and p.name.startswith("route-agent-")] != []
    found = []
    for path in files:
        data = path.read_bytes()
        found += [f"{path}: {gw}'s key ({form})" for gw, key in keys.items()
                  for form, needle in key_forms(key).items() if needle in data]  # fmt: skip
    pids = sorted({pid for ns in lab.namespaces for pid in lab_netns.namespace_pids(ns)})
    assert len([pid for pid in pids if proc_file(pid, "cmdline").startswith(b"wireguard-go\0")]) == len(keys)
    for pid in pids:
        for what in ("cmdline", "environ"):
            data = proc_file(pid, what)
            found += [f"/proc/{pid}/{what}: {gw}'s key ({form})" for gw, key in keys.items()
                      for form, needle in key_forms(key).items() if needle in data]  # fmt: skip
    assert found == []


def proc_file(pid: int, what: str) -> bytes:
    """``/proc/PID/WHAT``; empty for a process gone meanwhile."""
    try:
        return Path(f"/proc/{pid}/{what}").read_bytes()
    except OSError:
        return b""
