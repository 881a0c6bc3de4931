"""Running daemons fed a garbage or truncated broker file stay up and keep serving the last good state: the
route agent (fake node driver) and the Globalnet controller. The file is reported in one line
(``filebroker.bad_document``, kept_last_good), its documents stay in use (nothing is removed or withdrawn), and a
valid change afterwards is still applied. No root needed; each daemon is stopped by its PID
(tests/support/daemon_procs.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from magw.sources import endpoint_path, publish_endpoint
from tests.support import globalnet_broker as gn
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

    def applied_after() -> list[dict[str, Any]]:
        # the broker also tells the agent of the garbage file itself (problem_files changed): that sync may end
        # after syncs_before was counted, and it changes nothing; the one that adds W_GW2 changes something
        return [e for e in named(agent.stderr, "reconciler.sync_done")[syncs_before:] if e["changes"] > 0]

    wait_for(lambda: bool(applied_after()), "a sync that adds W_GW2")
    assert agent.proc.poll() is None
    assert not any(e.get("removed") for e in named(agent.stderr, "reconciler.sync_done")[syncs_before:])
    assert (read_status(status) or {}).get("converged") is True
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0


def test_globalnet_controller_keeps_its_allocations_through_a_garbage_object_file(
    tmp_path: Path, daemons: Callable[..., Daemon]
) -> None:
    """The Globalnet controller: a gateway's ClusterGlobalEgressIP status is written; its Node file then turns to
    garbage. The controller stays up, reports the file in one line with kept_last_good, and withdraws nothing
    (the status and its allocation stay); a new valid object afterwards is still allocated."""
    broker = gn.make_broker(tmp_path / "broker")
    gn.gateway(broker, "gw1", 6)
    agent = daemons("globalnet", *gn_args(broker))
    gw_egress = ("ClusterGlobalEgressIP", "", "gw1-cluster-egress.submariner.io")
    wait_for(lambda: gw_egress in gn.statuses(broker), "the gateway's egress IP allocated")
    before = gn.statuses(broker)[gw_egress]
    bad = broker / "user-node-gw1.yaml"
    tmp = broker / ".user-node-gw1.tmp"
    tmp.write_bytes(b"kind: Node\ncluster: east\nname: gw1\nip: [172.18")
    os.replace(tmp, bad)
    def report() -> list[str]:  # this daemon logs console lines, one per event
        return [line for line in agent.lines if "filebroker.bad_document" in line and f"file={bad.name}" in line]

    wait_for(lambda: report() != [], "the garbage file reported")
    assert "kept_last_good=True" in report()[0]
    gn.gateway(broker, "gw2", 8)  # a valid change afterwards is still followed
    gw2 = ("ClusterGlobalEgressIP", "", "gw2-cluster-egress.submariner.io")
    wait_for(lambda: gw2 in gn.statuses(broker), "the new gateway's egress IP allocated")
    assert agent.proc.poll() is None, "the controller died on a garbage broker file"
    assert gn.statuses(broker)[gw_egress]["allocatedIPs"] == before["allocatedIPs"]
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0


def gn_args(broker: Path) -> list[str]:
    return ["--broker-dir", str(broker), "--cluster", "east", "--identity", "gn1", "--poll-interval", "0.02"]
