"""The daemons as processes: magw-route-agent and magw-gateway against a broker directory.

Without root they run with the fake node driver (``--fake``); the kernel tests run
the route agent with the real drivers inside a throwaway namespace and check the
result with ``ip -json`` and ``nft -j``. Every wait is bounded (a safety net, not a
speed assertion) and every process is ended by its PID.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from magw.sources import endpoint_path, publish_endpoint
from tests.support.daemon_procs import (
    W_GW1,
    W_GW2,
    Daemon,
    agent_args,
    audited_changes,
    common,
    drivers_ready,
    expected_objects,
    json_events,
    make_broker,
    named,
    our_routes,
    read_status,
    run_daemon,
    wait_for,
    wire_node,
)
from tests.support.netns import NsFactory, ip_json, nft_json, run

# ----- route agent, fake driver ------------------------------------------------------------------


def test_route_agent_once_converges_with_the_fake_driver(tmp_path: Path) -> None:
    """--fake --once: one full sync of the whole plan, exit 0, a converged status file and a sync_done event."""
    broker = make_broker(tmp_path / "broker")
    status = tmp_path / "status.json"
    done = run_daemon("route_agent", *agent_args(broker), "--fake", "--once", "--status-file", str(status))
    assert done.returncode == 0, done.stderr
    want = expected_objects(broker, "e-w1")
    (sync,) = named(done.stderr, "reconciler.sync_done")
    assert (sync["full"], sync["changes"], sync["failed"], sync["reasons"]) == (True, want, 0, "once")
    doc = read_status(status)
    assert doc is not None
    assert (doc["node"], doc["converged"], doc["counts"], doc["objects"]) == (
        "e-w1",
        True,
        {"done": want, "error": 0, "pending": 0},
        [],
    )


def test_route_agent_once_without_its_node_fails(tmp_path: Path) -> None:
    """A node with no Node document cannot be planned: --once exits 1 and says why."""
    broker = make_broker(tmp_path / "broker")
    done = run_daemon("route_agent", *agent_args(broker, node="e-w7"), "--fake", "--once")
    assert done.returncode == 1
    (event,) = named(done.stderr, "route_agent.not_ready")
    assert event["reason"] == "node e-w7 is not in cluster east's Node documents"


@pytest.mark.parametrize(
    ("daemon", "args", "message"),
    [
        ("route_agent", ("--broker-dir", "/nonexistent/magw", "--node", "n", "--cluster", "c"),
         "magw-route-agent: error: --broker-dir: no such directory: /nonexistent/magw"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--resync-period", "0"),
         "magw-route-agent: error: argument --resync-period: must be > 0 seconds, got 0"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--metrics-port", "70000"),
         "magw-route-agent: error: argument --metrics-port: must be 0 (off) or a port 1-65535, got 70000"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--metrics-address", "localhost"),
         "magw-route-agent: error: argument --metrics-address: 'localhost' is not an IPv4 address"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--probe-fast-interval", "0.2"),
         "magw-route-agent: error: --probe-fast-interval: must be <= the probe interval 0.1, got 0.2"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--probe-timeout", "0.09"),
         "magw-route-agent: error: --probe-timeout: must be <= the shortest jittered interval 0.08, got 0.09"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--probe-min-interval", "0.2"),
         "magw-route-agent: error: --probe-min-interval: must be <= the probe interval 0.1, got 0.2"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--probe-budget", "-1"),
         "magw-route-agent: error: argument --probe-budget: must be from 0 to 1e+06 per second, got -1"),
        ("route_agent", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--probe-gateway-budget", "x"),
         "magw-route-agent: error: argument --probe-gateway-budget: 'x' is not a number"),
        ("route_agent", ("--broker-dir", ".", "--cluster", "c"),
         "magw-route-agent: error: the following arguments are required: --node"),
        ("gateway", ("--broker-dir", ".", "--node", "n", "--cluster", "c", "--public-ip", "1.2.3"),
         "magw-gateway: error: argument --public-ip: '1.2.3' is not an IPv4 address"),
        ("gateway", ("--broker-dir", ".", "--node", "a/b", "--cluster", "c"),
         "magw-gateway: error: argument --node: 'a/b' must be letters, digits, '.', '_' or '-'"),
    ],
)  # fmt: skip
def test_bad_flags_exit_2_with_one_line(daemon: str, args: tuple[str, ...], message: str) -> None:
    """Bad input: exit 2, exactly one line on stderr naming the flag, no traceback."""
    done = run_daemon(daemon, *args)
    assert (done.returncode, done.stderr) == (2, message + "\n")


def test_route_agent_follows_the_broker_and_stops_on_sigterm(tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    """A new remote gateway document reaches the running agent of a gateway node (one more sync with
    changes); SIGTERM exits 0 cleanly."""
    broker = make_broker(tmp_path / "broker")
    status = tmp_path / "status.json"
    agent = daemons("route_agent", *agent_args(broker, node="e-gw1"), "--fake", "--status-file", str(status))

    def converged() -> bool:
        doc = read_status(status)
        return doc is not None and doc["converged"] is True

    wait_for(converged, "first sync")
    first = read_status(status)
    assert first is not None
    publish_endpoint(broker, W_GW2)
    wait_for(lambda: (read_status(status) or {}).get("syncs", 0) > first["syncs"], "a sync after the new endpoint")
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
    syncs = named(agent.stderr, "reconciler.sync_done")
    assert syncs[-1]["reasons"] == "broker"
    assert syncs[-1]["changes"] > 0
    assert [e["event"] for e in json_events(agent.stderr) if e["event"].startswith("route_agent.")][-2:] == [
        "route_agent.signal",
        "route_agent.stopped",
    ]


# ----- gateway -----------------------------------------------------------------------------------


def test_gateway_publishes_republishes_and_withdraws(tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    """The gateway writes its Endpoint from its Node document, writes it again when it disappears,
    and with ``--withdraw-on-exit`` removes it on SIGTERM (exit 0)."""
    broker = make_broker(tmp_path / "broker", endpoints=(W_GW1,))
    path = endpoint_path(broker, "east", "e-gw1")
    gw = daemons("gateway", *common(broker, node="e-gw1"), "--withdraw-on-exit")
    wait_for(path.exists, "first publication")
    assert yaml.safe_load(path.read_text()) == {
        "kind": "Endpoint",
        "cluster": "east",
        "hostname": "e-gw1",
        "private_ip": "172.18.0.6",
        "public_ip": "198.18.0.6",
    }
    path.unlink()
    wait_for(path.exists, "re-publication")
    gw.signal(signal.SIGTERM)
    assert gw.wait() == 0
    assert path.exists() is False
    published = named(gw.stderr, "gateway.published")
    assert [e["reason"] for e in published] == ["missing", "missing"]
    (withdrawn,) = named(gw.stderr, "gateway.withdrawn")
    assert withdrawn["existed"] is True
    assert named(gw.stderr, "gateway.stopped") != []


def test_gateway_keeps_its_endpoint_on_sigterm_by_default(tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    """A restart must change nothing (docs/daemons.md, "Stopping"): without --withdraw-on-exit SIGTERM leaves
    the document byte for byte, and the next start takes it over without re-publishing."""
    broker = make_broker(tmp_path / "broker", endpoints=(W_GW1,))
    path = endpoint_path(broker, "east", "e-gw1")
    gw = daemons("gateway", *common(broker, node="e-gw1"))
    wait_for(path.exists, "first publication")
    before = path.read_text()
    gw.signal(signal.SIGTERM)
    assert gw.wait() == 0
    assert path.read_text() == before
    assert named(gw.stderr, "gateway.withdrawn") == []
    assert named(gw.stderr, "gateway.kept") != []
    again = daemons("gateway", *common(broker, node="e-gw1"))
    wait_for(lambda: named(again.stderr, "gateway.started") != [], "second start")
    time.sleep(0.5)
    again.signal(signal.SIGTERM)
    assert again.wait() == 0
    assert named(again.stderr, "gateway.published") == []
    assert path.read_text() == before


def test_gateway_flags_override_and_a_restart_takes_over_after_sigkill(
    tmp_path: Path, daemons: Callable[..., Daemon]
) -> None:
    """--public-ip wins over the Node document; SIGKILL leaves the file, the next gateway adopts it as is."""
    broker = make_broker(tmp_path / "broker", endpoints=())
    path = endpoint_path(broker, "east", "e-gw1")
    first = daemons("gateway", *common(broker, node="e-gw1"), "--public-ip", "203.0.113.6")
    wait_for(path.exists, "publication")
    content = path.read_text()
    assert yaml.safe_load(content)["public_ip"] == "203.0.113.6"
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    assert path.read_text() == content
    second = daemons("gateway", *common(broker, node="e-gw1"), "--public-ip", "203.0.113.6", "--withdraw-on-exit")
    wait_for(lambda: second.saw("filebroker.initial_sync"), "second gateway read the broker")
    second.signal(signal.SIGINT)
    assert second.wait() == 0
    assert named(second.stderr, "gateway.published") == []  # the file was already right
    assert path.exists() is False  # --withdraw-on-exit: SIGINT removed it


def test_gateway_waits_while_its_node_is_not_a_gateway(tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    """A node whose Node document says gateway: false publishes nothing until it becomes a gateway."""
    broker = make_broker(tmp_path / "broker", endpoints=())
    gw = daemons("gateway", *common(broker, node="e-w1"))
    docs = (broker / "clusterset.yaml").read_text()
    wait_for(lambda: gw.saw("gateway.waiting"), "the gateway looked at its Node document")
    assert endpoint_path(broker, "east", "e-w1").exists() is False
    tmp = broker / ".clusterset.yaml.tmp"
    tmp.write_text(docs.replace("cni_ip: 10.1.3.1\n", "cni_ip: 10.1.3.1\ngateway: true\n"))
    os.rename(tmp, broker / "clusterset.yaml")
    wait_for(endpoint_path(broker, "east", "e-w1").exists, "publication after promotion")
    gw.signal(signal.SIGTERM)
    assert gw.wait() == 0
    (waiting,) = named(gw.stderr, "gateway.waiting")
    assert waiting["reason"] == "Node e-w1 is not a gateway (gateway: false)"


# ----- kernel ------------------------------------------------------------------------------------


@pytest.mark.kernel
def test_route_agent_programs_a_worker_in_its_namespace(tmp_path: Path, ns_factory: NsFactory) -> None:
    """Real drivers: --once programs the worker's routes (checked with ip -json), nft table and hash policy;
    a second --once changes nothing."""
    ns, peer = ns_factory("magwt-ra"), ns_factory("magwt-rap")
    wire_node(ns, peer, ip="172.18.0.3", cni_ip="10.1.3.1")
    broker = make_broker(tmp_path / "broker", strategy="resilient")
    first = run_daemon("route_agent", *agent_args(broker), "--once", netns=ns)
    assert first.returncode == 0, first.stderr
    routes = our_routes(ns)
    assert [(r["dst"], r.get("table", "main"), r["prefsrc"], r["metric"], "nhid" in r) for r in routes] == [
        ("10.2.0.0/16", "main", "10.1.3.1", 100, True),
        ("100.2.0.0/16", "main", "10.1.3.1", 100, True),
    ]
    assert {r["dev"] for r in routes} == {"vx-submariner"}
    assert [
        (r["ifname"], r["linkinfo"]["info_data"]["id"]) for r in ip_json(ns, "-d", "link", "show", "vx-submariner")
    ] == [("vx-submariner", 100)]
    listing = nft_json(ns, "list", "ruleset")["nftables"]
    assert [(t["table"]["family"], t["table"]["name"]) for t in listing if "table" in t] == [("ip", "magw")]
    assert sorted(c["chain"]["name"] for c in listing if "chain" in c) == ["forward", "input", "postrouting"]
    assert run(ns, "cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy").stdout.strip() == "1"
    second = run_daemon("route_agent", *agent_args(broker), "--once", netns=ns)
    assert second.returncode == 0, second.stderr
    (sync,) = named(second.stderr, "reconciler.sync_done")
    assert (sync["changes"], sync["failed"]) == (0, 0)


@pytest.mark.kernel
def test_route_agent_programs_a_gateway_in_its_namespace(tmp_path: Path, ns_factory: NsFactory) -> None:
    """Real drivers, gateway role: table 100 routes through the remote VTEP and rule 100, checked with ip -json."""
    ns, peer = ns_factory("magwt-ra"), ns_factory("magwt-rap")
    wire_node(ns, peer, ip="172.18.0.6", cni_ip="10.1.1.1")
    broker = make_broker(tmp_path / "broker", strategy="multipath")
    done = run_daemon("route_agent", *agent_args(broker, node="e-gw1"), "--once", netns=ns)
    assert done.returncode == 0, done.stderr
    routes = our_routes(ns)
    assert [(r["dst"], r["table"], r["gateway"], r["dev"], r["prefsrc"]) for r in routes] == [
        ("10.2.0.0/16", "100", "241.19.0.4", "vxlan-tunnel", "10.1.1.1"),
        ("100.2.0.0/16", "100", "241.19.0.4", "vxlan-tunnel", "10.1.1.1"),
    ]
    rules = [(r["priority"], r["table"]) for r in ip_json(ns, "rule", "show") if r["priority"] == 100]
    assert rules == [(100, "100")]


@pytest.mark.kernel
def test_restart_after_sigkill_converges(
    tmp_path: Path, ns_factory: NsFactory, daemons: Callable[..., Daemon]
) -> None:
    """A SIGKILLed agent leaves the kernel as it was; drift made meanwhile is repaired by the next start."""
    ns, peer = ns_factory("magwt-ra"), ns_factory("magwt-rap")
    wire_node(ns, peer, ip="172.18.0.3", cni_ip="10.1.3.1")
    broker = make_broker(tmp_path / "broker", strategy="group")
    status = tmp_path / "status.json"
    # no probes: nothing answers them here, and the gateway going down would change the routes meanwhile
    agent = daemons("route_agent", *agent_args(broker), "--no-health", "--status-file", str(status), netns=ns)
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "converged")
    before = our_routes(ns)
    agent.signal(signal.SIGKILL)
    assert agent.wait() == -signal.SIGKILL
    assert our_routes(ns) == before
    run(ns, "ip", "route", "del", "10.2.0.0/16", "proto", "157")
    done = run_daemon("route_agent", *agent_args(broker), "--once", netns=ns)
    assert done.returncode == 0, done.stderr
    (sync,) = named(done.stderr, "reconciler.sync_done")
    assert sync["changes"] == 1
    assert our_routes(ns) == before


@pytest.mark.kernel
def test_the_periodic_resync_is_audited_on_a_second_driver_and_repairs_drift(
    tmp_path: Path, ns_factory: NsFactory, daemons: Callable[..., Daemon]
) -> None:
    """Real drivers: the resync observes in its audit thread (a second netlink socket and nft context), and the
    full sync that uses the observation puts back a route deleted behind the agent's back. With nothing changed
    behind its back, a resync's observation equals the known state: the audit is clean."""
    ns, peer = ns_factory("magwt-ra"), ns_factory("magwt-rap")
    wire_node(ns, peer, ip="172.18.0.3", cni_ip="10.1.3.1")
    broker = make_broker(tmp_path / "broker", strategy="group")
    status = tmp_path / "status.json"
    agent = daemons(
        "route_agent", *agent_args(broker), "--no-health", "--resync-period", "1", "--status-file", str(status),
        netns=ns,
    )  # fmt: skip
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "converged")
    before = our_routes(ns)
    run(ns, "ip", "route", "del", "10.2.0.0/16", "proto", "157")
    wait_for(lambda: our_routes(ns) == before, "the route put back")
    # the sync's log line follows its kernel change: wait for it, then check it is the only one
    wait_for(lambda: bool(audited_changes(agent)), "the audited sync's log line")
    assert audited_changes(agent) == [(True, 1, 0)]
    assert drivers_ready(agent) == ["kernel", "kernel audit"]  # the audit's own driver, built in its thread
    # the kernel as observed by the real drivers compares equal to what the reconciler knows
    wait_for(lambda: bool(named(agent.stderr, "reconciler.audit_clean")), "a clean audit (resyncs every 1 s)")


