"""``magw lab upgrade``: a rolling restart of every daemon onto another build, one at a time (docs/lab.md).

Order: the controllers first (each cluster's Globalnet controller, the egress controller), then node by node its
route agent, its gateway daemon and its egress agent. Each step stops the daemon gracefully (SIGTERM, SIGKILL
only after ``procs.STOP_GRACE``: said in the step's line), starts the same command line with the same log from the
target build (``procs.restart``; a gateway's ``--exit-hold`` added or dropped as the target build has it or not),
writes the new PID and build into the lab's state at once, and waits, bounded,
until the new process is ready before the next step:

- route agent: its status file written by the new process (``updated_at`` after its start) says converged;
- gateway: it logged ``gateway.started`` and (file broker) its heartbeat touched its Endpoint document;
- Globalnet controller: it logged ``globalnet.lease_acquired`` (it holds its cluster's lease again);
- egress controller: ``egress.serving``; egress agent: ``egress_ha.applied`` (keepalived and conntrackd
  configured and started or adopted);

and then until every route agent of the lab says converged. The step records the warnings and errors the new
process logged (an old file it could not read shows there). The OVN lab's syncers and servers, the API server
emulators and the echo servers are not daemons of magw's build: they are left alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import structlog

from magw.lab.build import builds, procs, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError
from magw.lab.planes import daemons
from magw.lab.planes.daemons import agent_status, endpoint_file
from magw.lab.spec.layout import LabLayout, layout

log = structlog.get_logger(__name__)

CONTROLLER_KINDS = ("globalnet", "egress")
NODE_KINDS = ("route-agent", "gateway", "egress-agent")
KINDS = (*CONTROLLER_KINDS, *NODE_KINDS)
READY_EVENT = {
    "gateway": "gateway.started",
    "globalnet": "globalnet.lease_acquired",
    "egress": "egress.serving",
    "egress-agent": "egress_ha.applied",
}
STEP_TIMEOUT = 60.0
_POLL = 0.1
Progress = Callable[[str], None]


@attrs.frozen(kw_only=True)
class Step:
    """One daemon's restart."""

    kind: str
    owner: str
    old_pid: int
    new_pid: int
    old_build: str
    new_build: str
    stopped: str  # "term" (exited after SIGTERM), "kill" (needed SIGKILL) or "gone" (was not running)
    started_at: float  # time.time() just before the new process started
    down_s: float  # from SIGTERM to the new process's start
    ready_s: float  # from the new process's start until it and every route agent were ready
    problems: tuple[str, ...]  # the warning and error lines the new process logged until ready (events)

    def line(self) -> str:
        how = {"term": "SIGTERM", "kill": "SIGTERM, then SIGKILL", "gone": "was not running"}[self.stopped]
        probs = f"; logged {', '.join(self.problems)}" if self.problems else ""
        return (f"{self.kind} {self.owner}: pid {self.old_pid} -> {self.new_pid} ({how}), down {self.down_s:.2f} s, "
                f"ready {self.ready_s:.2f} s, build {builds.describe(self.new_build)}{probs}")  # fmt: skip

    def to_doc(self) -> dict[str, Any]:
        return attrs.asdict(self)


def order(st: LabState, lab: LabLayout) -> list[procs.ProcRecord]:
    """The lab's daemons in upgrade order (see the module docstring)."""
    recs = [r for r in st.processes if r.kind in KINDS]
    controllers = [r for k in CONTROLLER_KINDS for r in recs if r.kind == k]
    nodes = [r for n in lab.nodes for k in NODE_KINDS for r in recs if r.kind == k and r.owner == n.name]
    return controllers + nodes


def select(recs: Sequence[procs.ProcRecord], only: str | None) -> list[procs.ProcRecord]:
    """``recs`` of kind ``only`` or owned by ``only`` (a node, or a cluster for its controllers); all if None."""
    if only is None:
        return list(recs)
    chosen = [r for r in recs if only in (r.kind, r.owner)]
    if not chosen:
        kinds = sorted({r.kind for r in recs})
        owners = sorted({r.owner for r in recs})
        raise LabInputError(
            f"upgrade: --only {only!r} is none of the lab's daemon kinds ({', '.join(kinds)}) or owners "
            f"({', '.join(owners)})"
        )
    return chosen


