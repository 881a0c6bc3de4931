"""Lab processes (daemons, echo servers): started inside a namespace, recorded by PID, stopped by PID.

``ip netns exec NS CMD`` enters the namespace and then execs CMD, so the PID
we get from Popen is the daemon's own. Each record also keeps the process's
start time (field 22 of /proc/PID/stat): a PID the kernel has since given to
another process never matches, so we never signal a stranger.

``build``: the magw source tree a daemon's Python code comes from (``magw lab up --daemons-from DIR``,
``magw lab upgrade --to DIR``; ``magw.lab.build.builds``), empty for the installed one. The process then runs
with ``PYTHONPATH=DIR``; the record keeps it, so a restart (``restart``) runs the same build.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs
import structlog

from magw.drivers.unixsock import listens
from magw.lab.errors import LabError

log = structlog.get_logger(__name__)

STOP_GRACE = 5.0
STOP_LAST = ("kubeemu", "kubeemu-broker")  # the kinds of magw.lab.planes.kube's emulators
_POLL = 0.05

# Popen objects of the processes this Python process started, so they are reaped (no zombies, no
# "subprocess still running" warnings) when a long-lived caller such as the test suite stops them.
_children: dict[int, subprocess.Popen[bytes]] = {}


@attrs.frozen(kw_only=True)
class ProcRecord:
    """One process the lab started."""

    kind: str
    owner: str
    namespace: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...]
    log: str
    build: str = ""  # the magw source tree on its PYTHONPATH; "" = the installed magw
    # What ``start`` was given on top of the lab's own environment (OVN's and Open vSwitch's run directories):
    # ``restart`` gives it again, or an ovn-controller restarted would look for its sockets elsewhere.
    env: tuple[tuple[str, str], ...] = ()

    def to_doc(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "kind": self.kind,
            "owner": self.owner,
            "namespace": self.namespace,
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "argv": list(self.argv),
            "log": self.log,
        }
        if self.build:
            doc["build"] = self.build
        if self.env:
            doc["env"] = dict(self.env)
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, object]) -> ProcRecord:
        argv = doc["argv"]
        if not isinstance(argv, list):
            raise ValueError(f"argv: expected a list, got {type(argv).__name__}")
        return cls(
            kind=str(doc["kind"]),
            owner=str(doc["owner"]),
            namespace=str(doc["namespace"]),
            pid=int(str(doc["pid"])),
            start_ticks=int(str(doc["start_ticks"])),
            argv=tuple(str(a) for a in argv),
            log=str(doc["log"]),
            build=str(doc.get("build") or ""),  # absent: the installed magw (and every lab from before)
            env=_env_of(doc.get("env")),
        )


def _env_of(raw: object) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()  # a lab from before: nothing recorded
    if not isinstance(raw, Mapping):
        raise ValueError(f"env: expected a mapping, got {type(raw).__name__}")
    return tuple(sorted((str(k), str(v)) for k, v in raw.items()))


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of ``pid``, None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def start_ticks(pid: int) -> int | None:
    st = _stat(pid)
    return None if st is None else st[1]


def _reap(pid: int) -> None:
    child = _children.pop(pid, None)
    if child is not None:
        child.wait(timeout=1)


def is_alive(pid: int, ticks: int) -> bool:
    """True when ``pid`` is still the process that started at ``ticks`` and is not a zombie."""
    st = _stat(pid)
    if st is None or st[1] != ticks:
        return False
    if st[0] == "Z":
        with contextlib.suppress(subprocess.TimeoutExpired):
            _reap(pid)
        return False
    return True


def alive(rec: ProcRecord) -> bool:
    return is_alive(rec.pid, rec.start_ticks)


def start(
    *,
    kind: str,
    owner: str,
    namespace: str,
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    build: str = "",
) -> ProcRecord:
    """Start ``argv`` inside ``namespace`` in its own session, stdout and stderr appended to ``log_path``;
    ``build`` (a magw source tree) goes first on its module path (``PYTHONPATH``)."""
    full = ["ip", "netns", "exec", namespace, *argv]
    if build:
        env = {**(os.environ if env is None else env), "PYTHONPATH": build}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        try:
            child = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(env) if env is not None else None,
            )
        except OSError as exc:
            raise LabError(f"{kind} on {owner}: cannot start {argv[0]}: {exc.strerror}") from None
    _children[child.pid] = child
    ticks = start_ticks(child.pid)
    if ticks is None:
        rc = child.wait(timeout=1)
        _children.pop(child.pid, None)
        raise LabError(f"{kind} on {owner}: exited at once with status {rc} (see {log_path})")
    log.debug("lab.proc_started", kind=kind, owner=owner, pid=child.pid, namespace=namespace)
    return ProcRecord(
        kind=kind,
        owner=owner,
        namespace=namespace,
        pid=child.pid,
        start_ticks=ticks,
        argv=tuple(argv),
        log=str(log_path),
        build=build,
        env=_added(env),
    )


def _added(env: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """What ``env`` sets beyond this process's environment (``PYTHONPATH`` comes from the record's build)."""
    if env is None:
        return ()
    return tuple(sorted((k, v) for k, v in env.items() if k != "PYTHONPATH" and os.environ.get(k) != v))


def restart(rec: ProcRecord, *, build: str | None = None, argv: Sequence[str] | None = None) -> ProcRecord:
    """Start ``rec``'s command again (same kind, owner, namespace, argv and log), from ``build`` if given, else
    from the build it ran; ``argv`` instead of the recorded one if given."""
    env = {**os.environ, **dict(rec.env)} if rec.env else None
    return start(kind=rec.kind, owner=rec.owner, namespace=rec.namespace, argv=rec.argv if argv is None else argv,
                 log_path=Path(rec.log), env=env, build=rec.build if build is None else build)  # fmt: skip


def _signal(pid: int, ticks: int, sig: signal.Signals) -> None:
    if is_alive(pid, ticks):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop_pids(targets: Iterable[tuple[int, int]], *, grace: float = STOP_GRACE) -> dict[int, str]:
    """Stop processes given as (pid, start ticks): SIGTERM, then SIGKILL after ``grace`` seconds.

    Returns pid -> "gone" (was not running), "term" (exited after SIGTERM) or "kill".
    """
    pending = {pid: ticks for pid, ticks in targets}
    result = {pid: "gone" for pid, ticks in pending.items() if not is_alive(pid, ticks)}
    pending = {pid: ticks for pid, ticks in pending.items() if pid not in result}
    for pid, ticks in pending.items():
        _signal(pid, ticks, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pending and time.monotonic() < deadline:
        for pid in [p for p, t in pending.items() if not is_alive(p, t)]:
            result[pid] = "term"
            del pending[pid]
        if pending:
            time.sleep(_POLL)
    for pid, ticks in pending.items():
        _signal(pid, ticks, signal.SIGKILL)
        result[pid] = "kill"
    _wait_gone(pending)
    return result


def _wait_gone(pending: Mapping[int, int], limit: float = 2.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and any(is_alive(p, t) for p, t in pending.items()):
        time.sleep(_POLL)


def stop(records: Iterable[ProcRecord], *, grace: float = STOP_GRACE) -> dict[int, str]:
    """Stop recorded lab processes (see ``stop_pids``): the API server emulators (``STOP_LAST``) only after
    everything else, so a stopping daemon can still give its Lease back instead of waiting for a server gone."""
    records = list(records)
    result = stop_pids(((r.pid, r.start_ticks) for r in records if r.kind not in STOP_LAST), grace=grace)
    result.update(stop_pids(((r.pid, r.start_ticks) for r in records if r.kind in STOP_LAST), grace=grace))
    return result


def wait_for_socket(path: Path, rec: ProcRecord, *, timeout: float, poll: float = 0.05) -> None:
    """Until ``rec``'s server listens on the unix socket ``path`` (``listens``), bounded by ``timeout``; LabError,
    one line, when ``rec`` exits first or the time runs out."""
    _wait(lambda: listens(path), f"nothing listens on {path}", rec, timeout=timeout, poll=poll)


def wait_for_path(path: Path, rec: ProcRecord, *, timeout: float, poll: float = 0.05) -> None:
    """Until ``path`` exists (a server's socket or pid file), bounded by ``timeout``; LabError, one line, when
    ``rec`` exits first or the time runs out."""
    _wait(path.exists, f"no {path}", rec, timeout=timeout, poll=poll)


def _wait(ready: Callable[[], bool], missing: str, rec: ProcRecord, *, timeout: float, poll: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if not alive(rec):
            raise LabError(f"{rec.kind} of {rec.owner} exited (see {rec.log})")
        if time.monotonic() >= deadline:
            raise LabError(f"{rec.kind} of {rec.owner}: {missing} after {timeout:g} s")
        time.sleep(poll)
