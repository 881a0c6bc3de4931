"""A lab process restarted gets the environment it was started with (kernel tests: it runs in a namespace).

OVN's and Open vSwitch's processes find their sockets by ``OVS_RUNDIR``/``OVN_RUNDIR``; the soak's OVN faults
kill them and restart them from their record (magw.lab.build.procs)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from magw.lab.build import procs
from tests.support.netns import NsFactory

pytestmark = pytest.mark.kernel

SCRIPT = 'echo "run=$MAGWT_RUNDIR home=${HOME:-none}"; sleep 30'


def _lines(log: Path, n: int) -> list[str]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= n:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"{log}: fewer than {n} lines after 10 s")


def test_the_record_keeps_what_start_added_and_restart_gives_it_again(ns_factory: NsFactory, tmp_path: Path) -> None:
    ns = ns_factory("magwt-penv")
    log = tmp_path / "p.log"
    env = {**os.environ, "MAGWT_RUNDIR": "/run/x"}
    rec = procs.start(kind="t", owner="n1", namespace=ns, argv=["sh", "-c", SCRIPT], log_path=log, env=env)
    again = None
    try:
        assert rec.env == (("MAGWT_RUNDIR", "/run/x"),)  # only what differs from the lab's own environment
        back = procs.ProcRecord.from_doc(rec.to_doc())
        assert back == rec
        _lines(log, 1)  # it ran before it is stopped
        procs.stop_pids([(rec.pid, rec.start_ticks)], grace=1)
        again = procs.restart(back)
        home = os.environ.get("HOME", "none")
        assert _lines(log, 2) == [f"run=/run/x home={home}"] * 2
    finally:
        procs.stop_pids([(r.pid, r.start_ticks) for r in (rec, again) if r is not None], grace=1)


def test_a_record_from_before_has_no_environment_and_a_bad_one_is_refused() -> None:
    doc = {"kind": "t", "owner": "n", "namespace": "ns", "pid": 1, "start_ticks": 1, "argv": ["x"], "log": "l"}
    assert procs.ProcRecord.from_doc(doc).env == ()
    assert "env" not in procs.ProcRecord.from_doc(doc).to_doc()
    with pytest.raises(ValueError, match="env: expected a mapping, got list"):
        procs.ProcRecord.from_doc({**doc, "env": ["A=1"]})
