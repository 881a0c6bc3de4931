"""The guard against changing the host's own network namespace: yes, no, and cannot tell (which refuses).

Unit tests feed ``initial_netns`` stat results (PID 1's namespace unreadable, our own
unreadable, fixed-inode kernels and older ones) and check every place that changes the
current namespace consults it: ``magw apply``/``cleanup`` without ``--netns``
(``require_netns``) and ``enable_ping_sockets(None)``.

The kernel tests run the real ``magw-route-agent --once`` and ``magw apply`` where
``/proc`` hides every process's namespace (a private mount namespace with a tmpfs on
``/proc``, ``/proc/sys`` bound back in), INSIDE a throwaway network namespace: a guard
that failed open would program that throwaway namespace, and the test would see it.
"""

from __future__ import annotations

import argparse
import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import magw.drivers.netns as netns_module
import magw.health.probe as probe
from magw.cli import UsageError
from magw.cli.nodeargs import CURRENT_ALLOWED, add_netns_argument, require_netns
from magw.drivers.netns import NET_NS_INIT_INO, InitialNetns, initial_netns, refusal
from magw.health.probe import PingSocketError, enable_ping_sockets
from tests.support.daemon_procs import agent_args, make_broker, wire_node
from tests.support.netns import NsFactory, ip_json, nft_json, run
from tests.support.paths import REPO

SEED = str(REPO / "examples" / "seed-east.yaml")
OWN, INIT = "/own/ns/net", "/init/ns/net"
CANNOT_TELL = (
    "refusing to {doing} the current network namespace: cannot tell whether it is the host's initial one "
    "(/proc/thread-self/ns/net: No such file or directory); pass --allow-init-netns if it is the node's own namespace"
)


def ns_stat(dev: int, ino: int) -> os.stat_result:
    return os.stat_result((0o100444, ino, dev, 1, 0, 0, 0, 0, 0, 0))


def fake_stat(table: dict[str, os.stat_result | OSError]) -> Callable[[str], os.stat_result]:
    def stat(path: str) -> os.stat_result:
        found = table[path]
        if isinstance(found, OSError):
            raise found
        return found

    return stat


def verdict(table: dict[str, os.stat_result | OSError], release: str = "6.1.0-13-amd64") -> InitialNetns:
    return initial_netns(own=OWN, init=INIT, stat=fake_stat(table), release=release)


DENIED = PermissionError(errno.EACCES, "Permission denied")
MISSING = FileNotFoundError(errno.ENOENT, "No such file or directory")


# -- initial_netns: yes / no / cannot tell -----------------------------------------------------------


def test_same_device_and_inode_as_pid1_is_the_initial_namespace() -> None:
    """Our namespace file and PID 1's with equal (st_dev, st_ino): initial."""
    got = verdict({OWN: ns_stat(4, 4026532247), INIT: ns_stat(4, 4026532247)})
    assert got == InitialNetns(initial=True, reason=f"{OWN} is {INIT}")


def test_another_inode_or_device_is_not_the_initial_namespace() -> None:
    """A different inode, or the same inode on another device, is another namespace."""
    assert verdict({OWN: ns_stat(4, 4026532300), INIT: ns_stat(4, 4026532247)}) == InitialNetns(
        initial=False, reason=f"{OWN} is not {INIT}"
    )
    assert verdict({OWN: ns_stat(5, 4026532247), INIT: ns_stat(4, 4026532247)}).initial is False


def test_unreadable_pid1_cannot_tell_on_kernels_without_a_fixed_initial_inode() -> None:
    """PID 1's namespace unreadable (EACCES, as root in some sandboxes) on Linux < 6.18: cannot tell, saying why."""
    for release in ("6.1.0-13-amd64", "6.17.9", "5.10.0"):
        got = verdict({OWN: ns_stat(4, 4026532247), INIT: DENIED}, release=release)
        assert got == InitialNetns(initial=None, reason=f"{INIT}: Permission denied")


def test_unreadable_own_namespace_cannot_tell() -> None:
    """Our own namespace file unreadable (no /proc): cannot tell, whatever the kernel."""
    got = verdict({OWN: MISSING, INIT: ns_stat(4, 4026532247)}, release="6.18.4")
    assert got == InitialNetns(initial=None, reason=f"{OWN}: No such file or directory")


