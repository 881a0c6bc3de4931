"""Reading a node's namespace for the checks: ``ip -j``, ``bridge -j``, ``nft -j``, ``/proc/sys`` (through
setns), kernel modules, and echoes (raw ICMP, bounded: one request, a timeout). Nothing is written."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from magw.drivers.netlink.sysctl import read_sysctl
from magw.drivers.netns import run_in_netns

TIMEOUT = 20
IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
ICMP_ECHO_REQUEST = 8
ICMP_ECHO_REPLY = 0


class ReadError(RuntimeError):
    """A tool failed or printed what we cannot read (one line)."""


def _in_ns(netns: str | None, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def run_json(netns: str | None, argv: list[str]) -> Any:
    try:
        out = subprocess.run(_in_ns(netns, argv), capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReadError(f"{' '.join(argv)}: {exc}") from None
    if out.returncode != 0:
        raise ReadError(f"{' '.join(argv)}: {out.stderr.strip() or f'exit {out.returncode}'}")
    text = out.stdout.strip()
    try:
        return json.loads(text) if text else []
    except ValueError as exc:
        raise ReadError(f"{' '.join(argv)}: unreadable JSON ({exc})") from None


def links(netns: str | None) -> dict[str, dict[str, Any]]:
    return {d["ifname"]: d for d in run_json(netns, ["ip", "-d", "-j", "link", "show"])}


def fdb_dsts(netns: str | None, dev: str) -> list[str]:
    return sorted({e["dst"] for e in run_json(netns, ["bridge", "-j", "fdb", "show", "dev", dev]) if "dst" in e})


def neighbours(netns: str | None, dev: str) -> list[dict[str, Any]]:
    return [n for n in run_json(netns, ["ip", "-j", "neigh", "show", "dev", dev]) if "dst" in n]


def route_get(netns: str | None, dst: str, src: str | None = None, mark: str | None = None) -> dict[str, Any] | None:
    """``ip route get``; ``mark``: as a packet with that fwmark (a table only an fwmark rule reaches)."""
    argv = ["ip", "-j", "route", "get", dst] + (["from", src] if src else []) + (["mark", mark] if mark else [])
    try:
        got = run_json(netns, argv)
    except ReadError:
        return None
    return got[0] if got else None


def rules(netns: str | None) -> list[dict[str, Any]]:
    return list(run_json(netns, ["ip", "-j", "rule", "show"]))


def routes(netns: str | None) -> list[dict[str, Any]]:
    return list(run_json(netns, ["ip", "-j", "route", "show", "table", "all"]))


def nexthops(netns: str | None) -> list[dict[str, Any]]:
    try:
        return list(run_json(netns, ["ip", "-j", "nexthop", "show"]))
    except ReadError:
        return []


def nft_ruleset(netns: str | None) -> list[dict[str, Any]]:
    doc = run_json(netns, ["nft", "-j", "list", "ruleset"])
    return list(doc.get("nftables", [])) if isinstance(doc, dict) else []


def sysctl(netns: str | None, key: str) -> int | None:
    try:
        return int(read_sysctl(netns, key))
    except (OSError, ValueError):
        return None


def module_state(name: str) -> str | None:
    """"loaded", "builtin", "installed" (modprobe would load it) or None."""
    release = os.uname().release
    if Path(f"/sys/module/{name}").exists():
        return "loaded"
    base = Path("/lib/modules") / release
    for listing, state in (("modules.builtin", "builtin"), ("modules.dep", "installed")):
        try:
            text = (base / listing).read_text()
        except OSError:
            continue
        if any(line.split(":")[0].rsplit("/", 1)[-1].split(".ko")[0] == name for line in text.splitlines()):
            return state
    return None


def which(tool: str) -> str | None:
    return shutil.which(tool)


def ovn_sockets() -> set[str]:
    found: set[str] = set()
    for d in ("/var/run/ovn", "/run/ovn", "/var/run/openvswitch"):
        try:
            found.update(p.name for p in Path(d).iterdir() if p.name.endswith(".ctl"))
        except OSError:
            continue
    return found


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return int(~total & 0xFFFF)


def _echo(dst: str, size: int, echo_id: int, dontfrag: bool, timeout: float) -> tuple[bool, str]:
    payload = b"magw-diagnose".ljust(max(0, size - 28), b"\0")
    seq = os.getpid() & 0xFFFF
    head = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, echo_id, seq)
    packet = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, _checksum(head + payload), echo_id, seq) + payload
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        if dontfrag:
            s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        try:
            s.sendto(packet, (dst, 0))
        except OSError as exc:
            return False, f"send: {exc.strerror or exc}"
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            s.settimeout(left)
            try:
                data, (addr, _) = s.recvfrom(65535)
            except TimeoutError:
                break
            hl = (data[0] & 0x0F) * 4
            if len(data) < hl + 8 or addr != dst:
                continue
            kind, _, _, rid, rseq = struct.unpack("!BBHHH", data[hl:hl + 8])
            if kind == ICMP_ECHO_REPLY and rid == echo_id and rseq == seq:
                return True, ""
    return False, f"no reply in {timeout:g} s"


def echo(netns: str | None, dst: str, *, size: int = 84, echo_id: int = 1, dontfrag: bool = False,
         timeout: float = 3.0) -> tuple[bool, str]:
    """One ICMP echo of ``size`` bytes (IP total length) to ``dst`` from ``netns``: (answered, why not)."""
    return run_in_netns(netns, lambda: _echo(dst, size, echo_id, dontfrag, timeout))
