"""``magw apply``, ``magw cleanup`` and ``magw diagnose kernel`` on the real kernel, run as a user would."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
import zlib

import pytest

from magw.drivers.netlink.capabilities import NEXTHOP_COMPAT_KEY, set_nexthop_compat_mode
from magw.drivers.netns import NETNS_DIR
from tests.support.cli import MagwCli
from tests.support.kernel_node import add_cni_device
from tests.support.netns import ip_json, nft_json, run
from tests.support.paths import REPO

pytestmark = pytest.mark.kernel

SEED = str(REPO / "examples" / "seed-east.yaml")
REMOTE = ("10.2.0.0/16", "100.2.0.0/16")  # west's CIDRs in the seed


def _our_links(ns: str) -> list[str]:
    return sorted(link["ifname"] for link in ip_json(ns, "link", "show") if link["ifname"].startswith("vx"))


def test_apply_twice_then_cleanup(ns: str, magw_cli: MagwCli) -> None:
    """apply installs the worker's plan (one line per change, a summary, exit 0); a second apply prints
    only "no changes"; cleanup removes all of it and leaves the CNI device."""
    add_cni_device(ns, "10.1.3.1")
    first = magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns)
    assert (first.returncode, first.stderr) == (0, "")
    lines = first.stdout.splitlines()
    assert lines[0] == (
        "create link vx-submariner type vxlan id 100 dstport 4800 nolearning local 172.18.0.3 mtu 1450"
        " address 02:53:f0:12:00:03 up"
    )
    assert "create route 10.2.0.0/16 table main nhid 1677721597 src 10.1.3.1 metric 100" in lines
    assert lines[-2:] == ["replace nft table ip magw", "12 changes applied, 0 failed"]
    routes = ip_json(ns, "route", "show", "10.2.0.0/16")
    assert [(r["dst"], r["nhid"], r["prefsrc"], r["protocol"]) for r in routes] == [
        ("10.2.0.0/16", 1677721597, "10.1.3.1", "157")
    ]
    assert run(ns, "cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy").stdout.strip() == "1"

    second = magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns)
    assert (second.returncode, second.stdout, second.stderr) == (0, "no changes\n", "")

    cleanup = magw_cli("cleanup", "--netns", ns)
    assert cleanup.returncode == 0
    assert cleanup.stdout.splitlines()[-1] == "12 changes applied, 0 failed"
    assert _our_links(ns) == []
    assert ip_json(ns, "nexthop", "show") == []
    assert [t for t in nft_json(ns, "list", "tables")["nftables"] if "table" in t] == []
    assert [link["ifname"] for link in ip_json(ns, "link", "show", "cni0")] == ["cni0"]
    assert magw_cli("cleanup", "--netns", ns).stdout == "no changes\n"


def test_apply_adopts_the_group_an_older_build_made(ns: str, magw_cli: MagwCli) -> None:
    """A worker's state as a build before the shared groups left it: west's routes on west's own group
    (0x63xxxxxx of its hash, not 0x63FFFFFD). ``magw apply`` keeps that group as the shared one: no change at
    all, so no route moves and no flow is spread afresh (docs/planner.md, "Strategies")."""
    add_cni_device(ns, "10.1.3.1")
    assert magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns).returncode == 0
    old = 0x63000000 | (zlib.crc32(b"west") & 0xFFFFFF)  # the id an older build gave west's group
    group = next(n for n in ip_json(ns, "nexthop", "show") if n["id"] == 0x63FFFFFD)
    members = "/".join(str(m["id"]) for m in group["group"])
    batch = [f"nexthop add id {old} group {members} type resilient buckets 128 idle_timer 10 proto 157"]
    batch += [f"route replace {dst} nhid {old} src 10.1.3.1 metric 100 proto 157" for dst in REMOTE]
    batch += ["nexthop del id 1677721597"]
    subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(batch) + "\n", text=True, check=True, timeout=60)
    again = magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns)
    assert (again.returncode, again.stdout, again.stderr) == (0, "no changes\n", "")
    routes = ip_json(ns, "route", "show", "table", "main")
    assert {r["dst"]: r.get("nhid") for r in routes if "nhid" in r} == dict.fromkeys(REMOTE, old)


class IpMonitor:
    """``ip -o monitor all`` inside a namespace: every netlink event there, one line each.

    ``mark()`` adds a sentinel address on ``lo`` and waits until the monitor prints it, so
    the events it returns are exactly those between two marks (the sentinels' own lines
    left out). The first mark retries until the monitor has subscribed (bounded).
    """

    SENTINEL = "192.0.2."

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self._n = 0
        self._lines: queue.Queue[str] = queue.Queue()
        self._proc = subprocess.Popen(["ip", "-o", "-n", ns, "monitor", "all"], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))

    def _sentinel(self, wait: float) -> list[str] | None:
        self._n += 1
        mark = f"inet {self.SENTINEL}{self._n}/32"
        run(self.ns, "ip", "addr", "add", f"{self.SENTINEL}{self._n}/32", "dev", "lo")
        seen: list[str] = []
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if mark in line:
                return [e for e in seen if self.SENTINEL not in e]
            seen.append(line)
        return None

    def mark(self) -> list[str]:
        """The events since the previous mark (all of them before the first one)."""
        for _ in range(40 if self._n == 0 else 1):
            events = self._sentinel(wait=0.5 if self._n == 0 else 20.0)
            if events is not None:
                return events
        raise AssertionError(f"ip monitor in {self.ns} never printed sentinel {self._n}")

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


def full_dump(ns: str) -> dict[str, str]:
    """Everything of the namespace that magw could change, as the tools print it."""
    commands = {
        "links": ["ip", "-json", "-d", "link", "show"],
        "addresses": ["ip", "-json", "-d", "addr", "show"],
        "routes": ["ip", "-json", "-d", "route", "show", "table", "all"],
        "routes6": ["ip", "-json", "-d", "-6", "route", "show", "table", "all"],
        "nexthops": ["ip", "-json", "-d", "nexthop", "show"],
        "rules": ["ip", "-json", "-d", "rule", "show"],
        "neighbors": ["ip", "-json", "-d", "neigh", "show"],
        "fdb": ["bridge", "-json", "fdb", "show"],
        "nft": ["nft", "-j", "list", "ruleset"],
        "sysctls": ["sh", "-c", "grep -r . /proc/sys/net/ipv4 /proc/sys/net/ipv6/conf /proc/sys/net/core 2>/dev/null"],
    }
    return {name: run(ns, *cmd, check=name != "sysctls").stdout for name, cmd in commands.items()}


@pytest.mark.parametrize("before", ["fresh", "worker applied"])
def test_dry_run_changes_nothing_not_even_for_an_instant(ns: str, before: str, magw_cli: MagwCli) -> None:
    """--dry-run prints what it inferred, the sysctl it would set and the changes, and the namespace sees
    no netlink event at all while it runs (no probe nexthop or group, even created and deleted again),
    and every dump (links, addresses, routes, nexthops, rules, neighbors, FDB, nft, sysctls) is unchanged.
    Also on a namespace that already holds magw's objects (another node's plan: deletes and changes)."""
    # IPv6 autoconfiguration of the test's own devices would print events of its own, at any time.
    for scope in ("all", "default"):
        run(ns, "sh", "-c", f"echo 1 > /proc/sys/net/ipv6/conf/{scope}/disable_ipv6")
    add_cni_device(ns, "10.1.1.1")
    if before == "worker applied":
        add_cni_device(ns, "10.1.3.1", name="cni1")
        assert magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns).returncode == 0
    monitor = IpMonitor(ns)
    try:
        monitor.mark()
        dump_before = full_dump(ns)
        out = magw_cli("apply", "--snapshot", SEED, "--node", "e-gw1", "--netns", ns, "--dry-run")
        dump_after = full_dump(ns)
        events = monitor.mark()
    finally:
        monitor.close()
    assert (out.returncode, out.stderr) == (0, "")
    assert events == []
    assert {k: v for k, v in dump_after.items() if v != dump_before[k]} == {}
    lines = out.stdout.splitlines()
    assert lines[:2] == [
        f"dry run: resilient groups inferred from the nexthop bucket dump (kernel {os.uname().release}),"
        " not probed by creating one",
        "would set net.ipv4.fib_multipath_hash_policy=1",
    ]
    assert "create rule 100: from all lookup 100" in lines
    assert lines[-1].endswith("changes (dry run: nothing applied)")
    expected_policy = "1" if before == "worker applied" else "0"
    assert run(ns, "cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy").stdout.strip() == expected_policy


def test_dry_run_is_described_in_help(magw_cli: MagwCli) -> None:
    """``magw apply --help`` says what a dry run does: read-only detection, no sysctl, nothing applied."""
    out = magw_cli("apply", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--dry-run only reads the namespace" in text
    assert "no probe objects are created" in text


def test_apply_reports_failures_and_exits_1(ns: str, magw_cli: MagwCli) -> None:
    """Without the node's CNI address the kernel refuses routes with that src: each failure is one line
    naming the route and the kernel's reason, and the exit code is 1."""
    out = magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns)
    assert out.returncode == 1
    failed = [line for line in out.stdout.splitlines() if line.startswith("failed: ")]
    # The reason's wording is the fast path's; the errno name and the kernel's extack text are fixed.
    assert [line.split(": EINVAL: ")[0] for line in failed] == [
        "failed: create route 10.2.0.0/16 table main nhid 1677721597 src 10.1.3.1 metric 100",
        "failed: create route 100.2.0.0/16 table main nhid 1677721597 src 10.1.3.1 metric 100",
    ]
    assert ["Invalid prefsrc address" in line for line in failed] == [True, True]
    assert out.stdout.splitlines()[-1] == "10 changes applied, 2 failed"


