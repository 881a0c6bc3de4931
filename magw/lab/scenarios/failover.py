"""Measure a gateway failover in a running lab: loss window per flow, who lost, who moved.

``measure_failover``: reflectors in the server pod, paced UDP flows from the
client pod (``magw.lab.payload.losswatch``), the gateways every flow crosses just before the
failure and at the end (nft sets in the gateways, ``magw.lab.observe.flowwatch``), and
``magw lab fail VICTIM`` ``fail_at`` seconds into the stream. Used by ``benchmarks/failover.py`` and
``tests/lab/test_lab_failover.py``. Every process it starts is stopped by PID, also
on failure; every wait is bounded.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

import attrs

from magw.lab.build import netns, procs
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.observe import flowwatch
from magw.lab.observe.flowwatch import FlowPath
from magw.lab.scenarios import failure
from magw.lab.spec.layout import LabLayout, PodLayout

REFLECT_PORT = 9000
BASE_PORT = 41000
REFLECTORS = 2
REFLECTOR_START_TIMEOUT = 20.0


@attrs.frozen(kw_only=True)
class FlowOutcome:
    sport: int
    before: FlowPath
    after: FlowPath
    sent: int
    scheduled: int  # sent < scheduled: the sender was starved of CPU and stopped on time with fewer
    lost: int
    lost_tail: int  # lost at the very end: > 0 when the flow never came back
    window_ms: float  # the longest loss window, 0 when nothing was lost
    window_start_s: float = 0.0  # when that window began, seconds after the flow's sender started

    def loss_line(self) -> str:
        """One line for a failure message: what the flow lost, and when."""
        return (f"{self.sport}: lost {self.lost} (tail {self.lost_tail}), longest window {self.window_ms:.0f} ms "
                f"from {self.window_start_s:.2f} s, sent {self.sent}/{self.scheduled}")  # fmt: skip

    def crossed(self, victim: str) -> bool:
        """True when the flow went through ``victim`` before the failure, in either direction."""
        return victim in self.before.gateways

    @property
    def moved(self) -> bool:
        """True when the flow crosses other gateways at the end than before the failure (either direction)."""
        return (self.before.forward, self.before.back) != (self.after.forward, self.after.back)


@attrs.frozen(kw_only=True)
class FailoverResult:
    victim: str
    rate: int
    flows: tuple[FlowOutcome, ...]
    failed_at: float  # wall-clock time (time.time()) right before the event (links down, or up)

    @property
    def crossed(self) -> tuple[FlowOutcome, ...]:
        return tuple(f for f in self.flows if f.crossed(self.victim))

    @property
    def untouched(self) -> tuple[FlowOutcome, ...]:
        return tuple(f for f in self.flows if not f.crossed(self.victim))

    def loss_report(self, flows: tuple[FlowOutcome, ...]) -> str:
        """``flows`` that lost anything, one line each, for an assertion's message."""
        lines = [f.loss_line() for f in flows if f.lost]
        return "\n".join(lines) or "no loss"

    @property
    def windows_ms(self) -> list[float]:
        """The loss window of every flow that lost anything."""
        return sorted(f.window_ms for f in self.flows if f.lost)

    def summary(self) -> dict[str, float | int]:
        """Loss windows (ms) of the flows that lost anything, shares of flows with loss / that moved (either
        direction, or toward the server only), loss on the flows that never crossed the victim, and the share of
        the scheduled datagrams that the senders managed to send (below 1: a starved CPU, figures less sure)."""
        n = len(self.flows) or 1
        windows = self.windows_ms
        return {
            "flows": len(self.flows),
            "crossed_victim": len(self.crossed),
            "window_p50_ms": round(statistics.median(windows), 1) if windows else 0.0,
            "window_max_ms": round(max(windows), 1) if windows else 0.0,
            "share_with_loss": round(sum(1 for f in self.flows if f.lost) / n, 3),
            "share_moved": round(sum(1 for f in self.flows if f.moved) / n, 3),
            "share_moved_forward": round(sum(1 for f in self.flows if f.before.forward != f.after.forward) / n, 3),
            "lost_on_untouched": sum(f.lost for f in self.untouched),
            "lost_total": sum(f.lost for f in self.flows),
            "sent_share": round(sum(f.sent for f in self.flows) / (sum(f.scheduled for f in self.flows) or 1), 3),
        }


