"""The WireGuard driver against wireguard-go in network namespaces: two gateways handshake and carry UDP,
each namespace has its own control socket, a restart adopts the running device, a foreign device is refused,
a key rotation is followed, and removal leaves nothing. The kernel backend's cases skip where the module is
missing (these machines), saying so."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path

import attrs
import pytest

from magw.desired.cable.values import WgDevice, WgPeer
from magw.drivers.netns import run_in_netns
from magw.drivers.wireguard import keys
from magw.drivers.wireguard.device import WireGuardDriver
from magw.drivers.wireguard.kernel import kernel_available
from magw.drivers.wireguard.tool import WgError
from tests.support.netns import VethPair, can_use_netns, ip_json, run

pytestmark = [
    pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces"),
    pytest.mark.skipif(shutil.which("wireguard-go") is None, reason="wireguard-go is not installed"),
    pytest.mark.skipif(shutil.which("wg") is None, reason="wireguard-tools (wg) is not installed"),
]
# The userspace cases must run wherever the kernel tests run (a skip fails CI); the kernel backend's may skip
# where the module is missing, and the run's summary counts both (tests/conftest.py, WireguardBackends).
KERNEL = pytest.mark.wireguard_backend("kernel")

PORT = 51820
UNDERLAY = {"a": "192.0.2.1", "b": "192.0.2.2"}
INNER = {"a": "242.0.2.1", "b": "242.0.2.2"}


def _plan(side: str, peer_key: str | None) -> WgDevice:
    other = "b" if side == "a" else "a"
    peers = (
        ()
        if peer_key is None
        else (
            WgPeer(
                public_key=peer_key,
                owner=f"c-{other}/gw",
                endpoint=IPv4Address(UNDERLAY[other]),
                port=PORT,
                allowed_ips=(IPv4Network(f"{INNER[other]}/32"),),
            ),
        )
    )
    return WgDevice(name="magw-wg", listen_port=PORT, mtu=1440, address=IPv4Interface(f"{INNER[side]}/8"), peers=peers)


class Pair:
    def __init__(self, veth: VethPair, tmp: Path) -> None:
        self.ns = {"a": veth.a, "b": veth.b}
        self.veth_b = veth.b_dev
        run(veth.a, "ip", "addr", "add", f"{UNDERLAY['a']}/24", "dev", veth.a_dev)
        run(veth.b, "ip", "addr", "add", f"{UNDERLAY['b']}/24", "dev", veth.b_dev)
        self.dirs = {s: tmp / s for s in "ab"}
        for d in self.dirs.values():
            d.mkdir()
        self.drivers = {s: WireGuardDriver(self.dirs[s], backend="userspace") for s in "ab"}

    def on(self, side: str, fn):  # type: ignore[no-untyped-def]
        return run_in_netns(self.ns[side], fn)

    def public(self, side: str) -> str:
        return str(self.on(side, lambda: self.drivers[side].key()[1]))

    def ensure(self, side: str, plan: WgDevice | None):  # type: ignore[no-untyped-def]
        return self.on(side, lambda: self.drivers[side].ensure(plan))

    def up(self) -> None:
        keys_ = {s: self.public(s) for s in "ab"}
        self.ensure("a", _plan("a", keys_["b"]))
        self.ensure("b", _plan("b", keys_["a"]))

    def close(self) -> None:
        for side in "ab":
            with contextlib.suppress(WgError):
                self.on(side, self.drivers[side].stop)


@pytest.fixture
def pair(veth_pair: VethPair, tmp_path: Path) -> Iterator[Pair]:
    p = Pair(veth_pair, tmp_path)
    try:
        yield p
    finally:
        p.close()


_RECV = (
    "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind((sys.argv[1],9000));"
    "s.settimeout(4);print(s.recvfrom(64)[0].decode())"
)
_SEND = (
    "import socket,sys,time\n"
    "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
    "for _ in range(20):\n s.sendto(b'marker',(sys.argv[1],9000)); time.sleep(0.1)\n"
)


def carries(pair: Pair, src: str, dst: str) -> bool:
    """UDP from ``src``'s namespace to ``dst``'s inner address arrives (bounded: 20 datagrams, 4 s)."""
    recv = subprocess.Popen(
        ["ip", "netns", "exec", pair.ns[dst], "python3", "-c", _RECV, INNER[dst]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run(pair.ns[src], "python3", "-c", _SEND, INNER[dst], check=False)
        out, _ = recv.communicate(timeout=10)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    return out.strip() == "marker"


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_two_gateways_handshake_and_carry_udp(pair: Pair) -> None:
    pair.up()
    assert carries(pair, "a", "b")
    assert carries(pair, "b", "a")
    observed = pair.on("a", pair.drivers["a"].observe)
    assert observed is not None and observed.public_key == pair.public("a")
    (peer,) = observed.peers
    assert peer.public_key == pair.public("b") and peer.latest_handshake > 0
    (link,) = ip_json(pair.ns["a"], "-d", "link", "show", "dev", "magw-wg")
    assert link["mtu"] == 1440 and "UP" in link["flags"]
    addrs = ip_json(pair.ns["a"], "-4", "addr", "show", "dev", "magw-wg")
    assert [(a["local"], a["prefixlen"]) for a in addrs[0]["addr_info"]] == [(INNER["a"], 8)]


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_each_namespace_has_its_own_control_socket(pair: Pair) -> None:
    pair.up()
    # Both namespaces hold a device named magw-wg, and neither's socket is in the host's /run/wireguard.
    for side in "ab":
        assert ip_json(pair.ns[side], "link", "show", "dev", "magw-wg")
    assert not Path("/run/wireguard/magw-wg.sock").exists()


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_second_ensure_changes_nothing(pair: Pair) -> None:
    pair.up()
    again = pair.ensure("a", _plan("a", pair.public("b")))
    assert again.changes == ()


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_a_restarted_driver_adopts_the_running_device(pair: Pair) -> None:
    pair.up()
    pid = pair.drivers["a"]._userspace.pid
    fresh = WireGuardDriver(pair.dirs["a"], backend="userspace")
    result = pair.on("a", lambda: fresh.ensure(_plan("a", pair.public("b"))))
    assert result.changes == ()
    assert fresh._userspace.pid == pid
    assert carries(pair, "a", "b")


def _peer_endpoint(pair: Pair, side: str) -> str | None:
    observed = pair.on(side, pair.drivers[side].observe)
    assert observed is not None
    (peer,) = observed.peers
    return peer.endpoint


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_a_peer_that_roamed_stays_where_wireguard_followed_it(pair: Pair) -> None:
    """a's plan names b at a second address of b's (as a load balancer's address stands for a gateway), but b
    sends from its first: a's device follows b there (roaming). A replan with the same plan leaves it there; a
    plan that moves b sets the new endpoint."""
    run(pair.ns["b"], "ip", "addr", "add", "192.0.2.3/24", "dev", pair.veth_b)
    run(pair.ns["b"], "ip", "addr", "add", "192.0.2.4/24", "dev", pair.veth_b)
    key_b = pair.public("b")
    planned = _plan("a", key_b)
    at_3 = attrs.evolve(planned, peers=(attrs.evolve(planned.peers[0], endpoint=IPv4Address("192.0.2.3")),))
    pair.ensure("a", at_3)
    pair.ensure("b", _plan("b", pair.public("a")))
    assert _peer_endpoint(pair, "a") == "192.0.2.3:51820"
    assert carries(pair, "b", "a")  # b speaks first, from 192.0.2.2
    assert _peer_endpoint(pair, "a") == "192.0.2.2:51820"
    assert pair.ensure("a", at_3).changes == ()
    assert _peer_endpoint(pair, "a") == "192.0.2.2:51820"
    assert carries(pair, "a", "b")
    at_4 = attrs.evolve(planned, peers=(attrs.evolve(planned.peers[0], endpoint=IPv4Address("192.0.2.4")),))
    changes = pair.ensure("a", at_4).changes
    assert changes == (f"peer c-b/gw {key_b} at 192.0.2.4:51820",)
    assert _peer_endpoint(pair, "a") == "192.0.2.4:51820"


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_a_device_we_did_not_make_is_refused(veth_pair: VethPair, tmp_path: Path) -> None:
    run(veth_pair.a, "ip", "tuntap", "add", "magw-wg", "mode", "tun")
    driver = WireGuardDriver(tmp_path, backend="userspace")
    with pytest.raises(WgError, match="refusing to configure a device we did not create"):
        run_in_netns(veth_pair.a, lambda: driver.ensure(_plan("a", None)))
    assert ip_json(veth_pair.a, "link", "show", "dev", "magw-wg")  # left alone


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_a_rotated_key_is_set_and_peers_follow(pair: Pair) -> None:
    pair.up()
    old = pair.public("a")
    keys.rotate(pair.dirs["a"])
    new = pair.public("a")
    assert new != old
    result = pair.ensure("a", _plan("a", pair.public("b")))
    assert f"private key of public key {new}" in result.changes
    assert not carries(pair, "a", "b")  # b still expects the old key: the loss window of a rotation
    pair.ensure("b", _plan("b", new))
    assert carries(pair, "a", "b")


@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_removal_stops_wireguard_go_and_the_device(pair: Pair) -> None:
    pair.up()
    pid = pair.drivers["a"]._userspace.pid
    assert pid is not None
    result = pair.ensure("a", None)
    assert result.changes == ("device removed",)
    assert not ip_json(pair.ns["a"], "link", "show") or all(
        link["ifname"] != "magw-wg" for link in ip_json(pair.ns["a"], "link", "show")
    )
    assert not Path(f"/proc/{pid}").exists() or "wireguard-go" not in Path(f"/proc/{pid}/comm").read_text()


@KERNEL
def test_kernel_backend(veth_pair: VethPair, tmp_path: Path) -> None:
    if not run_in_netns(veth_pair.a, kernel_available):
        pytest.skip("this kernel has no wireguard module (ip link add type wireguard: unknown device type)")
    driver = WireGuardDriver(tmp_path, backend="kernel")
    try:
        result = run_in_netns(veth_pair.a, lambda: driver.ensure(_plan("a", None)))
        assert result.backend == "kernel"
        (link,) = ip_json(veth_pair.a, "-d", "link", "show", "dev", "magw-wg")
        assert link["linkinfo"]["info_kind"] == "wireguard"
    finally:
        run_in_netns(veth_pair.a, driver.stop)
