"""One node's kernel objects, read back with the real tools, into ``nodes/<node>/`` of the tarball.

Everything of the node's network namespace, not only magw's objects: a foreign route, rule or nft table that
shadows ours is exactly what a bug report needs (docs/gather.md). Reading changes nothing. ``wg show`` runs with
keys hidden (``WG_HIDE_KEYS=always``; never ``wg show dump`` or ``showconf``, which print the private key).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from magw.model.cable import WG_DEVICE
from magw.ops.gather.archive import Archive

SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.fib_multipath_hash_policy",
    "net.ipv4.conf.all.rp_filter",
    "net.ipv4.conf.default.rp_filter",
)


@attrs.frozen(kw_only=True)
class Read:
    """One read-back: the member's file name and the command (``{ns}`` forms: see ``node_reads``)."""

    name: str
    argv: tuple[str, ...]
    json_out: bool = False


def _ip(netns: str | None, *args: str) -> tuple[str, ...]:
    return ("ip", *(("-n", netns) if netns else ()), *args)


def _exec(netns: str | None, *args: str) -> tuple[str, ...]:
    return ("ip", "netns", "exec", netns, *args) if netns else args


def node_reads(netns: str | None) -> tuple[Read, ...]:
    """The read-backs of namespace ``netns`` (None: the current one)."""
    return (
        Read(name="ip-link.txt", argv=_ip(netns, "-d", "-s", "link", "show")),
        Read(name="ip-addr.txt", argv=_ip(netns, "-d", "addr", "show")),
        Read(name="ip-route.txt", argv=_ip(netns, "route", "show", "table", "all")),
        Read(name="ip-rule.txt", argv=_ip(netns, "rule", "show")),
        Read(name="ip-nexthop.json", argv=_ip(netns, "-j", "-d", "nexthop", "show"), json_out=True),
        Read(name="ip-nexthop-bucket.txt", argv=_ip(netns, "nexthop", "bucket", "show")),
        Read(name="ip-neigh.txt", argv=_ip(netns, "neigh", "show")),
        Read(name="bridge-fdb.txt", argv=("bridge", *(("-n", netns) if netns else ()), "fdb", "show")),
        Read(name="nft-ruleset.txt", argv=_exec(netns, "nft", "list", "ruleset")),
        Read(name="sysctl.txt", argv=_exec(netns, "sysctl", *SYSCTLS)),
        Read(name="conntrack-stats.txt", argv=_exec(netns, "conntrack", "-S")),
    )


def wg_show_argv(netns: str | None, wireguard_go_pid: int | None) -> tuple[str, ...]:
    """``wg show magw-wg``: for wireguard-go through its own mount namespace (its control socket is there,
    ``magw.drivers.wireguard.userspace``), for the kernel's device in the node's network namespace."""
    if wireguard_go_pid is not None:
        return ("nsenter", f"--target={wireguard_go_pid}", "--mount", "wg", "show", WG_DEVICE)
    return _exec(netns, "wg", "show", WG_DEVICE)


def wireguard_go_pid(state_dir: Path) -> int | None:
    """The wireguard-go pid the node's route agent recorded (``<state-dir>/wireguard/wireguard-go.pid``; only that
    file of the key directory is read), None when there is none or it is not running."""
    try:
        text = (state_dir / "wireguard" / "wireguard-go.pid").read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or not Path(f"/proc/{text}").exists():
        return None
    return int(text)


def collect_node(archive: Archive, prefix: str, netns: str | None, *, wireguard: bool,
                 state_dir: Path | None = None) -> None:  # fmt: skip
    """Every read-back of ``netns`` into ``<prefix>/``; ``wireguard``: the node has a WireGuard cable device."""
    for read in node_reads(netns):
        archive.command(f"{prefix}/{read.name}", read.argv, json_out=read.json_out)
    if wireguard:
        pid = wireguard_go_pid(state_dir) if state_dir is not None else None
        archive.command(f"{prefix}/wg-show.txt", wg_show_argv(netns, pid))
