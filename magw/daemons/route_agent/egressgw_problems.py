"""The route agent's report of what the egress gateway's plan could not honour (docs/egress-datapath.md).

``plan_egressgw`` carries on past an input it cannot honour (two VIPs claiming one namespace, a pod behind
Services of two VIPs, two Services of one VIP on the same port) and names each in one line; the pure planner
has nowhere to say it. The route agent logs them here, once each time the set changes (a warning per problem,
an info when none is left), and only when the egress objects or the workloads changed, so a failover's
partial sync, which replans with the same snapshot parts, pays nothing for it.
"""

from __future__ import annotations

import attrs
import structlog

from magw.desired.egressgw.node import plan_node_egressgw
from magw.model import Snapshot

log = structlog.get_logger(__name__)


@attrs.define
class EgressGatewayProblems:
    node: str
    problems: tuple[str, ...] = ()
    _seen: tuple[object, object] | None = attrs.field(default=None, init=False)

    def check(self, snapshot: Snapshot) -> tuple[str, ...]:
        """The problems of ``snapshot``'s egress plan for this node, logged when they changed."""
        parts = (snapshot.egressgw, snapshot.globalnet)
        if self._seen is not None and self._seen[0] is parts[0] and self._seen[1] is parts[1]:
            return self.problems
        self._seen = parts
        plan = plan_node_egressgw(snapshot, self.node)
        problems = () if plan is None else tuple(plan.problems)
        if problems != self.problems:
            for problem in problems:
                if problem not in self.problems:
                    log.warning("route_agent.egress_problem", node=self.node, problem=problem)
            if not problems:
                log.info("route_agent.egress_problems_cleared", node=self.node)
            self.problems = problems
        return problems
