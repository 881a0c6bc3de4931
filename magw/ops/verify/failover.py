"""``magw verify --failover``: kill one gateway's datapath under traffic and measure what moved.

Built on the lab's failover measurement (``magw.lab.scenarios.failover.measure_failover``): paced UDP flows
from a client pod to a remote pod (by its global IP with Globalnet), the gateways every flow crossed read from
nft sets just before the failure and near the end, ``magw lab fail VICTIM`` (its links down, its daemons
SIGKILLed) in the middle. Then the victim is recovered, always (``finally``). What it reports: per flow its
gateways before and after, its loss and its loss window; how many flows moved; and how long the route agents
took to call the victim down (``detection_seconds`` of their ``health.transitions[]`` since the failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from magw.lab.errors import LabInputError
from magw.lab.planes.daemons import agent_status
from magw.lab.scenarios import failure
from magw.lab.scenarios.failover import FailoverResult, FlowOutcome, measure_failover
from magw.lab.spec.layout import NodeLayout, PodLayout
from magw.ops.verify.labref import Address, Addressing, Lab


@attrs.frozen(kw_only=True)
class Detection:
    node: str  # the route agent that saw it
    peer: str
    what: str
    seconds: float


@attrs.frozen(kw_only=True)
class FailoverReport:
    victim: str
    client: str
    server: str
    target: str
    result: FailoverResult
    detections: tuple[Detection, ...]

    @property
    def ok(self) -> bool:
        """Every flow runs again at the end (nothing lost in its last datagrams), and some crossed the victim."""
        return bool(self.result.crossed) and all(f.lost_tail == 0 for f in self.result.flows)

    def as_json(self) -> dict[str, Any]:
        return {
            "victim": self.victim,
            "client": self.client,
            "server": self.server,
            "target": self.target,
            "ok": self.ok,
            "summary": self.result.summary(),
            "detection_seconds": [attrs.asdict(d) for d in self.detections],
            "flows": [_flow_json(f, self.victim) for f in self.result.flows],
        }


def _gws(names: frozenset[str]) -> list[str]:
    return sorted(names)


def _flow_json(f: FlowOutcome, victim: str) -> dict[str, Any]:
    return {
        "sport": f.sport,
        "crossed_victim": f.crossed(victim),
        "moved": f.moved,
        "before": {"toward": _gws(f.before.forward), "back": _gws(f.before.back)},
        "after": {"toward": _gws(f.after.forward), "back": _gws(f.after.back)},
        "sent": f.sent,
        "lost": f.lost,
        "lost_tail": f.lost_tail,
        "window_ms": f.window_ms,
    }


def detections(statuses: Mapping[str, Mapping[str, Any] | None], victim: str, since: float) -> list[Detection]:
    """The route agents' transitions to down of ``victim`` at or after wall-clock ``since``, with their
    detection time (pure: ``statuses`` is node -> its route agent's status document)."""
    out = []
    for node, doc in sorted(statuses.items()):
        health = (doc or {}).get("health") or {}
        for t in health.get("transitions", []) if isinstance(health, Mapping) else []:
            if t.get("peer") != victim or t.get("new") != "down" or "detection_seconds" not in t:
                continue
            try:
                at = datetime.fromisoformat(str(t["at"])).timestamp()
            except ValueError:
                continue
            if at >= since:
                out.append(
                    Detection(node=node, peer=victim, what=str(t.get("what")), seconds=float(t["detection_seconds"]))
                )
    return out


def check_victim(lab: Lab, victim: str) -> NodeLayout:
    """The victim's node; not a node or not a gateway is bad input (``LabInputError``)."""
    node = failure.node_of(lab.layout, victim, "verify --failover")
    if not node.gateway:
        raise LabInputError(
            f"verify --failover: {victim} is not a gateway (gateways: {', '.join(g.name for g in lab.layout.gateways)})"
        )
    return node


def _ends(lab: Lab, victim: str, local: str) -> tuple[PodLayout, PodLayout, Address]:
    """A client pod of the victim's cluster and a server pod of the next cluster, neither on the victim's node
    (its pods lose their links with it): the client's cluster sends through the victim, the server's cluster
    answers through it. Without such a client, the other way round."""
    addressing = Addressing(lab)
    remote = next(c.id for c in lab.layout.clusters if c.id != local)
    for a, b in ((local, remote), (remote, local)):
        clients = [p for p in lab.workers_first(a) if p.node != victim]
        found = addressing.pod_target([p for p in lab.workers_first(b) if p.node != victim])
        if clients and found is not None:
            return clients[0], found[0], found[1]
    why = " with a global IP (export a headless Service)" if lab.globalnet else ""
    raise LabInputError(f"verify --failover: no pair of pods of {local} and {remote} off {victim}{why}")


def run(lab: Lab, *, victim: str, flows: int, rate: int, duration: float) -> FailoverReport:
    """Measure the failover of ``victim`` between a pod of its cluster and one of the next cluster."""
    node = check_victim(lab, victim)
    client, server, address = _ends(lab, victim, node.cluster)
    try:
        result = measure_failover(
            lab.layout,
            lab.st,
            victim=victim,
            client=client,
            server=server,
            flows=flows,
            rate=rate,
            duration=duration,
            fail_at=duration / 3,
            senders=1,
            target_ip=address.ip,
        )
    finally:
        failure.recover(lab.name, victim)
    statuses = {n.name: agent_status(lab.st, n) for n in lab.layout.nodes if n.name != victim}
    return FailoverReport(
        victim=victim,
        client=client.name,
        server=server.name,
        target=f"{address.ip} ({address.via})",
        result=result,
        detections=tuple(detections(statuses, victim, result.failed_at - 1.0)),
    )


def table(rep: FailoverReport) -> str:
    s = rep.result.summary()
    lines = [
        f"failover of {rep.victim}: {rep.client} -> {rep.server} at {rep.target}, {s['flows']} flows at "
        f"{rep.result.rate} pkt/s each",
        f"  crossed {rep.victim}: {s['crossed_victim']}; moved: {round(float(s['share_moved']) * int(s['flows']))}"
        f" (toward the server {round(float(s['share_moved_forward']) * int(s['flows']))}); with loss: "
        f"{round(float(s['share_with_loss']) * int(s['flows']))}; still losing at the end: "
        f"{sum(1 for f in rep.result.flows if f.lost_tail)}",
        f"  loss window p50 {s['window_p50_ms']} ms, max {s['window_max_ms']} ms; lost on flows that never crossed "
        f"{rep.victim}: {s['lost_on_untouched']} of {s['lost_total']} lost",
    ]
    det = sorted(d.seconds for d in rep.detections)
    if det:
        lines.append(
            f"  detection (route agents calling {rep.victim} down): {len(det)} observers, "
            f"{det[0] * 1000:.0f}..{det[-1] * 1000:.0f} ms"
        )
    lines.append(f"  {'sport':>6}  {'before toward/back':<36} {'after toward/back':<36} {'lost':>5} {'window ms':>9}")
    for f in _interesting(rep.result.flows, rep.victim):
        before = f"{','.join(_gws(f.before.forward)) or '-'}/{','.join(_gws(f.before.back)) or '-'}"
        after = f"{','.join(_gws(f.after.forward)) or '-'}/{','.join(_gws(f.after.back)) or '-'}"
        lines.append(f"  {f.sport:>6}  {before:<36} {after:<36} {f.lost:>5} {f.window_ms:>9.1f}")
    lines.append(
        f"  {'OK' if rep.ok else 'FAIL'}: "
        + ("every flow runs again" if rep.ok else "a flow never came back, or none crossed the victim")
    )
    return "\n".join(lines) + "\n"


def _interesting(flows: Sequence[FlowOutcome], victim: str) -> list[FlowOutcome]:
    """The flows that crossed the victim or lost anything (the others: counted above)."""
    return [f for f in flows if f.crossed(victim) or f.lost]