@pytest.mark.kernel
def test_metrics_are_served_on_the_address_asked_for(tmp_path: Path, ns: str, daemons: Callable[..., Daemon]) -> None:
    """--metrics-address 127.0.0.2 (an address of the test namespace's loopback): served there, not on 127.0.0.1."""
    broker = make_broker(tmp_path / "broker")
    status = tmp_path / "status.json"
    agent = daemons("route_agent", *agent_args(broker), "--fake", "--metrics-port", "9464", "--metrics-address",
                    "127.0.0.2", "--status-file", str(status), netns=ns)  # fmt: skip
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "converged")
    fetch = (
        "import sys, urllib.request\n"
        "for host in ('127.0.0.2', '127.0.0.1'):\n"
        "    try:\n"
        "        urllib.request.urlopen(f'http://{host}:9464/metrics', timeout=10).read()\n"
        "        print(host, 'served')\n"
        "    except OSError as exc:\n"
        "        print(host, 'refused' if 'refused' in str(exc) else exc)\n"
    )
    assert run(ns, sys.executable, "-c", fetch).stdout.split("\n")[:2] == ["127.0.0.2 served", "127.0.0.1 refused"]
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0


@pytest.mark.kernel
def test_metrics_are_served_inside_the_namespace(tmp_path: Path, ns: str, daemons: Callable[..., Daemon]) -> None:
    """--metrics-port serves Prometheus text on 127.0.0.1 of the node's namespace (here with the fake driver)."""
    broker = make_broker(tmp_path / "broker")
    status = tmp_path / "status.json"
    agent = daemons(
        "route_agent", *agent_args(broker), "--fake", "--metrics-port", "9464", "--status-file", str(status), netns=ns
    )
    wait_for(lambda: (read_status(status) or {}).get("converged") is True, "converged")
    fetch = (
        "import urllib.request;"
        "print(urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=10).read().decode())"
    )
    text = run(ns, sys.executable, "-c", fetch).stdout
    want = expected_objects(broker, "e-w1")
    assert 'magw_reconciler_syncs_total{mode="full",reconciler="route_agent"} 1.0' in text.splitlines()
    created = [
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("magw_reconciler_changes_total{")
    ]
    assert sum(created) == want
    agent.signal(signal.SIGTERM)
    assert agent.wait() == 0