def test_linux_6_18_tells_by_the_fixed_inode_of_the_initial_namespace() -> None:
    """Linux >= 6.18 numbers the initial namespace 0xEFFFFFF9: that inode is initial even when PID 1 is hidden,
    and any other inode is not."""
    hidden = {OWN: ns_stat(4, NET_NS_INIT_INO), INIT: DENIED}
    assert verdict(hidden, release="6.1.0").initial is True  # older kernels never hand out that number
    got = verdict({OWN: ns_stat(4, 4026532247), INIT: DENIED}, release="6.18.44-fc-v657")
    assert got == InitialNetns(
        initial=False,
        reason=f"{INIT}: Permission denied; on Linux 6.18.44-fc-v657 the initial namespace has inode 0xeffffff9",
    )
    assert verdict({OWN: ns_stat(4, 4026532247), INIT: DENIED}, release="7.0.1").initial is False
    assert verdict({OWN: ns_stat(4, 4026532247), INIT: DENIED}, release="6.18-rc1").initial is False
    assert verdict({OWN: ns_stat(4, 4026532247), INIT: DENIED}, release="6.9.1").initial is None


def test_refusal_is_one_line_saying_why_and_how_to_override() -> None:
    """Initial or cannot tell: one line with the reason and --allow-init-netns; known not initial: no refusal."""
    assert refusal(InitialNetns(initial=False, reason="x"), doing="program") is None
    assert refusal(InitialNetns(initial=True, reason="/a is /b"), doing="program") == (
        "refusing to program the host's initial network namespace (/a is /b); run inside the node's namespace "
        "(ip netns exec NS ...), or pass --allow-init-netns if the node really is the host"
    )
    assert refusal(InitialNetns(initial=None, reason="/proc/1/ns/net: Permission denied"), doing="change") == (
        "refusing to change the current network namespace: cannot tell whether it is the host's initial one "
        "(/proc/1/ns/net: Permission denied); pass --allow-init-netns if it is the node's own namespace"
    )


# -- where the guard is used ------------------------------------------------------------------------


def answer(monkeypatch: pytest.MonkeyPatch, initial: bool | None) -> None:
    """Make the guard see ``initial`` (None: cannot tell, as with an unreadable /proc/1/ns/net)."""
    reason = "/proc/1/ns/net: Permission denied"
    monkeypatch.setattr(netns_module, "initial_netns", lambda **_: InitialNetns(initial=initial, reason=reason))


def parse(*argv: str, guard: bool = True) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_netns_argument(parser, guard=guard)
    return parser.parse_args(argv)


def test_apply_and_cleanup_without_netns_refuse_when_the_guard_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    """require_netns (apply, cleanup) with no --netns: cannot tell or initial -> UsageError (exit 2) with the line."""
    answer(monkeypatch, None)
    with pytest.raises(UsageError) as refused:
        require_netns(parse().netns)
    assert str(refused.value) == (
        "refusing to change the current network namespace: cannot tell whether it is the host's initial one "
        "(/proc/1/ns/net: Permission denied); pass --allow-init-netns if it is the node's own namespace"
    )
    answer(monkeypatch, True)
    with pytest.raises(UsageError, match=r"^refusing to change the host's initial network namespace .*--netns NS"):
        require_netns(parse().netns)


def test_allow_init_netns_and_a_known_node_namespace_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """--allow-init-netns (before or after --netns) waives the guard; a known non-initial namespace needs nothing;
    diagnose (guard=False) never asks."""
    answer(monkeypatch, None)
    assert parse("--allow-init-netns").netns is CURRENT_ALLOWED
    assert require_netns(parse("--allow-init-netns").netns) is None
    assert require_netns(parse(guard=False).netns, guard=False) is None
    with pytest.raises(SystemExit):  # diagnose has no such flag
        parse("--allow-init-netns", guard=False)
    answer(monkeypatch, False)
    assert require_netns(parse().netns) is None


def test_allow_init_netns_never_hides_a_named_namespace() -> None:
    """--netns NS with --allow-init-netns in either order still means NS."""
    assert parse("--netns", "node-a", "--allow-init-netns").netns == "node-a"
    assert parse("--allow-init-netns", "--netns", "node-a").netns == "node-a"


