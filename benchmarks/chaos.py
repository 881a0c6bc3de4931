"""Chaos: SIGKILL ``magw apply`` and ``magw-route-agent`` at random moments of an initial sync; one more sync converges.

Usage (root): ``.venv/bin/python benchmarks/chaos.py [--trials 20] [--routes 10000] [--seed N] [--timeout 1800]``

A throwaway namespace gets the underlay of the gateway node ``gw1`` of the snapshot of
``benchmarks/bigsnap.py`` (``cni0`` with its CNI IP) and foreign state (a veth, routes of other
protocols in main and table 100, nexthops outside magw's id range, a rule, an nft table). Each
trial removes what magw owns (``magw cleanup``), starts the tool as a new process exactly as a
user would, SIGKILLs it at a random moment within its measured sync duration (seeded RNG), then
runs it once more. That run must exit 0 and say what it fixed; an independent reader (``ip -json
-d``, ``bridge -json``, ``nft -j``) must then find exactly the plan of ``magw plan --format json``
plus the foreign state byte-identical to before the trials; and one further run must change
nothing. Prints one line per trial and the totals; exits 1 if any trial did not converge.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bigsnap import LOCAL_CNI_IP, snapshot_text  # after sys.path
from magw.desired.node.ids import NEXTHOP_ID_MAX, NEXTHOP_ID_MIN  # after sys.path
from tests.support.kernel_dump import Baseline, Dump, differences, foreign, ours, planned, read  # after sys.path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
NODE, CLUSTER = "gw1", "c0"
STEP_LIMIT = 300.0  # seconds: no single command may take longer
FOREIGN: tuple[tuple[str, ...], ...] = (
    ("ip", "link", "add", "fgn0", "type", "veth", "peer", "name", "fgn0p"),
    ("ip", "addr", "add", "192.168.50.1/24", "dev", "fgn0"),
    ("ip", "link", "set", "fgn0", "up"),
    ("ip", "link", "set", "fgn0p", "up"),
    ("ip", "route", "add", "10.77.0.0/16", "via", "192.168.50.2", "proto", "static"),
    ("ip", "route", "add", "10.78.0.0/16", "via", "192.168.50.2", "table", "100", "proto", "boot"),
    # Same table and destination as one of our routes, another protocol and metric.
    ("ip", "route", "add", "11.0.0.0/24", "via", "192.168.50.2", "table", "100", "metric", "200", "proto", "static"),
    ("ip", "nexthop", "add", "id", "10", "via", "192.168.50.2", "dev", "fgn0"),
    ("ip", "nexthop", "add", "id", str(NEXTHOP_ID_MIN - 1), "via", "192.168.50.3", "dev", "fgn0"),
    ("ip", "nexthop", "add", "id", str(NEXTHOP_ID_MAX + 1), "blackhole"),
    ("ip", "route", "add", "10.80.0.0/16", "nhid", "10", "proto", "static"),
    ("ip", "rule", "add", "priority", "200", "lookup", "200"),
    ("nft", "add table ip cni; add chain ip cni post { type nat hook postrouting priority srcnat; };"
     " add rule ip cni post ip saddr 10.0.0.0/16 oifname cni0 masquerade"),
)  # fmt: skip


class Deadline:
    """The whole run's time budget; every step's timeout is what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the run's --timeout is spent")
        return min(left, STEP_LIMIT)


