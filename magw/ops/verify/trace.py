"""Run traced UDP streams in a lab: the hop tables in place (``magw.ops.verify.hops``), a paced stream per request
from its own range of client ports to the target's echo server, then who saw each flow, and the tables removed.
Every stream is bounded in time; every process started here is waited for or killed by PID."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from ipaddress import IPv4Address
from typing import Any

import attrs

from magw.lab.errors import LabError
from magw.lab.spec.layout import ECHO_PORT, PodLayout
from magw.ops.verify import hops
from magw.ops.verify.labref import Lab


@attrs.frozen(kw_only=True)
class Request:
    """``flows`` flows from ``client`` to ``ip``:``port`` (an echo server), client ports ``base`` on."""

    client: PodLayout
    ip: IPv4Address
    flows: int
    port: int = ECHO_PORT
    base: int = 0  # set by ``assign_ports``


@attrs.frozen(kw_only=True)
class Flow:
    sport: int
    sent: int
    lost: int
    req_seen: frozenset[str]
    rep_seen: frozenset[str]

    @property
    def dead(self) -> bool:
        """Nothing came back at all."""
        return self.sent > 0 and self.lost >= self.sent


def port_bases(counts: Sequence[int], lo: int = hops.PORT_LO, hi: int = hops.PORT_HI) -> list[int]:
    """Consecutive client port ranges from ``lo``, one per count of flows; more flows than ``lo``..``hi`` holds is
    a ``ValueError``."""
    out, base = [], lo
    for n in counts:
        if base + n - 1 > hi:
            raise ValueError(f"traced flows: more than the {hi - lo + 1} client ports")
        out.append(base)
        base += n
    return out


def assign_ports(requests: Sequence[Request]) -> list[Request]:
    """``requests`` with their ``base`` client ports (``port_bases``)."""
    bases = port_bases([r.flows for r in requests])
    return [attrs.evolve(r, base=b) for r, b in zip(requests, bases, strict=True)]


def flows_of(doc: dict[str, Any], seen: dict[str, tuple[set[int], set[int]]]) -> list[Flow]:
    """One stream's flows (``losswatch stream``'s output) with who saw them (``hops.read``'s form)."""
    flows = []
    for f in doc["flows"]:
        req, rep = hops.seen_by(seen, int(f["sport"]))
        flows.append(Flow(sport=int(f["sport"]), sent=int(f["sent"]), lost=int(f["lost"]), req_seen=frozenset(req),
                          rep_seen=frozenset(rep)))  # fmt: skip
    return flows


def _stream(r: Request, rate: int, duration: float) -> subprocess.Popen[str]:
    argv = [
        "ip",
        "netns",
        "exec",
        r.client.namespace,
        sys.executable,
        "-m",
        "magw.lab.payload.losswatch",
        "stream",
        "--target",
        f"{r.ip}:{r.port}",
        "--flows",
        str(r.flows),
        "--rate",
        str(rate),
        "--duration",
        f"{duration:g}",
        "--base-port",
        str(r.base),
        "--drain",
        "1",
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(
    lab: Lab, requests: Sequence[Request], *, watch: Sequence[PodLayout], rate: int = 20, duration: float = 2.0
) -> list[list[Flow]]:
    """Trace every request (at once); per request, its flows in client port order. ``watch``: the pods whose
    namespaces get a table too (clients and servers); every node of the lab gets one."""
    placed = assign_ports(requests)
    names = {n.name: n.namespace for n in lab.layout.nodes} | {p.name: p.namespace for p in watch}
    running: list[subprocess.Popen[str]] = []
    try:
        hops.install(names.values())
        time.sleep(0.2)
        running = [_stream(r, rate, duration) for r in placed]
        docs = []
        for r, proc in zip(placed, running, strict=True):
            out, err = proc.communicate(timeout=duration + 60)
            if proc.returncode != 0:
                tail = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
                raise LabError(f"traced stream from {r.client.name}: {tail}")
            docs.append(json.loads(out))
        seen = hops.read(names)
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
        hops.remove(names.values())
    return [flows_of(doc, seen) for doc in docs]