def _python_in(namespace: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, sys.executable, "-m", "magw.lab.payload.losswatch", *args]


def _bound_udp(namespace: str, port: int) -> int:
    """How many UDP sockets in ``namespace`` are bound to ``port`` (its /proc/net/udp, read from inside)."""
    text = netns.ns_exec(namespace, "cat", "/proc/net/udp")
    suffix = f":{port:04X}"
    locals_ = (line.split()[1:2] for line in text.splitlines()[1:])  # local_address, the second column
    return sum(1 for local in locals_ if local and local[0].endswith(suffix))


def _start_reflectors(st: LabState, server: PodLayout, count: int) -> list[procs.ProcRecord]:
    """Start ``count`` reflectors in ``server``'s pod and wait until they listen: a stream that starts before
    them loses its first datagrams to port-unreachable (a loaded CI machine took over 0.3 s to start Python)."""
    argv = [sys.executable, "-m", "magw.lab.payload.losswatch", "reflect", "--port", str(REFLECT_PORT),
            "--max-seconds", "600"]
    already = _bound_udp(server.namespace, REFLECT_PORT)
    started = [
        procs.start(
            kind="losswatch",
            owner=server.name,
            namespace=server.namespace,
            argv=argv,
            log_path=st.logs_dir / f"losswatch-{server.name}.log",
        )
        for _ in range(count)
    ]
    deadline = time.monotonic() + REFLECTOR_START_TIMEOUT
    while _bound_udp(server.namespace, REFLECT_PORT) < already + count:
        if time.monotonic() > deadline:
            procs.stop(started, grace=1.0)
            raise LabError(f"reflectors in {server.name}: not listening on UDP {REFLECT_PORT} after "
                           f"{REFLECTOR_START_TIMEOUT:g} s")  # fmt: skip
        time.sleep(0.05)
    return started