def in_ns(ns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def run(cmd: list[str], deadline: Deadline, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=deadline.left(), cwd=ROOT, input=stdin)


@attrs.frozen
class Tool:
    """One way to sync the node: ``command`` as a user runs it; ``changes`` reads the count it reports."""

    name: str
    command: list[str]
    changes: Callable[[subprocess.CompletedProcess[str]], int]


def apply_changes(done: subprocess.CompletedProcess[str]) -> int:
    """``magw apply``: exit 0 and "N changes applied, 0 failed" (N) or "no changes" (0); else -1."""
    last = (done.stdout.splitlines() or [""])[-1]
    if done.returncode != 0:
        return -1
    if last == "no changes":
        return 0
    words = last.split()
    return int(words[0]) if last.endswith("changes applied, 0 failed") or last.endswith("change applied, 0 failed") \
        else -1  # fmt: skip


def agent_changes(done: subprocess.CompletedProcess[str]) -> int:
    """``magw-route-agent --once``: exit 0 and its one ``reconciler.sync_done`` with failed 0 (its changes); else -1."""
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    syncs = [e for e in events if e.get("event") == "reconciler.sync_done"]
    if done.returncode != 0 or len(syncs) != 1 or syncs[0]["failed"] != 0:
        return -1
    return int(syncs[0]["changes"])


def broker_dir(snapshot: dict[str, Any], directory: Path) -> Path:
    """The snapshot as file broker documents (Cluster, Config-less, Node, Endpoint)."""
    docs: list[dict[str, Any]] = [{"kind": "Cluster", **c} for c in snapshot["clusters"]]
    docs += [{"kind": "Node", "cluster": snapshot["local_cluster"], **n} for n in snapshot["nodes"]]
    docs += [{"kind": "Endpoint", **e} for e in snapshot["endpoints"]]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "clusterset.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return directory


def tools(ns: str, snap: Path, broker: Path) -> dict[str, Tool]:
    agent = [str(BIN / "magw-route-agent"), "--broker-dir", str(broker), "--node", NODE, "--cluster", CLUSTER]
    agent += ["--endpoint-ttl", "0", "--no-health", "--once", "--log-format", "json", "--metrics-port", "0"]
    return {
        "apply": Tool("apply", [str(BIN / "magw"), "apply", "--snapshot", str(snap), "--node", NODE, "--netns", ns],
                      apply_changes),
        "agent": Tool("agent", in_ns(ns, *agent), agent_changes),
    }  # fmt: skip


@contextmanager
def namespace(deadline: Deadline) -> Iterator[str]:
    """A fresh namespace with gw1's CNI device and the foreign state; deleted afterwards."""
    name = f"magwc-{uuid.uuid4().hex[:10]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        for cmd in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "link", "add", "cni0", "type", "veth", "peer", "name", "cni0p"),
            ("ip", "addr", "add", f"{LOCAL_CNI_IP}/24", "dev", "cni0"),
            ("ip", "link", "set", "cni0", "up"),
            ("ip", "link", "set", "cni0p", "up"),
            *FOREIGN,
        ):
            done = run(in_ns(name, *cmd), deadline)
            if done.returncode != 0:
                raise SystemExit(f"set-up failed: {' '.join(cmd)}: {done.stderr.strip()}")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=30)


@attrs.frozen
class Outcome:
    tool: str
    kill_at: float
    events: int  # kernel changes seen by ip monitor when the kill was sent
    exit: int
    fixed: int
    total: int  # changes of an uninterrupted initial sync
    problems: tuple[str, ...]

    @property
    def mid_sync(self) -> bool:
        """Killed after the first change and before the last: the converging sync had only part to do."""
        return 0 < self.fixed < self.total

    @property
    def converged(self) -> bool:
        return not self.problems

    def line(self, index: int) -> str:
        verdict = "converged" if self.converged else "NOT CONVERGED: " + "; ".join(self.problems)
        return (
            f"{self.tool:<5} trial {index:>2}: SIGKILL at {self.kill_at * 1000:6.0f} ms after {self.events:>5} kernel"
            f" events (exit {self.exit}), converging sync fixed {self.fixed:>5}/{self.total} -> {verdict}"
        )


@attrs.frozen
class Checker:
    """Compares a namespace, read independently, with the plan and the foreign baseline."""

    ns: str
    want: dict[str, list[str]]
    base: Baseline
    foreign_text: str

    def problems(self, dump: Dump | None = None) -> list[str]:
        dump = read(self.ns) if dump is None else dump
        lines = differences(self.want, ours(dump, self.base))
        if foreign(dump, self.base) != self.foreign_text:
            lines.append("foreign state changed")
        return lines

    def empty(self) -> list[str]:
        """What of ours is left (nothing after a cleanup), and the foreign state check."""
        dump = read(self.ns)
        left = [f"{kind}: {len(v)} left after cleanup" for kind, v in ours(dump, self.base).items() if v]
        return left + (["foreign state changed"] if foreign(dump, self.base) != self.foreign_text else [])


def checker_for(ns: str, snap: Path, deadline: Deadline) -> Checker:
    done = run([str(BIN / "magw"), "plan", "--snapshot", str(snap), "--node", NODE, "--format", "json"], deadline)
    if done.returncode != 0:
        raise SystemExit(f"magw plan failed: {done.stderr.strip()}")
    dump = read(ns)
    base = Baseline.of(dump)
    return Checker(ns=ns, want=planned(json.loads(done.stdout)), base=base, foreign_text=foreign(dump, base))


