"""A running route agent fed a garbage and a truncated broker file stays up and keeps serving the last good state:
the file is reported in one line (``filebroker.bad_document``, kept_last_good), its documents stay in use (no sync
removes anything), and a valid change afterwards is still applied. Fake node driver, no root needed; the daemon
is stopped by its PID (tests/support/daemon_procs.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from magw.sources import endpoint_path, publish_endpoint
from tests.support.daemon_procs import W_GW1, W_GW2, Daemon, agent_args, make_broker, named, read_status, wait_for


@pytest.mark.parametrize(
    "garbage",
    [b"kind: Endpoint\ncluster: west\nhostname: w-gw1\nprivate_ip: [172.19", b"\xff\xfe\x00garbage\x00", b"- - - : :"],
    ids=["truncated", "binary", "not-a-mapping"],
)
def test_route_agent_keeps_the_last_good_endpoint_of_a_garbage_file(
    tmp_path: Path, daemons: Callable[..., Daemon], garbage: bytes
) -> None:
    broker = make_broker(tmp_path / "broker")
    status = tmp_path / "status.json"
    agent = daemons("route_agent", *agent_args(broker, node="e-gw1"), "--fake", "--status-file", str(status))
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "first sync")
    bad = endpoint_path(broker, W_GW1.cluster, W_GW1.hostname)
    tmp = bad.with_name(f".{bad.name}.tmp")  # replaced whole: a truncate-then-write is another case (report)
    tmp.write_bytes(garbage)
    os.replace(tmp, bad)

    def reported() -> bool:
        return any(e["file"] == bad.name for e in named(agent.stderr, "filebroker.bad_document"))

    wait_for(reported, "the garbage file reported")
    (event,) = [e for e in named(agent.stderr, "filebroker.bad_document") if e["file"] == bad.name][:1]
    assert event["kept_last_good"] is True, named(agent.stderr, "filebroker.bad_document")
    assert "\n" not in event["error"] and bad.name in event["error"]
    assert agent.proc.poll() is None, "the agent died on a garbage broker file"
    syncs_before = len(named(agent.stderr, "reconciler.sync_done"))
    publish_endpoint(broker, W_GW2)  # a valid change after the garbage is still followed
    wait_for(lambda: len(named(agent.stderr, "reconciler.sync_done")) > syncs_before, "a sync after W_GW2")
    assert agent.proc.poll() is None
    last = named(agent.stderr, "reconciler.sync_done")[-1]
    assert last["changes"] > 0  # W_GW2 added ...
    assert not any(e.get("removed") for e in named(agent.stderr, "reconciler.sync_done")[syncs_before:])
    assert (read_status(status) or {}).get("converged") is True
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
