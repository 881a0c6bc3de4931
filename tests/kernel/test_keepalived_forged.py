"""A forged VRRP advert cannot take an egress VIP: keepalived counts adverts from its unicast peers only.

Real keepalived (Debian 2.2.7) on n1 and n2, candidates of the VIP; n3 on the same underlay is no candidate and
plays the attacker (a pod's packet routed onto the underlay looks the same). It sends VRRPv3 adverts with
priority 255 for the VIP's router id to the holder, built by hand with a correct checksum and TTL 255. With our
config the holder keeps the VIP throughout; in the control, the same config without ``check_unicast_src``, the
holder gives the VIP up: the forged advert works, and only the check stops it.
"""

from __future__ import annotations

import contextlib
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from magw.drivers.keepalived.config import KeepalivedNode, render
from magw.drivers.keepalived.process import Keepalived
from magw.model.egressgw import EgressConfig, EgressVIP
from tests.support.egress_ha_net import VIP, Underlay, build, holders, wait_until

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(shutil.which("keepalived") is None, reason="keepalived (Debian) not installed"),
]
CONFIG = EgressConfig(advert_int=0.1)
VRID = 51
ATTACK_SECONDS = 2.0
PROTO_VRRP = 112

_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 112)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)
s.bind((sys.argv[1], 0))
advert, end = bytes.fromhex(sys.argv[3]), time.monotonic() + float(sys.argv[4])
while time.monotonic() < end:
    s.sendto(advert, (sys.argv[2], 0))
    time.sleep(0.02)
"""


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def forged_advert(source: IPv4Address, destination: IPv4Address) -> bytes:
    """VRRPv3 advertisement (RFC 5798): version 3 type 1, priority 255, one address, 0.1 s interval."""
    body = struct.pack("!BBBBHH", 0x31, VRID, 255, 1, 10, 0) + VIP.packed
    pseudo = source.packed + destination.packed + struct.pack("!BBH", 0, PROTO_VRRP, len(body))
    return body[:6] + struct.pack("!H", _checksum(pseudo + body)) + body[8:]


@contextlib.contextmanager
def two_candidates(tmp: Path, *, check: bool) -> Iterator[Underlay]:
    """n1 (preferred) and n2 run keepalived for the VIP; n3 runs nothing. ``check``: our config as rendered."""
    with contextlib.ExitStack() as stack:
        net = build(stack, 3)
        ips = {f"n{i}": net.ip(i) for i in (1, 2, 3)}
        vip = EgressVIP(name="web", vip=VIP, vrid=VRID, candidates=("n1", "n2"))
        kas = [Keepalived(tmp / f"n{i}", net.nodes[i - 1]) for i in (1, 2)]
        for ka in kas:
            stack.callback(ka.stop)
        for i, ka in enumerate(kas, 1):
            node = KeepalivedNode(name=f"n{i}", interface="eth0", ip=ips[f"n{i}"], fifo=str(ka.fifo))
            text = render(node, (vip,), ips, CONFIG)
            assert "check_unicast_src" in text
            ka.apply(text if check else text.replace("  check_unicast_src\n", ""))
            if i == 1:
                wait_until(lambda: holders(net) == [1], "n1 holds the VIP")
        yield net


def _attack(net: Underlay) -> list[list[int]]:
    """n3 sends forged adverts to n1 for ATTACK_SECONDS (and a little after); the holders seen meanwhile."""
    advert = forged_advert(net.ip(3), net.ip(1))
    args = ["ip", "netns", "exec", net.nodes[2], sys.executable, "-c", _SENDER, str(net.ip(3)), str(net.ip(1)),
            advert.hex(), str(ATTACK_SECONDS)]  # fmt: skip
    sender = subprocess.Popen(args)
    seen: list[list[int]] = []
    try:
        end = time.monotonic() + ATTACK_SECONDS + 0.5
        while time.monotonic() < end:
            seen.append(holders(net))
            time.sleep(0.05)
        assert sender.wait(timeout=20) == 0
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait(timeout=10)
    return seen


def test_a_forged_advert_from_a_non_candidate_does_not_move_the_vip(tmp_path: Path) -> None:
    """n1 holds the VIP in every sample. The forged adverts go to n1 only; n2 never sees them, so a sample in which
    n2 holds the VIP too is n2 missing n1's adverts for 0.3 s (advert_int 0.1 s) on a stalled machine, not the
    attack (one clean-clone CI run saw it once in 36 samples): printed, not judged."""
    with two_candidates(tmp_path, check=True) as net:
        seen = _attack(net)
        assert seen and all(1 in h for h in seen), f"holders seen during the attack: {seen}"
        both = sum(h != [1] for h in seen)
        print(f"{both} of {len(seen)} samples with n2 holding the VIP too (n1's adverts late)")


def test_control_without_the_check_the_forged_advert_takes_the_vip_away(tmp_path: Path) -> None:
    with two_candidates(tmp_path, check=False) as net:
        seen = _attack(net)
        assert any(1 not in h for h in seen), f"n1 kept the VIP: the forged advert is not valid ({seen[-1]})"

