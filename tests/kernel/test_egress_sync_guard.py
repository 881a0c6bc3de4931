"""conntrackd's sync (UDP 3780) has no authentication: a candidate lets it in from the cluster's nodes only.

In the egress world of tests/support/egress_world.py (n1 and n3 are candidates with conntrack sync, the default), a
UDP socket on n1's port 3780 stands where conntrackd listens. A datagram from another node arrives; one from the
outside host and one from a pod of n1 itself do not. The control flushes the guard: the outside host's gets in.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from magw.desired.egressgw.numbers import CONNTRACKD_PORT
from tests.support.egress_world import NODES, OUTSIDE, PODS, World, egress_world
from tests.support.netns import can_use_netns, run

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces"),
]
LISTEN_SECONDS = 3.0

_RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(float(sys.argv[2]))
print("ready", flush=True)
got = []
try:
    while True:
        got.append(s.recvfrom(2048)[0].decode())
except socket.timeout:
    pass
print(" ".join(got), flush=True)
"""

_SENDER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(sys.argv[3].encode(), (sys.argv[1], int(sys.argv[2])))
"""


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with egress_world() as w:
        yield w


def _received(w: World, senders: dict[str, str]) -> list[str]:
    """Each sender namespace (short name) sends its label to n1's sync port; the labels n1's socket got."""
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", w.ns("n1"), sys.executable, "-c", _RECEIVER, str(CONNTRACKD_PORT), str(LISTEN_SECONDS)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        for short, label in senders.items():
            run(w.ns(short), sys.executable, "-c", _SENDER, NODES["n1"], str(CONNTRACKD_PORT), label)
        out, _ = receiver.communicate(timeout=LISTEN_SECONDS + 20)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
    return sorted(out.split())


def test_sync_reaches_a_candidate_only_from_the_nodes(world: World) -> None:
    assert PODS["pl"][0] == "n1" and OUTSIDE
    assert _received(world, {"n3": "node", "out": "outside", "pl": "pod"}) == ["node"]


def test_control_without_the_guard_anyone_gets_in(world: World) -> None:
    run(world.ns("n1"), "nft", "flush", "chain", "ip", "magw-egress", "input")
    try:
        assert _received(world, {"out": "outside", "pl": "pod"}) == ["outside", "pod"]
    finally:
        world.sync("n1")