def test_diagnose_kernel_json(ns: str, magw_cli: MagwCli) -> None:
    """diagnose kernel --json reports nexthop support, resilient groups and the namespace's hash policy."""
    out = magw_cli("diagnose", "kernel", "--netns", ns, "--json")
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert {k: doc[k] for k in ("netns", "nexthop_objects", "resilient_groups", "strategy")} == {
        "netns": ns,
        "nexthop_objects": True,
        "resilient_groups": True,
        "strategy": "resilient",
    }
    assert doc["fib_multipath_hash_policy"] == 0
    assert doc["kernel"] == os.uname().release
    assert ip_json(ns, "nexthop", "show") == []


def test_diagnose_kernel_text(ns: str, magw_cli: MagwCli) -> None:
    """The text form has one "name: value" line per capability."""
    out = magw_cli("diagnose", "kernel", "--netns", ns)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[1:5] == [
        "nexthop objects: yes",
        "resilient groups: yes",
        "strategy for 'resilient': resilient",
        "fib_multipath_hash_policy: 0 (magw apply sets 1: per-flow spreading)",
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("apply", "--snapshot", SEED, "--node", "e-w1"),
        ("cleanup",),
        ("diagnose", "kernel"),
    ],
)
def test_missing_netns_exits_2_and_creates_nothing(args: tuple[str, ...], magw_cli: MagwCli) -> None:
    """A --netns that does not exist is bad input: exit 2, one stderr line, and no namespace is created."""
    name = "magwt-d2-missing-ns"
    out = magw_cli(*args, "--netns", name)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == f"magw: error: --netns: no such network namespace: {name}\n"
    assert not os.path.exists(os.path.join(NETNS_DIR, name))


