"""Throwaway network namespaces for kernel tests (never the host's own)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any


def can_use_netns() -> bool:
    return os.geteuid() == 0 and os.path.exists("/proc/self/ns/net")


def run(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command inside namespace ``ns`` (``ip netns exec``)."""
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, capture_output=True, text=True, timeout=60)


def ip_json(ns: str, *args: str) -> Any:
    """An independent read-back: ``ip -json ARGS`` inside ``ns``."""
    out = run(ns, "ip", "-json", *args).stdout
    return json.loads(out) if out.strip() else []


def bridge_json(ns: str, *args: str) -> Any:
    out = run(ns, "bridge", "-json", *args).stdout
    return json.loads(out) if out.strip() else []


def nft_json(ns: str, *args: str) -> Any:
    return json.loads(run(ns, "nft", "-j", *args).stdout)


@contextlib.contextmanager
def netns(prefix: str = "magwt") -> Iterator[str]:
    """Create a uniquely named namespace with ``lo`` up; delete it afterwards, also on failure."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        run(name, "ip", "link", "set", "lo", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=30)
