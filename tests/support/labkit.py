"""Helpers for the lab's kernel tests: unique lab names, a lab that is always removed, leftovers checks, bounded
polls."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from ipaddress import IPv4Network, ip_interface

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build import netns, procs
from magw.lab.build.procs import ProcRecord
from magw.lab.build.state import LabState
from magw.lab.planes.daemons import agent_status
from magw.lab.planes.ovn import ovn_dir
from magw.lab.planes.ovn_topology import nbctl
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, layout
from magw.lab.spec.topology import Topology

POLL_LIMIT = 20.0  # seconds: bound of a poll (detection takes well under a second; broker expiry 5 s)


def unique_name() -> str:
    """A lab name no other test (or person) uses: 't' + 7 hex digits."""
    return f"t{uuid.uuid4().hex[:7]}"


@contextlib.contextmanager
def running_lab(
    topology: Topology,
    *,
    daemons: bool,
    name: str | None = None,
    control_plane: str = "file",
    cni: str = "generic",
    wait_timeout: float = 90.0,
) -> Iterator[tuple[LabLayout, LabState]]:
    """Bring a lab up and always take it down afterwards, also when up or the test fails."""
    lab_name = name or unique_name()
    try:
        st = build.up(
            topology, name=lab_name, daemons=daemons, wait_timeout=wait_timeout, control_plane=control_plane, cni=cni
        )
        yield layout(lab_name, topology), st
    finally:
        build.down(lab_name)


def leftovers(name: str, processes: Sequence[ProcRecord], *, bystanders: Sequence[str] = ()) -> dict[str, object]:
    """What of lab ``name`` still exists: namespaces with its prefix, live processes, its state directory.

    ``bystanders`` are namespaces with the lab's prefix that the test itself made and
    that must survive ``down``: they are not counted as leftovers.
    """
    prefix = naming.ns_prefix(name)
    return {
        "namespaces": [ns for ns in netns.list_namespaces() if ns.startswith(prefix) and ns not in bystanders],
        "pids": [p.pid for p in processes if procs.is_alive(p.pid, p.start_ticks)],
        "state_dir": naming.state_dir(name).exists(),
    }


NOTHING_LEFT: dict[str, object] = {"namespaces": [], "pids": [], "state_dir": False}


@contextlib.contextmanager
def bystander(ns: str) -> Iterator[subprocess.Popen[bytes]]:
    """A namespace ``ns`` made with plain ``ip netns add`` (not by a lab), with a ``sleep`` of ours inside it.

    Yields the sleep's Popen; the sleep is killed by its PID and the namespace deleted afterwards.
    """
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=10)
    sleeper = None
    try:
        sleeper = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "120"], start_new_session=True)
        yield sleeper
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=10)


def poll(what: str, condition: Callable[[], bool], limit: float = POLL_LIMIT) -> None:
    """Wait (bounded) until ``condition()`` holds; fail naming ``what`` if it never does."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not reached within {limit:g} s")
        time.sleep(0.1)


def seen_down_by(st: LabState, lab: LabLayout, observer: str, peer: str) -> bool:
    """True when ``observer``'s route agent still probes ``peer`` and has it down. Checked together with the
    effect of a failover, it proves the fast path: the broker has not yet dropped the peer's endpoint (then
    it would not be probed at all), so the probes, not the endpoint's expiry, moved the traffic."""
    health = (agent_status(st, lab.node(observer)) or {}).get("health") or {}
    return any(p["hostname"] == peer and p["state"] == "down" for p in health.get("peers", []))


def mgmt_address(namespace: str) -> str:
    """The address of ``ovn-k8s-mp0`` (OVN's management port) in a node's namespace, read with ``ip``."""
    out = subprocess.run(["ip", "-n", namespace, "-j", "-4", "addr", "show", "dev", "ovn-k8s-mp0"],
                         capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
    return str(json.loads(out)[0]["addr_info"][0]["local"])


OVN_JOIN_SUBNET = IPv4Network("169.254.254.0/29")  # the gateway routers' join addresses (docs/ovn.md)


def find_ovn_router(st: LabState, cluster: str, gateway: str) -> str:
    """The name of ``gateway``'s router in its cluster's NB, read with ``ovn-nbctl``; "" if it has none."""
    return nbctl(ovn_dir(st, cluster), "--bare", "--columns=name", "find", "Logical_Router",
                 f"external_ids:magw-gateway={gateway}").strip()  # fmt: skip


def ovn_router(st: LabState, cluster: str, gateway: str) -> str:
    """``find_ovn_router``, which must find it. Which slot (so which name and join address) a gateway takes depends
    on which one the syncer saw first (with the API servers as the source, east-gw2 is sometimes first), so tests
    look it up rather than assume it."""
    name = find_ovn_router(st, cluster, gateway)
    assert name, f"no router of {gateway} in {cluster}'s NB"
    return name


def ovn_join_address(st: LabState, cluster: str, gateway: str) -> str:
    """The join address of ``gateway``'s router (its next hop in the reroute policy), read from the NB."""
    d = ovn_dir(st, cluster)
    ports = nbctl(d, "--bare", "--columns=ports", "list", "Logical_Router", ovn_router(st, cluster, gateway)).split()
    networks = [net for p in ports for net in nbctl(d, "--bare", "--columns=networks", "list", "Logical_Router_Port",
                                                      p).split()]  # fmt: skip
    (join,) = (str(i.ip) for i in map(ip_interface, networks) if i.ip in OVN_JOIN_SUBNET)
    return join
