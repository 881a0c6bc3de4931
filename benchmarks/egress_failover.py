"""Benchmark: the egress gateway's VIP failover, with real keepalived and conntrackd, in the egress lab.

For each ``advert_int`` (default 0.1 s and 1 s) and with conntrackd on and off, the lab of
``examples/lab-egress-gateway.yaml`` is built with that setting; then, ``--repeat`` times, while traffic runs,
the node that holds VIP ``shop`` loses power (``magw lab fail``: links down, its daemons, keepalived and
conntrackd SIGKILLed), the VIP moves to the other candidate, and the node is recovered for the next round
(the VIP stays where it went: ``nopreempt``; the next round fails the new holder).

The traffic of a round, all started before the failure:

- **egress UDP**: ``--flows`` losswatch flows at ``--rate`` datagrams/s from pod cart-0 (bound to VIP shop)
  to the outside server's echo port, SNATed to the VIP on the holder;
- **ingress UDP**: the same from the outside namespace to VIP shop:8081 (Service shop/pay, DNATed to pay-0);
- **egress TCP** and **ingress TCP**: ``--conns`` connections each (``magw.lab.payload.tcpkeep hold``) on the same
  paths, the client sending a line every 20 ms, echoed;
- **egress push** and **ingress push**: as many again where the server speaks (``--push``: a line every 20 ms,
  unasked), so the first segment after the move comes from the far side: the outside server toward the VIP
  (egress), the backend toward the outside client (ingress). Without a synced entry the new holder cannot
  translate it back; with the client speaking first, Linux's loose TCP pickup
  (``nf_conntrack_tcp_loose``) and a port-preserving SNAT can rebuild the entry by themselves.

The holder fails ``--fail-at`` s into the traffic; with conntrackd, not before every other candidate's
conntrackd holds all the connections (``magw.lab.observe.ctsync``, at most ``SYNC_SLACK`` s more): a fixed time measured
the machine's load as much as the failover. Each round's JSON says when it failed (``failed_after_s``) and
whether the backups held every connection by then (``synced``; a round where they did not is measured all the
same, and said on stderr).

Per configuration it prints the loss window of the UDP flows (per flow its longest run of lost datagrams, from
the send of the first lost one to the send of the next one that came back; p50 and max over the flows of every
round) for egress and ingress, and the share of established TCP connections that survived (still answering at
the end, no reset, no silence over ``--stall`` seconds, default 10), with the failover time itself
(keepalived's master-down interval is about 3 x advert_int plus skew). Targets: loss window <= 400 ms at
advert_int 0.1 s; >= 95% of the connections survive with conntrackd. The seed's own path measured about
3.6 s at advert_int 1 s.

Run as root: ``.venv/bin/python benchmarks/egress_failover.py [--repeat 3] [--advert 0.1,1]``. Every lab has a
unique name and is removed in ``finally``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from magw.lab.build import lifecycle as build
from magw.lab.observe import ctsync
from magw.lab.observe.egressgw_status import kernel_holders  # after sys.path
from magw.lab.scenarios import failure  # after sys.path
from magw.lab.spec.layout import LabLayout, layout  # after sys.path
from magw.lab.spec.topology import Topology, load_topology  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "lab-egress-gateway.yaml"
SOURCE_POD = "east-w1-p2"  # cart-0, bound to VIP shop
INGRESS_PORT = 8081  # VIP shop:8081 is Service shop/pay
TARGET_WINDOW_MS = 400.0
TARGET_SURVIVAL = 0.95
SYNC_SLACK = 8.0  # with conntrackd: at most this long past --fail-at for the backups to hold every connection
TCP_KEYS = ("egress_tcp", "ingress_tcp", "egress_push", "ingress_push")


def topology(advert: float, sync: bool) -> Topology:
    topo = load_topology(EXAMPLE)
    assert topo.egressgw is not None
    return attrs.evolve(topo, egressgw=attrs.evolve(topo.egressgw, advert_int=advert, conntrack_sync=sync))


def _in(lab: LabLayout, ns: str, module: str, *args: str) -> subprocess.Popen[str]:
    argv = ["ip", "netns", "exec", f"{lab.name}-{ns}", sys.executable, "-m", module, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _holder(lab: LabLayout, deadline: float, failed: str = "") -> str:
    """The one candidate that holds VIP shop (the failed node, cut off, may still carry a stale copy)."""
    while True:
        held = [n for n in kernel_holders(lab)["shop"] if n != failed]
        if len(held) == 1:
            return held[0]
        if time.monotonic() > deadline:
            raise RuntimeError(f"VIP shop held by {held or 'nobody'}")
        time.sleep(0.1)


def one_round(lab: LabLayout, args: argparse.Namespace) -> dict[str, Any]:
    holder = _holder(lab, time.monotonic() + 30)
    vip = str(next(v.vip for v in lab.topology.egressgw.vips if v.name == "shop"))  # type: ignore[union-attr]
    out_ip = str(lab.cluster("east").underlay.network_address + 250)
    # Long enough after the failure for keepalived's master-down interval (3 x advert_int + skew) and then some.
    advert = lab.topology.egressgw.advert_int  # type: ignore[union-attr]
    sync = lab.topology.egressgw.conntrack_sync  # type: ignore[union-attr]
    slack = SYNC_SLACK if sync else 0.0  # the failure may wait this much longer for conntrackd (below)
    duration = str(args.fail_at + slack + max(args.after, 5 * advert + 3))
    stream = ["stream", "--flows", str(args.flows), "--rate", str(args.rate), "--duration", duration,
              "--drain", "1"]  # fmt: skip
    # A connection counts as broken only when silent for --stall seconds: TCP's retransmission backoff (0.2, 0.6,
    # 1.4, 3.0 s ...) can keep a surviving connection quiet well beyond the outage itself.
    hold = ["hold", "--conns", str(args.conns), "--duration", duration, "--interval", "0.02",
            "--timeout", str(args.stall)]  # fmt: skip
    started = time.monotonic()
    procs = {
        "egress_udp": _in(lab, SOURCE_POD, "magw.lab.payload.losswatch", *stream, "--target", f"{out_ip}:8080"),
        "ingress_udp": _in(lab, "outside", "magw.lab.payload.losswatch", *stream, "--target", f"{vip}:{INGRESS_PORT}"),
        "egress_tcp": _in(lab, SOURCE_POD, "magw.lab.payload.tcpkeep", *hold, "--target", f"{out_ip}:8080"),
        "ingress_tcp": _in(lab, "outside", "magw.lab.payload.tcpkeep", *hold, "--target", f"{vip}:{INGRESS_PORT}"),
        "egress_push": _in(lab, SOURCE_POD, "magw.lab.payload.tcpkeep", *hold, "--push", "--target", f"{out_ip}:8080"),
        "ingress_push": _in(lab, "outside", "magw.lab.payload.tcpkeep", *hold, "--push",
                            "--target", f"{vip}:{INGRESS_PORT}"),
    }
    synced: bool | None = None  # not waited for (conntrackd off)
    if sync:  # fail the holder once the backups hold every connection, not after a fixed time (load varies)
        targets = (f"{out_ip}:8080", f"{vip}:{INGRESS_PORT}")
        try:
            ctsync.wait_synced(lab.name, holder, targets, 4 * args.conns, started=started, least=args.fail_at,
                               limit=args.fail_at + slack)  # fmt: skip
            synced = True
        except ctsync.NotSynced as exc:  # measured all the same, and said: the survival figures include it
            print(f"round on {holder}: {exc}; failing it anyway", file=sys.stderr, flush=True)
            synced = False
    else:
        time.sleep(args.fail_at)
    failed_at = time.monotonic()
    failure.fail(lab.name, holder)
    new = _holder(lab, time.monotonic() + 30, failed=holder)
    moved_s = time.monotonic() - failed_at  # bounded below by this script's 0.1 s polling
    docs = {k: json.loads(p.communicate(timeout=120)[0]) for k, p in procs.items()}
    failure.recover(lab.name, holder)
    time.sleep(args.settle)  # the recovered node's keepalived and conntrackd back (BACKUP, resynced)
    result: dict[str, Any] = {
        "failed": holder,
        "new_holder": new,
        "moved_s": round(moved_s, 3),
        "failed_after_s": round(failed_at - started, 2),
        "synced": synced,
    }
    for key in ("egress_udp", "ingress_udp"):
        flows = docs[key]["flows"]
        result[key] = {
            "windows_ms": [max(f["windows_ms"], default=0.0) for f in flows],
            "lost_tail": sum(f["lost_tail"] for f in flows),
            "sent_share": docs[key]["sent"] / max(docs[key]["scheduled"], 1),
        }
    for key in TCP_KEYS:
        result[key] = {"established": docs[key]["established"], "survived": docs[key]["survived"]}
    return result


def run_config(advert: float, sync: bool, args: argparse.Namespace) -> list[dict[str, Any]]:
    name = f"eb{uuid.uuid4().hex[:6]}"
    topo = topology(advert, sync)
    lab = layout(name, topo)
    try:
        build.up(topo, name=name, wait_timeout=90.0)
        time.sleep(args.settle)
        return [one_round(lab, args) for _ in range(args.repeat)]
    finally:
        build.down(name)


def _p50_max(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} {max(values):7.0f}" if values else "      -       -"


def summary(advert: float, sync: bool, rounds: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    doc: dict[str, Any] = {"advert_int": advert, "conntrackd": sync, "rounds": rounds}
    cells = [f"{advert:>6g} s", f"{'on' if sync else 'off':>4}"]
    for key in ("egress_udp", "ingress_udp"):
        windows = [w for r in rounds for w in r[key]["windows_ms"]]
        doc[key] = {"p50_ms": statistics.median(windows), "max_ms": max(windows)} if windows else {}
        cells.append(_p50_max(windows))
    for key in TCP_KEYS:
        est = sum(r[key]["established"] for r in rounds)
        ok = sum(r[key]["survived"] for r in rounds)
        doc[key] = {"established": est, "survived": ok, "share": ok / est if est else None}
        cells.append(f"{ok:4d}/{est:<4d} {ok / est if est else 0:5.0%}")
    moved = [r["moved_s"] for r in rounds]
    cells.append(f"{statistics.median(moved):6.2f}")
    sent = min(min(r["egress_udp"]["sent_share"], r["ingress_udp"]["sent_share"]) for r in rounds)
    cells.append(f"{sent:5.0%}")
    synced = [r["synced"] for r in rounds if r["synced"] is not None]
    doc["synced_rounds"] = sum(synced) if synced else None
    cells.append(f"{sum(synced)}/{len(synced)}" if synced else "-")
    return "  ".join(cells), doc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--advert", default="0.1,1", help="advert_int values in seconds, comma separated")
    p.add_argument("--repeat", type=int, default=3, help="failovers per configuration")
    p.add_argument("--flows", type=int, default=16, help="UDP flows per direction")
    p.add_argument("--rate", type=int, default=100, help="datagrams/s per flow (10 ms resolution at 100)")
    p.add_argument("--conns", type=int, default=32, help="TCP connections per direction")
    p.add_argument("--fail-at", type=float, default=2.0,
                   help="seconds of traffic before the failure (at least; with conntrackd, until the backups hold "
                   f"every connection, at most {SYNC_SLACK:g} s more)")  # fmt: skip
    p.add_argument("--after", type=float, default=5.0, help="seconds of traffic after it")
    p.add_argument("--settle", type=float, default=3.0, help="seconds to wait after up and after a recovery")
    p.add_argument("--stall", type=float, default=10.0, help="a TCP connection silent this long is broken")
    p.add_argument("--json", help="also write every figure to this file")
    args = p.parse_args()
    configure_logging("console", "warning")  # the lab's progress lines would bury the table
    if os.geteuid() != 0:
        print("egress_failover: needs root (network namespaces)", file=sys.stderr)
        return 2
    header = ("advert  ctd   egress UDP window ms  ingress UDP window ms  TCP survived: egress      ingress    "
              "egress push  ingress push  moved s  sent  synced")  # fmt: skip
    sub = "               p50     max          p50     max"
    print(header)
    print(sub, flush=True)
    docs = []
    for advert in (float(a) for a in args.advert.split(",")):
        for sync in (True, False):
            line, doc = summary(advert, sync, run_config(advert, sync, args))
            docs.append(doc)
            print(line, flush=True)
    print(f"targets: UDP window <= {TARGET_WINDOW_MS:.0f} ms at advert_int 0.1 s; >= {TARGET_SURVIVAL:.0%} of "
          "established TCP connections survive with conntrackd")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(docs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
