"""``magw lab status`` says only what is so: a dead route agent's last status file is not "converged" (nor is
a file its restarted process has not written yet), its health probes are left out, the broker's Health document
takes a gateway down as it does for the route agents, and a headless service has no ``None`` address."""

from __future__ import annotations

from typing import Any

from magw.lab.observe.healthview import HEALTH_DOCUMENT, cluster_view, health_text
from magw.lab.observe.status import agent_sync, current_status, status_text
from magw.model import Health

STARTED = 1_700_000_000.0  # the process's start, seconds since the epoch
BEFORE = "2023-11-14T22:13:19.000000+00:00"  # one second before it
AFTER = "2023-11-14T22:13:21.000000+00:00"


def _agent(converged: bool, updated_at: str = AFTER, waiting: str | None = None) -> dict[str, Any]:
    return {"converged": converged, "waiting": waiting, "updated_at": updated_at}


def test_a_dead_route_agents_last_status_is_not_converged() -> None:
    """The process is gone: whatever its file says, it is ``dead``."""
    assert agent_sync(alive=False, status=_agent(True), started_at=STARTED) == "dead"
    assert agent_sync(alive=False, status=None, started_at=None) == "dead"


def test_a_status_written_before_the_process_started_is_stale() -> None:
    """After ``lab recover`` the file still holds the killed process's "converged" until the new one writes."""
    assert agent_sync(alive=True, status=_agent(True, BEFORE), started_at=STARTED) == "stale"
    assert agent_sync(alive=True, status={"converged": True}, started_at=STARTED) == "stale"  # no updated_at
    assert agent_sync(alive=True, status=_agent(True, AFTER), started_at=STARTED) == "converged"
    assert agent_sync(alive=True, status=_agent(False, AFTER), started_at=STARTED) == "not converged"
    assert agent_sync(alive=True, status=None, started_at=STARTED) == "no status yet"


def _doc(daemons: list[dict[str, Any]], health: dict[str, Any]) -> dict[str, Any]:
    node = {"name": "east-gw1", "role": "gateway", "namespace": "t-east-gw1", "node_ip": "172.17.0.2",
            "cni_ip": "10.1.1.1"}  # fmt: skip
    return {
        "name": "t", "phase": "up", "strategy": "ecmp", "multi_active": True,
        "namespaces": {"present": 3, "expected": 3},
        "clusters": [{
            "id": "east", "pod_cidr": "10.1.0.0/16", "service_cidr": "100.1.0.0/16", "underlay": "172.17.0.0/24",
            "nodes": [node],
            "services": [
                {"name": "echo", "ip": "100.1.0.10", "port": 8080, "backends": ["10.1.1.10"]},
                {"name": "db", "ip": None, "port": 8080, "backends": ["10.1.1.10"]},
            ],
            "gateways": [{"name": "east-gw1", "namespace": "t-east-gw1", "private_ip": "172.17.0.2",
                          "public_ip": "198.51.100.2"}],
        }],
        "control_plane": {"kind": "file", "broker_dir": "/run/magw-lab/t/broker"},
        "servers": [],
        "daemons": daemons,
        "health": health,
    }  # fmt: skip


def test_status_text_says_dead_and_stale_and_prints_no_none_address() -> None:
    """A dead agent's line carries no "converged"; a stale one says stale; a headless service says headless."""
    daemons = [
        {"node": "east-gw1", "kind": "route-agent", "pid": 10, "alive": False, "sync": "dead", "converged": False,
         "waiting": None},
        {"node": "east-gw2", "kind": "route-agent", "pid": 11, "alive": True, "sync": "stale", "converged": False,
         "waiting": None},
        {"node": "east-w1", "kind": "route-agent", "pid": 12, "alive": True, "sync": "converged", "converged": True,
         "waiting": None},
    ]  # fmt: skip
    text = status_text(_doc(daemons, {"clusters": {"east": {}}, "failed": {}}))
    lines = {line.split()[1]: line for line in text.splitlines() if line.startswith("  route-agent")}
    assert "DEAD" in lines["east-gw1"] and "converged" not in lines["east-gw1"]
    assert "stale" in lines["east-gw2"] and "converged" not in lines["east-gw2"]
    assert lines["east-w1"].endswith("alive  converged")
    assert "None" not in text
    assert "  service db headless, port 8080 -> 10.1.1.10" in text.splitlines()
    assert "  service echo 100.1.0.10:8080 -> 10.1.1.10" in text.splitlines()


PROBED_UP = {"health": {"peers": [{"hostname": "east-gw2", "state": "up"}, {"hostname": "east-gw1", "state": "up"}]}}
DEAD_SAYS_DOWN = {"health": {"peers": [{"hostname": "east-gw2", "state": "down"}]}}
GATEWAYS = {"east-gw1": "east", "east-gw2": "east", "west-gw1": "west"}


def test_the_health_document_takes_a_gateway_down_in_every_view() -> None:
    """Probes say east-gw2 answers, the Health document says down: down, by the Health document, as the route
    agents plan; its ``reach`` gives no_reach; a gateway it does not name stays as probed."""
    broker = Health(down={"east-gw2"}, reach={"east-gw1": set()})
    view = cluster_view([("east-w1", PROBED_UP)], broker, cluster_of=GATEWAYS, clusters=["east", "west"])
    assert view["east-gw2"] == {"state": "down", "down_by": [HEALTH_DOCUMENT], "no_reach": {}}
    assert view["east-gw1"] == {"state": "up", "down_by": [], "no_reach": {"west": [HEALTH_DOCUMENT]}}
    west = cluster_view([], broker, cluster_of=GATEWAYS, clusters=["east", "west"])
    assert west["east-gw2"]["state"] == "down"
    lines = health_text({"clusters": {"east": view}, "failed": {}})
    assert "east-gw2 DOWN (by Health document)" in lines[1]


def test_a_status_that_is_not_current_is_left_out_of_the_health_view() -> None:
    """A dead (or stale) agent's file, which last said east-gw2 was down, counts for nothing: only the live
    node's probes do."""
    observers = [
        ("east-gw1", current_status("dead", DEAD_SAYS_DOWN)),
        ("east-gw3", current_status("stale", DEAD_SAYS_DOWN)),
        ("east-w1", current_status("converged", PROBED_UP)),
    ]
    view = cluster_view(observers, Health(), cluster_of=GATEWAYS, clusters=["east", "west"])
    states = {gw: (e["state"], e["down_by"]) for gw, e in view.items()}
    assert states == {"east-gw1": ("up", []), "east-gw2": ("up", [])}