class Sysctls:
    """read/write_sysctl stand-ins: the range excludes our group; writes are recorded, never made."""

    def __init__(self) -> None:
        self.writes: list[tuple[str | None, str, str]] = []

    def read(self, netns: str | None, key: str) -> str:
        return "1\t0"

    def write(self, netns: str | None, key: str, value: str) -> None:
        self.writes.append((netns, key, value))


@pytest.fixture
def sysctls(monkeypatch: pytest.MonkeyPatch) -> Sysctls:
    fake = Sysctls()
    monkeypatch.setattr(probe, "read_sysctl", fake.read)
    monkeypatch.setattr(probe, "write_sysctl", fake.write)
    return fake


def test_ping_sockets_refuse_the_current_namespace_when_the_guard_cannot_tell(
    monkeypatch: pytest.MonkeyPatch, sysctls: Sysctls
) -> None:
    """enable_ping_sockets(None) writes nothing when it cannot tell, and says why and how to override."""
    answer(monkeypatch, None)
    gid = os.getegid()
    with pytest.raises(PingSocketError) as refused:
        enable_ping_sockets(None)
    assert sysctls.writes == []
    assert str(refused.value) == (
        f"net.ipv4.ping_group_range is '1\\t0' (excludes gid {gid}): refusing to set net.ipv4.ping_group_range in "
        "the current network namespace: cannot tell whether it is the host's initial one (/proc/1/ns/net: "
        "Permission denied); pass --allow-init-netns if it is the node's own namespace, or set it yourself "
        f"(sysctl -w net.ipv4.ping_group_range='{gid} {gid}')"
    )


def test_ping_sockets_widen_the_range_when_allowed_or_known_safe(
    monkeypatch: pytest.MonkeyPatch, sysctls: Sysctls
) -> None:
    """allow_initial, or a namespace known not to be the initial one: the range is widened to our group."""
    gid = os.getegid()
    answer(monkeypatch, None)
    enable_ping_sockets(None, allow_initial=True)
    answer(monkeypatch, False)
    enable_ping_sockets(None)
    assert sysctls.writes == [(None, "net.ipv4.ping_group_range", f"{gid} {gid}")] * 2


# -- the real commands, with /proc hiding every namespace -------------------------------------------

# In a private mount namespace: a tmpfs over /proc (no /proc/1, no /proc/thread-self), with the real
# /proc/sys bound back so that everything else the commands need still works.
_HIDE_PROC = (
    'set -e; spare="$1"; shift; mount -t proc proc "$spare"; mount -t tmpfs none /proc; mkdir /proc/sys; '
    'mount --bind "$spare/sys" /proc/sys; umount "$spare"; exec "$@"'
)


def blind(ns: str, spare: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in ``ns`` with /proc hiding every process's namespace."""
    spare.mkdir(exist_ok=True)
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _HIDE_PROC, "sh", str(spare), *cmd]
    return subprocess.run(["ip", "netns", "exec", ns, *wrapped], cwd=REPO, capture_output=True, text=True, timeout=120)


def ours(ns: str) -> dict[str, Any]:
    """What magw would have made in ``ns``: our links, nft tables, the hash policy."""
    links = sorted(link["ifname"] for link in ip_json(ns, "link", "show") if link["ifname"].startswith("vx"))
    tables = sorted(t["table"]["name"] for t in nft_json(ns, "list", "tables")["nftables"] if "table" in t)
    policy = run(ns, "cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy").stdout.strip()
    return {"links": links, "nft": tables, "hash_policy": policy}


NOTHING = {"links": [], "nft": [], "hash_policy": "0"}


