"""Pure: did every gateway carry traffic, and did the flows through it come back?

From one traced stream per ordered pair of clusters (many flows, each from its own socket so the nodes' nexthop
groups spread them), each gateway of both clusters gets a row: how many flows it carried toward the server and
back, and how many died (not one datagram came back) right after it, with the hop where they died. A gateway
fails when it carried none of the flows in either direction (it is out of the paths: down, unpublished, or its
nexthop missing) or when a flow died right after it (or, carried by it, at a hop that is no gateway).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs

from magw.ops.verify.hops import Route, find_break
from magw.ops.verify.trace import Flow


@attrs.frozen(kw_only=True)
class GatewayRow:
    gateway: str
    cluster: str
    pair: str  # "east -> west"
    flows: int  # the pair's flows
    toward: int  # flows whose requests it carried
    back: int  # flows whose replies it carried
    dead: int  # flows that never came back and died right after it (or after a hop that is no gateway)
    elsewhere: int = 0  # flows it carried that died right after another gateway
    hops: tuple[str, ...] = ()  # where those died, the commonest first

    @property
    def ok(self) -> bool:
        return (self.toward or self.back) > 0 and self.dead == 0

    def as_json(self) -> dict[str, object]:
        return {"gateway": self.gateway, "cluster": self.cluster, "pair": self.pair, "flows": self.flows,
                "toward": self.toward, "back": self.back, "dead": self.dead, "elsewhere": self.elsewhere,
                "hops": list(self.hops), "ok": self.ok}  # fmt: skip

    def text(self) -> str:
        if not (self.toward or self.back):
            return f"carried none of the {self.flows} flows (down, unpublished, or out of the nexthop groups)"
        where = f": {'; '.join(self.hops)}" if self.hops else ""
        other = f" ({self.elsewhere} it carried died at another gateway)" if self.elsewhere else ""
        return f"{self.toward}/{self.flows} flows toward, {self.back}/{self.flows} back, {self.dead} dead{where}{other}"


def rows(pair: str, gateways: Sequence[tuple[str, str]], flows: Sequence[Flow], route: Route) -> list[GatewayRow]:
    """One row per ``(gateway, cluster)`` for the flows of one pair of clusters, traced along ``route``.

    A dead flow counts against the gateway it died right after; one that died at a hop that is no gateway (a
    node, a pod) counts against every gateway that carried it; one that died right after another gateway counts
    only there (``elsewhere``), so that a single broken gateway is the only one that fails."""
    names = {gw for gw, _ in gateways}
    breaks = {f.sport: find_break(route, set(f.req_seen), set(f.rep_seen)) for f in flows if f.dead}
    out = []
    for gw, cluster in gateways:
        mine = [f for f in flows if gw in f.req_seen or gw in f.rep_seen]
        where: Counter[str] = Counter()
        elsewhere = 0
        for f in flows:
            if not f.dead:
                continue
            b = breaks[f.sport]
            at_gateways = set(b.last) & names if b is not None else set()
            if gw in at_gateways or (not at_gateways and f in mine):
                where[b.text() if b is not None else "no hop (seen everywhere, answers lost at the client)"] += 1
            elif f in mine:
                elsewhere += 1
        out.append(
            GatewayRow(
                gateway=gw,
                cluster=cluster,
                pair=pair,
                flows=len(flows),
                toward=sum(1 for f in flows if gw in f.req_seen),
                back=sum(1 for f in flows if gw in f.rep_seen),
                dead=sum(where.values()),
                elsewhere=elsewhere,
                hops=tuple(f"{text} ({n})" for text, n in where.most_common()),
            )
        )
    return out


def hop_verdict(route: Route, flows: Sequence[Flow]) -> str:
    """Where the traced flows of a failing check died: the commonest break, or why the trace cannot say."""
    breaks = [b for f in flows if f.dead and (b := find_break(route, set(f.req_seen), set(f.rep_seen)))]
    if not breaks:
        lost = sum(f.lost for f in flows)
        return (
            f"none found: {len(flows)} traced UDP flows got through every hop ({lost} of "
            f"{sum(f.sent for f in flows)} datagrams lost); the failure depends on the flow (a Service backend, "
            "the protocol, a gateway)"
        )
    texts = [b.text() for b in breaks]
    return max(set(texts), key=texts.count)