def cleanup(ns: str, check: Checker, deadline: Deadline) -> None:
    """Remove what is not in the baseline with iproute2 and nft (our driver is not trusted here): nexthops
    (their routes go with them), links (their addresses, neighbors, FDB entries and routes go with them),
    rules, nft tables; then the independent reader must find nothing of ours left."""
    dump = read(ns)
    lines = [
        f"nexthop del id {nh['id']}" for nh in dump.nexthops if "group" in nh and nh["id"] not in check.base.nexthops
    ]
    lines += [
        f"nexthop del id {nh['id']}"
        for nh in dump.nexthops
        if "group" not in nh and nh["id"] not in check.base.nexthops
    ]
    lines += [f"link del {link['ifname']}" for link in dump.links if link["ifname"] not in check.base.links]
    lines += [
        f"rule del priority {r['priority']}"
        for r in dump.rules
        if json.dumps(r, sort_keys=True) not in check.base.rules
    ]
    done = run(["ip", "-n", ns, "-force", "-batch", "-"], deadline, stdin="\n".join(lines) + "\n")
    tables = {(o["table"]["family"], o["table"]["name"]) for o in dump.nft if "table" in o} - check.base.nft_tables
    for family, name in sorted(tables):
        run(in_ns(ns, "nft", "delete", "table", family, name), deadline)
    left = check.empty()
    if left:
        raise SystemExit(f"cleanup between trials failed: {left}; ip -batch said {done.stderr.strip()[-300:]}")


RETRIES = 4  # runs of one trial at most, while the tool exits before the kill comes (each earlier)


@attrs.frozen
class Window:
    """An uninterrupted initial sync, timed from the process start: its first kernel change, its exit."""

    first_change: float
    took: float
    total: int  # changes it reported
    events: int  # netlink events that ip monitor saw
    times: tuple[float, ...] = ()  # when each of them came, from the process start (sorted)

    def time_of(self, event: int) -> float:
        """When the uninterrupted sync's ``event``-th netlink event (1-based) came."""
        return self.times[min(event, len(self.times)) - 1]