def _stream(
    client: PodLayout, target: IPv4Address, *, flows: int, rate: int, duration: float, base: int
) -> subprocess.Popen[str]:
    args = ["stream", "--target", f"{target}:{REFLECT_PORT}", "--flows", str(flows), "--rate", str(rate),
            "--duration", f"{duration:g}", "--base-port", str(base), "--drain", "2"]  # fmt: skip
    argv = _python_in(client.namespace, *args)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _split(total: int, parts: int) -> list[int]:
    """``total`` flows over at most ``parts`` senders, as evenly as possible (no empty sender)."""
    sizes = [total // parts + (1 if i < total % parts else 0) for i in range(parts)]
    return [n for n in sizes if n]


def run_streams(
    client: PodLayout,
    server: PodLayout,
    *,
    flows: int,
    rate: int,
    duration: float,
    senders: int,
    during: Callable[[], None] | None = None,
    target_ip: IPv4Address | None = None,
) -> list[dict[str, object]]:
    """Run the flows (split over ``senders`` processes); call ``during()`` while they run; per-flow reports.

    ``target_ip``: where the client sends (default the server pod's IP; with Globalnet, its global IP)."""
    sizes = _split(flows, senders)
    bases = [BASE_PORT + sum(sizes[:i]) for i in range(len(sizes))]
    target = target_ip if target_ip is not None else server.ip
    running = [
        _stream(client, target, flows=n, rate=rate, duration=duration, base=b)
        for n, b in zip(sizes, bases, strict=True)
    ]
    reports: list[dict[str, object]] = []
    try:
        if during is not None:
            during()
        for proc in running:
            out, err = proc.communicate(timeout=duration + 60)
            if proc.returncode != 0:
                raise LabError(f"losswatch stream in {client.name}: exit {proc.returncode}: {err.strip()[-300:]}")
            doc = json.loads(out)
            reports.extend({**flow, "scheduled": doc["scheduled"]} for flow in doc["flows"])
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
    return reports


def measure_event(
    lab: LabLayout,
    st: LabState,
    *,
    event: Callable[[], object],
    victim: str,
    client: PodLayout,
    server: PodLayout,
    flows: int = 64,
    rate: int = 1000,
    duration: float = 6.0,
    event_at: float = 2.0,
    senders: int = 2,
    target_ip: IPv4Address | None = None,
) -> FailoverResult:
    """Stream; at ``event_at`` s read the paths and call ``event()``; read the paths again near the end."""
    if not 0 < event_at < duration:
        raise ValueError(f"event_at: must be within the stream's duration {duration}, got {event_at}")
    sports = list(range(BASE_PORT, BASE_PORT + flows))
    paths: dict[str, list[FlowPath]] = {}
    event_time: list[float] = []
    reflectors = _start_reflectors(st, server, REFLECTORS)
    try:
        flowwatch.install(lab.gateways, REFLECT_PORT)
        time.sleep(0.3)

        def act_and_watch() -> None:
            started = time.monotonic()
            time.sleep(event_at)
            paths["before"] = flowwatch.read_paths(lab, sports)
            event_time.append(time.time())
            event()
            # Read while the flows still run (the sets forget a flow 400 ms after its last datagram), whatever
            # the event took: a recovery restarts daemons, which is slow on a loaded machine.
            read_at = started + duration - 0.3
            late = time.monotonic() - read_at
            if late > 0:
                raise LabError(f"the event took too long ({late:.1f} s past the last read) to see the flows' paths")
            time.sleep(read_at - time.monotonic())
            paths["after"] = flowwatch.read_paths(lab, sports)

        reports = run_streams(
            client,
            server,
            flows=flows,
            rate=rate,
            duration=duration,
            senders=senders,
            during=act_and_watch,
            target_ip=target_ip,
        )
    finally:
        procs.stop(reflectors, grace=1.0)
        flowwatch.remove(lab.gateways)
    by_port = {int(str(r["sport"])): r for r in reports}
    outcomes = tuple(flow_outcome(b, a, by_port[b.sport]) for b, a in zip(paths["before"], paths["after"], strict=True))
    return FailoverResult(victim=victim, rate=rate, flows=outcomes, failed_at=event_time[0])


def flow_outcome(before: FlowPath, after: FlowPath, report: dict[str, object]) -> FlowOutcome:
    windows, starts = report["windows_ms"], report.get("window_starts_s", [])
    assert isinstance(windows, list) and isinstance(starts, list)
    return FlowOutcome(
        sport=before.sport,
        before=before,
        after=after,
        sent=int(str(report["sent"])),
        scheduled=int(str(report["scheduled"])),
        lost=int(str(report["lost"])),
        lost_tail=int(str(report["lost_tail"])),
        window_ms=float(windows[0]) if windows else 0.0,
        window_start_s=float(starts[0]) if starts else 0.0,
    )


def measure_failover(lab: LabLayout, st: LabState, *, victim: str, fail_at: float = 2.0, **kw: Any) -> FailoverResult:
    """Stream, fail ``victim`` (power loss) at ``fail_at`` s, stream on; the victim stays failed."""
    return measure_event(lab, st, event=lambda: failure.fail(st.name, victim), victim=victim, event_at=fail_at, **kw)


def measure_recovery(
    lab: LabLayout, st: LabState, *, victim: str, recover_at: float = 1.0, **kw: Any
) -> FailoverResult:
    """Stream while the failed ``victim`` comes back at ``recover_at`` s."""
    return measure_event(
        lab, st, event=lambda: failure.recover(st.name, victim), victim=victim, event_at=recover_at, **kw
    )
