"""``magw lab demo --egress-gateway``: the egress gateway lab, what the outside world sees, and a failover.

It brings up ``examples/lab-egress-gateway.yaml`` (or ``--topology`` with an ``egress:`` key) and shows:

1. **egress**: every pod of the egress cluster probes the outside server (TCP and UDP); the server answers
   with the source address it saw: a bound pod's VIP, or (unbound) its node's address;
2. **ingress**: the outside client reaches every bound Service through its VIP and port; the backend saw the
   client's own address;
3. **hairpin**: the first pod of one VIP reaches another VIP's Service; the backend saw the source's VIP;
4. **failover**: with UDP flows and TCP connections running through the first VIP, its holder loses power
   (``magw lab fail``); the VIP moves; the UDP loss window and how many TCP connections survived.

Each line says what was expected and what was seen; the exit status is 1 if anything differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from magw.lab.build import lifecycle as build
from magw.lab.observe.egressgw_status import kernel_holders
from magw.lab.planes.egressgw import (
    bound_services,
    egressgw_model,
    expected_sources,
    outside_ip,
    outside_ns,
)
from magw.lab.scenarios import failure
from magw.lab.scenarios.demo import finish
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import Topology, load_topology
from magw.lab.verify.connectivity import TrafficTarget, probe

Output = Callable[[str], None]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lab-egress-gateway.yaml"
FAIL_AT = 2.0
AFTER = 4.0


def demo_topology() -> Topology:
    return load_topology(EXAMPLE)


def _line(ok: bool, text: str) -> str:
    return f"{'OK  ' if ok else 'FAIL'} {text}"


def show_egressgw(lab: LabLayout, out: Output) -> bool:
    server = outside_ip(lab)
    ok = True
    for name, (pod, want, why) in expected_sources(lab).items():
        results = probe(pod.namespace, [TrafficTarget(proto=p, ip=server, port=8080) for p in ("tcp", "udp")])
        for r in results:
            good = r.ok and r.seen_ip == want
            ok &= good
            out(_line(good, f"{name:<14} {r.target.proto} -> outside {server}: seen as {r.seen_ip or r.error} "
                            f"(expected {want}, {why})"))  # fmt: skip
    return ok


def show_ingress(lab: LabLayout, out: Output) -> bool:
    ns = outside_ns(lab)
    assert ns is not None
    client = str(outside_ip(lab))
    ok = True
    for vip_name, svc, vip in bound_services(lab):
        for r in probe(ns, [TrafficTarget(proto=p, ip=vip, port=svc.port) for p in ("tcp", "udp")]):
            good = r.ok and r.seen_ip == client
            ok &= good
            what = f"outside {r.target.proto} -> VIP {vip_name} {vip}:{svc.port} ({svc.namespace}/{svc.name})"
            out(_line(good, f"{what}: answered by {r.server or r.error}, which saw {r.seen_ip} (expected {client})"))
    return ok


def show_hairpin(lab: LabLayout, out: Output) -> bool:
    bound = bound_services(lab)
    sources = expected_sources(lab)
    ok = True
    for vip_name, svc, vip in bound:
        src = next(
            ((p, want) for p, want, why in sources.values() if why.startswith("bound") and want != str(vip)), None
        )
        if src is None:
            continue
        pod, want = src
        for r in probe(pod.namespace, [TrafficTarget(proto="tcp", ip=vip, port=svc.port)]):
            good = r.ok and r.seen_ip == want
            ok &= good
            out(_line(good, f"{pod.name} -> VIP {vip_name} {vip}:{svc.port}: answered by {r.server or r.error}, "
                            f"which saw {r.seen_ip} (expected {want}, the source's own VIP)"))  # fmt: skip
        break
    return ok


def _spawn(ns: str, module: str, *args: str) -> subprocess.Popen[str]:
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", module, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def show_failover(lab: LabLayout, out: Output) -> bool:
    model = egressgw_model(lab)
    vip = model.vips[0]
    bound = [(p, want) for p, want, why in expected_sources(lab).values() if want == str(vip.vip)]
    holder = kernel_holders(lab)[vip.name]
    if not bound or len(holder) != 1:
        out(_line(False, f"VIP {vip.name}: no bound pod or no single holder ({holder}); no failover shown"))
        return False
    pod = bound[0][0]
    server = str(outside_ip(lab))
    duration = str(FAIL_AT + AFTER)
    udp = _spawn(pod.namespace, "magw.lab.payload.losswatch", "stream", "--target", f"{server}:8080", "--flows", "8",
                 "--rate", "100", "--duration", duration, "--drain", "1")  # fmt: skip
    tcp = _spawn(pod.namespace, "magw.lab.payload.tcpkeep", "hold", "--target", f"{server}:8080", "--conns", "16",
                 "--duration", duration, "--timeout", "3")  # fmt: skip
    time.sleep(FAIL_AT)
    out(f"     {pod.name}: 8 UDP flows and 16 TCP connections to the outside through VIP {vip.name}; "
        f"{holder[0]} (its holder) loses power now")  # fmt: skip
    failure.fail(lab.name, holder[0])
    udp_doc: dict[str, Any] = json.loads(udp.communicate(timeout=120)[0])
    tcp_doc: dict[str, Any] = json.loads(tcp.communicate(timeout=120)[0])
    now = [n for n in kernel_holders(lab)[vip.name] if n != holder[0]]
    moved = len(now) == 1
    out(_line(moved, f"VIP {vip.name} {vip.vip}: held by {', '.join(now) or 'nobody'} now"))
    windows = [max(f["windows_ms"], default=0.0) for f in udp_doc["flows"]]
    p50 = sorted(windows)[len(windows) // 2]
    advert = model.config.advert_int
    out(
        _line(moved, f"UDP loss window per flow: max {max(windows):.0f} ms, p50 {p50:.0f} ms (advert_int {advert:g} s)")
    )
    survived = tcp_doc["survived"] == tcp_doc["established"] > 0
    ctd = "with" if model.config.conntrack_sync else "without"
    out(_line(survived or not model.config.conntrack_sync,
              f"TCP: {tcp_doc['survived']}/{tcp_doc['established']} established connections survived ({ctd} "
              "conntrackd)"))  # fmt: skip
    return moved and (survived or not model.config.conntrack_sync)


def run_egressgw_demo(topology: Topology, *, name: str, keep: bool, out: Output, wait_timeout: float = 90.0,
                      control_plane: str = "file") -> int:  # fmt: skip
    lab = layout(name, topology)
    out(f"== bringing up the egress gateway lab {name} (control plane: {control_plane})")
    build.up(topology, name=name, daemons=True, wait_timeout=wait_timeout, progress=out, control_plane=control_plane)
    try:
        held = kernel_holders(lab)
        out("\n== VIPs: " + "; ".join(f"{v} held by {', '.join(h) or 'nobody'}" for v, h in held.items()))
        out("\n== egress: the source address the outside server sees")
        ok = show_egressgw(lab, out)
        out("\n== ingress: the outside client through each VIP; the backend sees the client")
        ok &= show_ingress(lab, out)
        out("\n== hairpin: a bound pod to another VIP's Service")
        ok &= show_hairpin(lab, out)
        out("\n== failover")
        ok &= show_failover(lab, out)
        out(f"\n== result: {'all OK' if ok else 'FAILURES above'}")
        return 0 if ok else 1
    finally:
        finish(name, keep=keep, out=out)