class Monitor:
    """``ip -o monitor all`` in the namespace; remembers when each netlink event arrived (monotonic s)."""

    def __init__(self, ns: str) -> None:
        self.times: list[float] = []
        # Under load the monitor may miss events (ENOBUFS, "No buffer space available"): the count then comes
        # late or never, so a trial also kills at the time the uninterrupted sync reached it (``trial``).
        # stdbuf -oL: one write per event, or ip's stdio would hand them over 4 KiB at a time (kills late).
        line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        self.proc = subprocess.Popen(
            [*line_buffered, "ip", "-o", "-n", ns, "monitor", "all"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            self.times.append(time.monotonic())

    def stop(self) -> None:
        self.proc.kill()  # by the PID we started
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)


def measure(tool: Tool, ns: str, check: Checker, deadline: Deadline) -> Window:
    """One uninterrupted initial sync by ``tool`` from a clean node: when it first changed the kernel
    (seen by ``ip monitor``) and when it exited, from the process start; it must converge."""
    cleanup(ns, check, deadline)
    monitor = Monitor(ns)
    try:
        time.sleep(0.2)  # let the monitor subscribe before the first change
        started = time.monotonic()
        done = run(tool.command, deadline)
        took = time.monotonic() - started
    finally:
        monitor.stop()
    total = tool.changes(done)
    changes = [t - started for t in monitor.times if t >= started]
    if total <= 0 or not changes or check.problems():
        raise SystemExit(
            f"{tool.name}: the uninterrupted sync did not converge: {done.stdout[-300:]}{done.stderr[-300:]}"
        )
    return Window(first_change=min(changes), took=took, total=total, events=len(changes), times=tuple(sorted(changes)))


def trial(
    tool: Tool, ns: str, check: Checker, kill_after: int, deadline: Deadline, total: int, kill_by: float
) -> Outcome:
    """Clean node; start the tool; SIGKILL it once ``ip monitor`` has seen ``kill_after`` kernel changes, or
    ``kill_by`` seconds after its start, whichever comes first (under load the monitor may lose events to
    ENOBUFS and the tool would then finish before the count: ``kill_by`` is when the uninterrupted sync
    reached that count); one more run must converge and say what it fixed; a further one changes nothing."""
    cleanup(ns, check, deadline)
    monitor = Monitor(ns)
    try:
        time.sleep(0.2)  # let the monitor subscribe before the first change
        started = time.monotonic()
        proc = subprocess.Popen(tool.command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while proc.poll() is None and len(monitor.times) < kill_after and time.monotonic() - started < kill_by:
                deadline.left()  # raises once the run's time is spent
                time.sleep(0.001)
        finally:
            proc.kill()  # SIGKILL, by the PID we started
            killed_at = time.monotonic() - started
            code = proc.wait(timeout=deadline.left())
            seen = len(monitor.times)
    finally:
        monitor.stop()
    problems: list[str] = []
    again = run(tool.command, deadline)
    fixed = tool.changes(again)
    if fixed < 0:
        problems.append(f"the converging sync failed (exit {again.returncode}): {(again.stdout + again.stderr)[-300:]}")
    problems += check.problems()
    if tool.changes(run(tool.command, deadline)) != 0:
        problems.append("a further sync still changed something")
    return Outcome(
        tool=tool.name,
        kill_at=killed_at,
        events=seen,
        exit=code,
        fixed=fixed,
        total=total,
        problems=tuple(problems),
    )


def chaos(*, routes: int, remotes: int, trials: int, seed: int, timeout: float, which: tuple[str, ...],
          report: Callable[[str], None] = print) -> list[Outcome]:  # fmt: skip
    """The whole experiment; returns every trial's outcome (also printed through ``report``)."""
    deadline = Deadline(timeout)
    rng = random.Random(seed)
    text = snapshot_text(routes, remotes)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="magw-chaos-") as tmp, namespace(deadline) as ns:
        snap = Path(tmp) / "snapshot.yaml"
        snap.write_text(text)
        broker = broker_dir(yaml.safe_load(text), Path(tmp) / "broker")
        check = checker_for(ns, snap, deadline)
        report(f"namespace {ns}, {routes} routes over {remotes} remote clusters, seed {seed}")
        for name in which:
            tool = tools(ns, snap, broker)[name]
            window = measure(tool, ns, check, deadline)
            report(
                f"{name}: an uninterrupted initial sync makes {window.total} changes ({window.events} netlink"
                f" events) from {window.first_change * 1000:.0f} ms to its exit at {window.took * 1000:.0f} ms;"
                " each trial kills after a random number of events in [1, that]"
            )
            for index in range(1, trials + 1):
                kill_after = rng.randint(1, window.events)
                for _ in range(RETRIES):
                    outcome = trial(tool, ns, check, kill_after, deadline, window.total, window.time_of(kill_after))
                    if outcome.exit != 0:
                        break
                    # The tool exited before its kill (a point near its end, on a run faster than the measured
                    # one, or events the monitor lost): that tested nothing, so try an earlier point.
                    kill_after = max(1, kill_after // 2)
                outcomes.append(outcome)
                report(outcome.line(index))
    return outcomes


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(f"chaos: stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="kills per tool (default 20)")
    parser.add_argument(
        "--routes", type=int, default=10000, help="remote CIDRs = routes of the gateway (default 10000)"
    )
    parser.add_argument("--remotes", type=int, default=100, help="remote clusters (default 100)")
    parser.add_argument(
        "--seed", type=int, default=None, help="RNG seed of the kill moments (default: random, printed)"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="bound of the whole run in seconds")
    parser.add_argument("--tools", default="apply,agent", help="which to kill: apply and/or agent")
    args = parser.parse_args(argv)
    which = tuple(t for t in args.tools.split(",") if t)
    if not set(which) <= {"apply", "agent"} or not which:
        parser.error(f"--tools: only apply and agent exist, got {args.tools}")
    if not 1 <= args.trials <= 1000:
        parser.error(f"--trials: must be 1..1000, got {args.trials}")
    if not 1 <= args.remotes <= args.routes <= 200_000 or args.remotes > 200:
        parser.error(f"--routes/--remotes: need 1 <= remotes <= 200 and remotes <= routes <= 200000, got "
                     f"{args.routes}/{args.remotes}")  # fmt: skip
    if not 0 < args.timeout <= 86400:
        parser.error(f"--timeout: must be in (0, 86400] seconds, got {args.timeout}")
    if os.geteuid() != 0:
        print("chaos: needs root (creates a network namespace)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop)  # so that the namespace is removed (finally) on SIGTERM too
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    started = time.monotonic()
    outcomes = chaos(routes=args.routes, remotes=args.remotes, trials=args.trials, seed=seed, timeout=args.timeout,
                     which=which)  # fmt: skip
    for name in which:
        mine = [o for o in outcomes if o.tool == name]
        mid = sum(o.mid_sync for o in mine)
        print(f"{name}: {sum(o.converged for o in mine)}/{len(mine)} converged ({mid} killed mid-sync)")
    total = sum(o.converged for o in outcomes)
    print(f"total: {total}/{len(outcomes)} converged in {time.monotonic() - started:.1f} s (seed {seed})")
    return 0 if total == len(outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