@pytest.mark.kernel
def test_route_agent_refuses_when_it_cannot_tell(tmp_path: Path, ns_factory: NsFactory) -> None:
    """magw-route-agent --once where /proc hides PID 1's and our own namespace: exit 2, the one line, and
    nothing made in the namespace; the same run with --allow-init-netns programs it (so the refusal is what
    kept it clean)."""
    node, peer = ns_factory("magwt-gd"), ns_factory("magwt-gdp")
    wire_node(node, peer, ip="172.18.0.3", cni_ip="10.1.3.1")
    broker = make_broker(tmp_path / "broker")
    agent = [sys.executable, "-m", "magw.daemons.route_agent.main", *agent_args(broker), "--once", "--no-health"]
    refused = blind(node, tmp_path / "proc", *agent)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        2,
        "",
        "magw-route-agent: error: " + CANNOT_TELL.format(doing="program") + "\n",
    )
    assert ours(node) == NOTHING
    allowed = blind(node, tmp_path / "proc", *agent, "--allow-init-netns")
    assert allowed.returncode == 0, allowed.stderr
    assert ours(node) == {"links": ["vx-submariner"], "nft": ["magw"], "hash_policy": "1"}


@pytest.mark.kernel
def test_apply_and_cleanup_refuse_without_netns_when_they_cannot_tell(tmp_path: Path, ns: str) -> None:
    """magw apply and magw cleanup without --netns, /proc hiding the namespaces: exit 2 with the one line,
    nothing made; apply --allow-init-netns then applies, and cleanup --allow-init-netns removes it again."""
    run(ns, "ip", "link", "add", "cni0", "type", "bridge")
    run(ns, "ip", "addr", "add", "10.1.3.1/24", "dev", "cni0")
    magw = [sys.executable, "-m", "magw.cli.main"]
    apply = [*magw, "apply", "--snapshot", SEED, "--node", "e-w1"]
    expected = (2, "", "magw: error: " + CANNOT_TELL.format(doing="change") + "\n")
    refused = blind(ns, tmp_path / "proc", *apply)
    assert (refused.returncode, refused.stdout, refused.stderr) == expected
    assert ours(ns) == NOTHING
    done = blind(ns, tmp_path / "proc", *apply, "--allow-init-netns")
    assert done.returncode == 0, done.stderr
    assert ours(ns) == {"links": ["vx-submariner"], "nft": ["magw"], "hash_policy": "1"}
    kept = blind(ns, tmp_path / "proc", *magw, "cleanup")
    assert (kept.returncode, kept.stdout, kept.stderr) == expected
    assert ours(ns)["links"] == ["vx-submariner"]
    cleaned = blind(ns, tmp_path / "proc", *magw, "cleanup", "--allow-init-netns")
    assert cleaned.returncode == 0, cleaned.stderr
    assert ours(ns) == {"links": [], "nft": [], "hash_policy": "1"}


def test_a_named_alias_of_the_host_namespace_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--netns NAME`` that is (or may be) the host's namespace, e.g. ``ip netns attach host 1``: refused with
    one line naming the override, for apply and cleanup (the guarded commands); diagnose only reads."""
    from magw.cli import UsageError, nodeargs
    from magw.drivers.netns import InitialNetns

    seen: list[str | None] = []

    def fake(*, own: str | None = None, **_: object) -> InitialNetns:
        seen.append(own)
        return InitialNetns(initial=True, reason=f"{own} has inode 0xeffffff9, the initial namespace's")

    monkeypatch.setattr(nodeargs, "check_netns", lambda name: None)
    monkeypatch.setattr(nodeargs, "netns_path", lambda name: f"/run/netns/{name}")
    monkeypatch.setattr(nodeargs, "initial_netns", fake)
    with pytest.raises(UsageError) as err:
        nodeargs.require_netns("hostalias")
    text = str(err.value)
    assert "--netns hostalias: refusing, it is the host's initial network namespace" in text
    assert "--allow-init-netns" in text and "\n" not in text
    assert seen == ["/run/netns/hostalias"]
    monkeypatch.setattr(nodeargs, "initial_netns", lambda **_: InitialNetns(initial=None, reason="cannot read"))
    with pytest.raises(UsageError, match="may be the host's initial namespace"):
        nodeargs.require_netns("hostalias")
    assert nodeargs.require_netns("hostalias", guard=False) == "hostalias"


@pytest.mark.kernel
def test_a_namespace_of_its_own_passes_the_alias_guard(ns: str) -> None:
    """A namespace made by ``ip netns add`` is not the host's: --netns accepts it."""
    from magw.cli.nodeargs import require_netns

    assert require_netns(ns) == ns