def test_unknown_node_exits_2(ns: str, magw_cli: MagwCli) -> None:
    """An unknown --node is bad input, named with the known nodes."""
    out = magw_cli("apply", "--snapshot", SEED, "--node", "nope", "--netns", ns)
    assert (out.returncode, out.stderr) == (
        2,
        "magw: error: --node: unknown node 'nope' (known nodes: e-gw1, e-gw2, e-w1)\n",
    )


def test_with_nexthop_compat_mode_off_routes_show_only_their_nhid_and_apply_converges(
    ns: str, magw_cli: MagwCli
) -> None:
    """``net.ipv4.nexthop_compat_mode=0`` (the route agent's ``--nexthop-compat-mode off``), set in the namespace
    only: the kernel dumps magw's routes as ``nhid N`` without the group's paths, our observe still reads them
    (a second apply has nothing to do), and a group replace still steers: ``ip route get`` follows the new
    members."""
    host_path = "/proc/sys/" + NEXTHOP_COMPAT_KEY.replace(".", "/")
    with open(host_path) as f:
        host_before = f.read().strip()
    add_cni_device(ns, "10.1.3.1")
    set_nexthop_compat_mode(ns, 0)
    assert run(ns, "cat", host_path).stdout.strip() == "0"
    with open(host_path) as f:
        assert f.read().strip() == host_before
    assert magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns).returncode == 0
    routes = [r for r in ip_json(ns, "route", "show", "table", "main") if r["dst"] in REMOTE]
    assert [(r["dst"], r["nhid"], "nexthops" in r, "gateway" in r) for r in routes] == [
        (dst, 0x63FFFFFD, False, False) for dst in REMOTE
    ]
    again = magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns)
    assert (again.returncode, again.stdout, again.stderr) == (0, "no changes\n", "")
    members = sorted(m["id"] for m in next(n for n in ip_json(ns, "nexthop", "show") if n["id"] == 0x63FFFFFD)["group"])
    run(ns, "ip", "nexthop", "replace", "id", str(0x63FFFFFD), "group", str(members[0]), "type", "resilient",
        "buckets", "128", "idle_timer", "10")  # fmt: skip
    hop = ip_json(ns, "route", "get", "10.2.0.1")[0]
    assert hop["gateway"] == next(n["gateway"] for n in ip_json(ns, "nexthop", "show") if n["id"] == members[0])
