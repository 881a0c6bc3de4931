"""The daemons as processes for the tests: a broker directory of clusters east and west, a daemon started as
``python -m magw.daemons.<name>.main`` (in a namespace if asked) whose stderr is read line by line and which is
ended by its PID, the JSON log events it wrote, bounded waits, and a node's underlay wired in a namespace."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

from magw.desired.node.planner import plan
from magw.desired.state import KINDS
from magw.model import Endpoint
from magw.sources import FileBroker, publish_endpoint
from tests.support.broker_docs import broker_document
from tests.support.netns import ip_json, run
from tests.support.paths import REPO

LIMIT = 30.0  # seconds: safety limit of every wait

DOCS = broker_document("clusters-east-west.yaml") + """\
---
kind: Config
strategy: {strategy}
---
kind: Node
cluster: east
name: e-gw1
ip: 172.18.0.6
cni_ip: 10.1.1.1
gateway: true
public_ip: 198.18.0.6
---
kind: Node
cluster: east
name: e-w1
ip: 172.18.0.3
cni_ip: 10.1.3.1
"""

E_GW1 = Endpoint(cluster="east", hostname="e-gw1", private_ip=IPv4Address("172.18.0.6"))
W_GW1 = Endpoint(cluster="west", hostname="w-gw1", private_ip=IPv4Address("172.19.0.4"))
W_GW2 = Endpoint(cluster="west", hostname="w-gw2", private_ip=IPv4Address("172.19.0.9"))


def make_broker(
    directory: Path, *, strategy: str = "resilient", endpoints: tuple[Endpoint, ...] = (E_GW1, W_GW1)
) -> Path:
    """The broker ``directory``: clusters east and west with ``strategy``, nodes e-gw1 and e-w1, ``endpoints``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "clusterset.yaml").write_text(DOCS.format(strategy=strategy))
    for endpoint in endpoints:
        publish_endpoint(directory, endpoint)
    return directory


def expected_objects(directory: Path, node: str) -> int:
    """How many objects the node's plan has (every kind plus the nft table)."""
    broker = FileBroker(directory, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None
    state = plan(broker.snapshot, node)
    return sum(len(state.of_kind(k)) for k in KINDS) + (0 if state.nft is None else 1)


def command(daemon: str, *args: str, netns: str | None = None) -> list[str]:
    """The argv of daemon ``magw.daemons.<daemon>.main`` with ``args``, inside ``netns`` if given."""
    cmd = [sys.executable, "-m", f"magw.daemons.{daemon}.main", *args]
    return ["ip", "netns", "exec", netns, *cmd] if netns is not None else cmd


def run_daemon(daemon: str, *args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the daemon to its end (``--once``, a refusal): its exit code, stdout and stderr."""
    return subprocess.run(command(daemon, *args, netns=netns), cwd=REPO, capture_output=True, text=True, timeout=120)


class Daemon:
    """A daemon process we started, its stderr collected line by line; stopped by its PID."""

    def __init__(self, daemon: str, *args: str, netns: str | None = None) -> None:
        self.proc = subprocess.Popen(
            command(daemon, *args, netns=netns),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def saw(self, event: str) -> bool:
        return named(self.stderr, event) != []

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self) -> int:
        code = self.proc.wait(timeout=LIMIT)
        self._reader.join(timeout=LIMIT)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Wait (bounded by LIMIT) until ``predicate()`` holds; fail naming ``what`` if it never does."""
    end = time.monotonic() + LIMIT
    while not predicate():
        assert time.monotonic() < end, f"{what}: not reached within the {LIMIT:.0f} s safety limit"
        time.sleep(0.02)


def json_events(stderr: str) -> list[dict[str, Any]]:
    """The JSON log events of a daemon's stderr (``--log-format json``), in order."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def named(stderr: str, event: str) -> list[dict[str, Any]]:
    """The events called ``event``."""
    return [e for e in json_events(stderr) if e["event"] == event]


def read_status(path: Path) -> dict[str, Any] | None:
    """The status file's JSON, or None while there is none."""
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return doc


def common(broker: Path, node: str = "e-w1") -> tuple[str, ...]:
    """The flags every daemon takes: broker, node, cluster east, JSON logs."""
    return ("--broker-dir", str(broker), "--node", node, "--cluster", "east", "--log-format", "json")


def agent_args(broker: Path, node: str = "e-w1") -> tuple[str, ...]:
    """The route agent's: our Endpoint files are written once, never heartbeated, so they must not expire
    while a slow test runs (a loaded machine can take 5 s, the default TTL; the TTL has its own tests)."""
    return (*common(broker, node), "--endpoint-ttl", "0")


def wire_node(ns: str, peer: str, *, ip: str, cni_ip: str) -> None:
    """The node's underlay (a veth to a peer namespace) with its node IP, and a CNI bridge with its CNI IP."""
    run(ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", peer)
    run(ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
    run(ns, "ip", "link", "set", "eth0", "up")
    run(peer, "ip", "link", "set", "eth0", "up")
    run(ns, "ip", "link", "add", "cni0", "type", "bridge")
    run(ns, "ip", "addr", "add", f"{cni_ip}/24", "dev", "cni0")
    run(ns, "ip", "link", "set", "cni0", "up")


def our_routes(ns: str) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = ip_json(ns, "route", "show", "table", "all", "proto", "157")
    return sorted(routes, key=lambda r: (r.get("table", "main"), r["dst"]))


def audited_changes(agent: Daemon) -> list[tuple[bool, int, int]]:
    """(full, changes, failed) of each sync that used an audit's observation and changed something."""
    syncs = named(agent.stderr, "reconciler.sync_done")
    return [(e["full"], e["changes"], e["failed"]) for e in syncs if e["reasons"] == "audit" and e["changes"]]


def drivers_ready(agent: Daemon) -> list[str]:
    """The drivers the route agent built (``route_agent.driver_ready``), sorted."""
    return sorted(e["driver"] for e in named(agent.stderr, "route_agent.driver_ready"))
