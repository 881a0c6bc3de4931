"""Namespace, link and sysctl helpers: ``ip``, ``ip -n NS``, ``ip netns exec`` subprocesses with timeouts.

Every function takes the namespace by name and runs one bounded subprocess.
Nothing here ever acts on the host's own namespace: ``ip -n NS`` and
``ip netns exec NS`` fail if NS does not exist (``ip netns add`` is the only
creator, and ``add_namespace`` refuses an existing name).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from magw.lab.errors import LabError

log = structlog.get_logger(__name__)

NETNS_DIR = "/run/netns"
TIMEOUT = 30.0


def run(argv: Sequence[str], *, stdin: str | None = None, timeout: float = TIMEOUT) -> str:
    """Run ``argv``; return stdout. A failure raises LabError with the command and its first error line."""
    try:
        proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(argv[:6])}: timed out after {timeout:g}s") from None
    except OSError as exc:
        raise LabError(f"{argv[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        err = " | ".join(line for line in proc.stderr.strip().splitlines()[:3]) or f"exit {proc.returncode}"
        raise LabError(f"{' '.join(argv[:8])}: {err}")
    return proc.stdout


def list_namespaces() -> list[str]:
    """Names of all named network namespaces (``/run/netns``)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def exists(ns: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, ns))


def add_namespace(ns: str, *, lo_alias: str) -> None:
    """Create ``ns`` with ``lo`` up and aliased ``lo_alias`` (the lab's marker); refuse a name that exists."""
    if exists(ns):
        raise LabError(f"namespace {ns}: already exists")
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "dev", "lo", "up", "alias", lo_alias])


def lo_alias(ns: str) -> str | None:
    """The alias of ``lo`` in ``ns``; None if it has none, or ``ns`` is not a namespace we can enter."""
    try:
        out = run(["ip", "-n", ns, "-j", "link", "show", "dev", "lo"])
        links: list[dict[str, Any]] = json.loads(out) if out.strip() else []
    except (LabError, ValueError):
        return None
    alias = links[0].get("ifalias") if links else None
    return alias if isinstance(alias, str) else None


def delete_namespace(ns: str) -> bool:
    """Delete ``ns`` if it exists; True if it was deleted."""
    if not exists(ns):
        return False
    run(["ip", "netns", "del", ns])
    return True


def ip_batch(ns: str, commands: Sequence[str]) -> None:
    """Run ``ip`` commands (one per line, without the leading ``ip``) in ``ns`` in one process."""
    if commands:
        run(["ip", "-n", ns, "-batch", "-"], stdin="\n".join(commands) + "\n")


def ns_exec(ns: str, *argv: str, stdin: str | None = None, timeout: float = TIMEOUT) -> str:
    """Run a command inside ``ns`` and return its stdout."""
    return run(["ip", "netns", "exec", ns, *argv], stdin=stdin, timeout=timeout)


def sysctl(ns: str, settings: Mapping[str, str]) -> None:
    """Set sysctls inside ``ns`` only (net.* sysctls are per namespace)."""
    if settings:
        ns_exec(ns, "sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items()))


def read_sysctl(ns: str, key: str) -> str:
    return ns_exec(ns, "sysctl", "-n", key).strip()


def nft_load(ns: str, text: str) -> None:
    """Load an nft script into ``ns`` (one transaction)."""
    ns_exec(ns, "nft", "-f", "-", stdin=text)


def link_stats(ns: str, dev: str) -> dict[str, int] | None:
    """RX/TX packet and byte counters of ``dev`` in ``ns`` (``ip -s -j link``), None if it does not exist."""
    if not exists(ns):
        return None
    try:
        out = run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev])
    except LabError:
        return None
    links: list[dict[str, Any]] = json.loads(out) if out.strip() else []
    if not links:
        return None
    stats = links[0].get("stats64", {})
    return {
        "rx_packets": int(stats.get("rx", {}).get("packets", 0)),
        "tx_packets": int(stats.get("tx", {}).get("packets", 0)),
        "rx_bytes": int(stats.get("rx", {}).get("bytes", 0)),
        "tx_bytes": int(stats.get("tx", {}).get("bytes", 0)),
    }


def namespace_pids(ns: str) -> list[int]:
    """PIDs of the processes inside ``ns`` (``ip netns pids``)."""
    if not exists(ns):
        return []
    out = run(["ip", "netns", "pids", ns])
    return sorted(int(tok) for tok in out.split() if tok.isdigit())
