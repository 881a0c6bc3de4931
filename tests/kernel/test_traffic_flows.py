"""``python -m magw.lab.payload.traffic flows`` over UDP and TCP, and the spread's TCP counters, in two real
namespaces.

The OVN lab measures how flows spread over gateways with TCP connections (OVN's ECMP in the userspace datapath
hashes no UDP ports, docs/lab.md), so the tool's TCP mode and the counter that counts only the segments carrying
a request must hold: every request of every connection answered, and exactly one counted segment per request at
the receiving device (SYN, ACK and FIN segments not counted). The oracles are the echo server's replies and
nft's own counter, read with ``nft -j``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from magw.lab.observe.spread import COUNT_TABLE, TUNNEL, _count_table
from tests.support.netns import VethPair, can_use_netns, run, veth_between

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(not can_use_netns(), reason="needs root and network namespaces")]

PORT = 8080  # the spread's counters match the lab's echo port
FLOWS, PACKETS = 8, 5


@pytest.fixture
def served(ns_factory) -> Iterator[VethPair]:  # type: ignore[no-untyped-def]
    """Client ``a`` (10.9.0.1) and server ``b`` (10.9.0.2, an echo server), joined by a veth whose server end is
    named as the gateways' tunnel device, so the spread's counter table hooks it."""
    pair = veth_between(ns_factory(), ns_factory(), "v0", TUNNEL)
    run(pair.a, "ip", "addr", "add", "10.9.0.1/24", "dev", "v0")
    run(pair.b, "ip", "addr", "add", "10.9.0.2/24", "dev", TUNNEL)
    server = subprocess.Popen(
        ["ip", "netns", "exec", pair.b, sys.executable, "-m", "magw.lab.payload.traffic", "serve", "--name", "srv",
         "--port", str(PORT), "--max-seconds", "60"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and "traffic.serving" in server.stdout.readline()
        yield pair
    finally:
        server.terminate()
        server.wait(timeout=10)


def _flows(ns: str, proto: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "magw.lab.payload.traffic", "flows", "--target",
         f"10.9.0.2:{PORT}", "--flows", str(FLOWS), "--packets", str(PACKETS), "--timeout", "5", "--proto", proto],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc: dict = json.loads(out.stdout)  # type: ignore[type-arg]
    return doc


def _retransmitted(ns: str) -> int:
    """The namespace's TCP ``RetransSegs`` (``/proc/net/snmp`` shows the reading process's namespace)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"], capture_output=True, text=True,
                         timeout=10, check=True).stdout  # fmt: skip
    names, values = (line.split()[1:] for line in out.splitlines() if line.startswith("Tcp:"))
    return int(dict(zip(names, values, strict=True))["RetransSegs"])


def _counted(ns: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "counter", "netdev", COUNT_TABLE,
                          "tunnel_rx"], capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
    return sum(int(c["counter"]["packets"]) for c in json.loads(out)["nftables"] if "counter" in c)


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_flows_are_answered_from_distinct_ports_and_counted_once_per_request(served: VethPair, proto: str) -> None:
    subprocess.run(["ip", "netns", "exec", served.b, "nft", "-f", "-"], input=_count_table(frozenset({TUNNEL}), proto),
                   text=True, timeout=10, check=True)  # fmt: skip
    doc = _flows(served.a, proto)
    assert (doc["proto"], doc["sent"], doc["received"]) == (proto, FLOWS * PACKETS, FLOWS * PACKETS)
    assert len({f["sport"] for f in doc["per_flow"]}) == FLOWS
    assert all(f["received"] == PACKETS and f["seen_ips"] == ["10.9.0.1"] for f in doc["per_flow"])
    assert doc["servers"] == {"srv": FLOWS * PACKETS}
    # One per request: no handshake or bare ACK counted. A loaded machine may retransmit a request (an RTO or a
    # tail-loss probe); the copy carries data and is counted again, so the client's retransmitted segments are
    # allowed on top (they also count SYN retransmits, which are not counted, hence a bound).
    counted, retransmitted = _counted(served.b), _retransmitted(served.a)
    assert FLOWS * PACKETS <= counted <= FLOWS * PACKETS + retransmitted, (counted, retransmitted)
