"""A stateless rewrite under UDP traffic while its table changes: does any packet miss the rules?

Three throwaway namespaces, client ``10.0.1.2`` - router - server ``10.0.2.2``. The client sends to ``10.9.9.9``,
which only the router's rewrite turns into the server's address, as Globalnet's ``gn_in`` does (one rule in a raw
prerouting chain: ``ip saddr @clients ip daddr set ip daddr map @gn_in``, ``clients`` an interval set). A datagram that
misses the rewrite is routed nowhere and lost. The server counts what arrives.

``changing_tables(k)`` gives two tables that differ in the rewrite rule's comment and in a rule of another chain, so
each change flushes and refills the rewrite's chain and keeps both sets. ``run`` sends ``flows`` UDP flows at
``rate`` datagrams/s each for ``seconds`` while ``change(k)`` runs again and again (bounded by ``max_changes``), and
returns what was sent and received. Used by tests/kernel/test_nft_update.py and benchmarks/nft_update_window.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import attrs

from magw.desired.nft import expr as x
from magw.desired.nft.values import NftChain, NftMap, NftSet, NftTable
from tests.support.netns import netns, run, veth_between

SERVER, TARGET, PORT = "10.0.2.2", "10.9.9.9", 9000

RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(float(sys.argv[2]))
print("ready", flush=True)
n = 0
try:
    while True:
        s.recv(64)
        n += 1
except socket.timeout:
    pass
print(n, flush=True)
"""

SENDER = """
import socket, sys, time
target, port, flows, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
seconds = float(sys.argv[5])
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(flows)]
for i, s in enumerate(socks):
    s.bind(("10.0.1.2", 20000 + i))
sent, start = 0, time.monotonic()
for n in range(int(rate * seconds)):
    for s in socks:
        try:
            s.sendto(b"x" * 32, (target, port))
            sent += 1
        except OSError:
            pass
    wait = start + (n + 1) / rate - time.monotonic()
    if wait > 0:
        time.sleep(wait)
print(sent, flush=True)
"""


@attrs.frozen
class Path:
    client: str
    router: str
    server: str


@contextmanager
def rewrite_path() -> Iterator[Path]:
    """The three namespaces, addressed and routed; removed afterwards, also on failure."""
    with netns("magwt-rwc") as client, netns("magwt-rwr") as router, netns("magwt-rws") as server:
        veth_between(client, router, "va", "ra")
        veth_between(server, router, "vb", "rb")
        run(client, "ip", "addr", "add", "10.0.1.2/24", "dev", "va")
        run(router, "ip", "addr", "add", "10.0.1.1/24", "dev", "ra")
        run(router, "ip", "addr", "add", "10.0.2.1/24", "dev", "rb")
        run(server, "ip", "addr", "add", f"{SERVER}/24", "dev", "vb")
        run(client, "ip", "route", "add", "default", "via", "10.0.1.1")
        run(server, "ip", "route", "add", "default", "via", "10.0.2.1")
        run(router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        yield Path(client, router, server)


RAW = NftChain(name="prerouting-raw", type="filter", hook="prerouting", priority=-300, policy="accept")
FWD = NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept")


def changing_tables(k: int) -> NftTable:
    """Table ``k``: the same sets and chains for every k, the rules differ between even and odd k."""
    rewrite = x.mangle(x.ip_daddr(), x.map_lookup(x.ip_daddr(), "gn_in"))
    rules = [x.rule("prerouting-raw", x.match(x.ip_saddr(), x.set_ref("clients")), rewrite, comment=f"rewrite {k % 2}")]
    if k % 2:
        rules.append(x.rule("forward", x.match(x.ip_daddr(), x.set_ref("clients")), x.accept(), comment="back"))
    return NftTable(
        family="ip",
        name="magw",
        sets=(NftSet(name="clients", type="ipv4_addr", flags=("interval",), elements=("10.0.1.0/24",)),),
        maps=(NftMap(name="gn_in", type="ipv4_addr", map="ipv4_addr", elements=((TARGET, SERVER),)),),
        chains=(RAW, FWD),
        rules=rules,
    )


@attrs.frozen
class Outcome:
    sent: int
    received: int
    changes: int

    @property
    def lost(self) -> int:
        return self.sent - self.received


def run_traffic(
    path: Path, change: Callable[[int], None], *, flows: int = 8, rate: int = 1000, seconds: float = 3.0,
    max_changes: int = 200,
) -> Outcome:  # fmt: skip
    """Traffic from client to server while ``change(1)``, ``change(2)``, ... run until the traffic ends."""
    receiver = subprocess.Popen(["ip", "netns", "exec", path.server, sys.executable, "-c", RECEIVER, str(PORT), "2"],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
    sender: subprocess.Popen[str] | None = None
    try:
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        argv = [TARGET, str(PORT), str(flows), str(rate), str(seconds)]
        sender = subprocess.Popen(["ip", "netns", "exec", path.client, sys.executable, "-c", SENDER, *argv],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        changes = 0
        time.sleep(0.3)  # the flows run before the first change
        end = time.monotonic() + seconds - 0.6
        while time.monotonic() < end and changes < max_changes:
            changes += 1
            change(changes)
        sent_text, _ = sender.communicate(timeout=seconds + 30)
        received_text, _ = receiver.communicate(timeout=30)
    finally:
        for proc in (receiver, sender):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
    return Outcome(sent=int(sent_text), received=int(received_text), changes=changes)
