"""Bounded waits until a lab carries traffic: inside each cluster, then between clusters, and (egress gateway)
from every bound pod out through its VIP.

Each round probes over TCP from the first pod of every node; a round that
fails is repeated after a short pause until the deadline. The progress lines
say how many probes answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from magw.lab.errors import LabError
from magw.lab.observe.globalview import ClusterView
from magw.lab.planes import egressgw
from magw.lab.spec.layout import ECHO_PORT, LabLayout
from magw.lab.verify.connectivity import TrafficTarget, probe_many

ROUND_PAUSE = 0.3
Progress = Callable[[str], None]


def local_plan(lab: LabLayout) -> dict[str, list[TrafficTarget]]:
    """From the first pod of each cluster: every pod and every service of that cluster."""
    plan: dict[str, list[TrafficTarget]] = {}
    for c in lab.clusters:
        targets = [TrafficTarget(proto="tcp", ip=p.ip, port=ECHO_PORT) for p in c.pods]
        targets += [
            TrafficTarget(proto="tcp", ip=s.ip, port=s.port) for s in c.services if s.backends and not s.headless
        ]
        plan[c.pods[0].namespace] = targets
    return plan


def remote_plan(lab: LabLayout, views: Mapping[str, ClusterView] | None = None) -> dict[str, list[TrafficTarget]]:
    """From the first pod of every node: the first pod of every other cluster; with Globalnet (``views``: the
    controllers' allocations) every exported ClusterIP service of every other cluster by its global IP, over
    TCP and UDP (pod IPs overlap between clusters and mean nothing outside their own)."""
    plan: dict[str, list[TrafficTarget]] = {}
    for c in lab.clusters:
        if views is None:
            remote = [TrafficTarget(proto="tcp", ip=o.pods[0].ip, port=ECHO_PORT) for o in lab.clusters if o.id != c.id]
        else:
            remote = _global_targets(lab, views, c.id)
        for node in c.nodes:
            if remote:
                plan[c.pods_of(node.name)[0].namespace] = remote
    return plan


def _global_targets(lab: LabLayout, views: Mapping[str, ClusterView], local: str) -> list[TrafficTarget]:
    out = []
    for o in lab.clusters:
        if o.id == local:
            continue
        for s in o.services:
            gip = views[o.id].service_ip(s.namespace, s.name) if s.export and s.cluster_ip is not None else None
            if gip is not None and s.backends:
                out += [TrafficTarget(proto=proto, ip=gip, port=s.port) for proto in ("tcp", "udp")]
    return out


def wait_for(what: str, plan: dict[str, list[TrafficTarget]], step: Progress, *, timeout: float,
             alive: Callable[[], None] | None = None, seen: Mapping[str, str] | None = None) -> None:  # fmt: skip
    """Probe ``plan`` until every probe answers; LabError naming the failures after ``timeout`` seconds.
    ``alive`` (raises LabError naming a lab process that died) runs after every unanswered round: a crashed
    process (Debian's OVS 3.1 userspace conntrack can abort ovs-vswitchd) is named at once, not as lost probes.
    ``seen`` (namespace -> address): an answer counts only if the server saw that namespace's probes come from
    that address."""
    want = dict(seen or {})
    total = sum(len(t) for t in plan.values())
    if total == 0:
        step(f"{what}: nothing to probe")
        return
    deadline = time.monotonic() + timeout
    last = -1
    while True:
        results = probe_many(plan, timeout=1.0, attempts=2)
        failed = [
            f"{ns}->{r.target}" + (f" (seen as {r.seen_ip}, not {want[ns]})" if r.ok else "")
            for ns, rs in results.items()
            for r in rs
            if not r.ok or r.seen_ip != want.get(ns, r.seen_ip)
        ]
        ok = total - len(failed)
        if ok != last:
            step(f"{what}: {ok}/{total} probes answered{' from the expected address' if want else ''}")
            last = ok
        if not failed:
            return
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            how = "unanswered or seen from another address" if want else "unanswered"
            raise LabError(f"{what}: {len(failed)}/{total} probes {how} after {timeout:g}s, e.g. {failed[0]}")
        time.sleep(ROUND_PAUSE)


def egress_plan(lab: LabLayout) -> tuple[dict[str, list[TrafficTarget]], dict[str, str]]:
    """With an egress gateway: from every bound pod, TCP to the outside server, which must see the pod's VIP
    (unbound pods are not probed: on ``--cni ovn`` the lab gives them no way out)."""
    if lab.topology.egressgw is None:
        return {}, {}
    server = egressgw.outside_ip(lab)  # its echo server listens on ECHO_PORT too
    vips = {str(v.vip) for v in egressgw.egressgw_model(lab).vips}
    bound = {pod.namespace: want for pod, want, _ in egressgw.expected_sources(lab).values() if want in vips}
    return {ns: [TrafficTarget(proto="tcp", ip=server, port=ECHO_PORT)] for ns in bound}, bound


def wait_local(lab: LabLayout, step: Progress, *, timeout: float) -> None:
    wait_for("cluster-local connectivity", local_plan(lab), step, timeout=timeout)


def wait_remote(
    lab: LabLayout,
    step: Progress,
    *,
    timeout: float,
    views: Mapping[str, ClusterView] | None = None,
    alive: Callable[[], None] | None = None,
) -> None:
    wait_for("inter-cluster connectivity", remote_plan(lab, views), step, timeout=timeout, alive=alive)


def wait_egress(lab: LabLayout, step: Progress, *, timeout: float, alive: Callable[[], None] | None = None) -> None:
    """Until every bound pod leaves as its VIP: its VIP held, its node's egress agent (and on ``--cni ovn`` the
    syncer's reroute) in place."""
    plan, seen = egress_plan(lab)
    wait_for("egress through the VIPs", plan, step, timeout=timeout, alive=alive, seen=seen)