def _events_since(path: Path, offset: int) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            out.append({"event": "unparsed-line", "level": "warning", "text": line[:200]})
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def problems_since(path: Path, offset: int) -> tuple[str, ...]:
    """The events of level warning or worse (and lines that are no JSON event) logged after ``offset``."""
    bad = ("warning", "error", "critical", "exception")
    return tuple(str(e.get("event")) for e in _events_since(path, offset) if e.get("level") in bad)


def _fresh_converged(st: LabState, lab: LabLayout, node: str, since: float) -> bool:
    doc = agent_status(st, lab.node(node))
    if doc is None or doc.get("converged") is not True:
        return False
    try:
        return datetime.fromisoformat(str(doc.get("updated_at"))).timestamp() >= since
    except ValueError:
        return False


def _ready(st: LabState, lab: LabLayout, rec: procs.ProcRecord, offset: int, started: float) -> bool:
    if rec.kind == "route-agent":
        return _fresh_converged(st, lab, rec.owner, started)
    events = {e.get("event") for e in _events_since(Path(rec.log), offset)}
    if READY_EVENT[rec.kind] not in events:
        return False
    if rec.kind == "gateway" and not st.kube:  # one heartbeat of the new process on its Endpoint document
        try:
            return endpoint_file(st.broker_dir, lab.node(rec.owner)).stat().st_mtime >= started
        except OSError:
            return False
    return True


def _all_converged(st: LabState, lab: LabLayout) -> bool:
    agents = [r.owner for r in st.processes if r.kind == "route-agent"]
    return all((agent_status(st, lab.node(n)) or {}).get("converged") is True for n in agents)


def restart_one(
    st: LabState, rec: procs.ProcRecord, build: str, *, timeout: float = STEP_TIMEOUT
) -> tuple[LabState, Step]:
    """Stop ``rec`` (SIGTERM), start it from ``build``, record it, wait until ready (see the module docstring)."""
    lab = layout(st.name, st.topology)
    t0 = time.monotonic()
    stopped = procs.stop([rec])
    how = stopped.get(rec.pid, "gone")
    log_path = Path(rec.log)
    offset = log_path.stat().st_size if log_path.exists() else 0
    started = time.time()
    t1 = time.monotonic()
    kube = st.kube
    argv = daemons.with_gateway_restart_flags(rec.argv, build) if rec.kind == "gateway" and not kube else None
    new = procs.restart(rec, build=build, argv=argv)
    st = attrs.evolve(st, processes=tuple(new if r == rec else r for r in st.processes))
    state.write(st)
    deadline = t1 + timeout
    while not (_ready(st, lab, new, offset, started) and _all_converged(st, lab)):
        if not procs.alive(new):
            raise LabError(f"upgrade: {rec.kind} {rec.owner} exited after its restart (see {rec.log})")
        if time.monotonic() >= deadline:
            raise LabError(f"upgrade: {rec.kind} {rec.owner} not ready {timeout:g} s after its restart (see {rec.log})")
        time.sleep(_POLL)
    step = Step(kind=rec.kind, owner=rec.owner, old_pid=rec.pid, new_pid=new.pid, old_build=rec.build,
                new_build=build, stopped=how, started_at=started, down_s=t1 - t0, ready_s=time.monotonic() - t1,
                problems=problems_since(log_path, offset))  # fmt: skip
    log.info("lab.upgrade_step", lab=st.name, kind=rec.kind, owner=rec.owner, pid=new.pid, build=build)
    return st, step


def upgrade(
    name: str, *, to: str = "", only: str | None = None, out: Progress, timeout: float = STEP_TIMEOUT
) -> list[Step]:
    """Restart the daemons of lab ``name`` (all, or ``only``'s) one at a time onto build ``to`` (a magw source tree;
    "" = the installed magw), one line per step on ``out``."""
    build = builds.check_tree(to) if to else ""
    st = state.read(name)
    if st is None:
        raise LabInputError(f"upgrade: no lab named {name!r}")
    if not st.daemons or st.phase != "up":
        raise LabError(f"upgrade: lab {name!r} is {st.phase}{'' if st.daemons else ', without daemons'}")
    lab = layout(name, st.topology)
    todo = select(order(st, lab), only)
    out(f"upgrade of lab {name}: {len(todo)} daemons, one at a time, onto {builds.describe(build)}")
    steps = []
    for i, rec in enumerate(todo, 1):
        current = next((r for r in st.processes if (r.kind, r.owner) == (rec.kind, rec.owner)), rec)
        st, step = restart_one(st, current, build, timeout=timeout)
        steps.append(step)
        out(f"[{i}/{len(todo)}] {step.line()}")
    return steps
