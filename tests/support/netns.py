"""Throwaway network namespaces for kernel tests (never the host's own)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import attrs


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


class NsFactory:
    """Makes uniquely named namespaces in one test: ``name = ns_factory()`` or ``ns_factory("magwt-gw")`` (the
    prefix); ``close`` removes every one it made (the conftest's ``ns_factory`` fixture calls it, also on failure)."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self.made: list[str] = []

    def __call__(self, prefix: str = "magwt") -> str:
        name = self._stack.enter_context(netns(prefix))
        self.made.append(name)
        return name

    def close(self) -> None:
        self._stack.close()


@attrs.frozen
class VethPair:
    """Namespaces ``a`` and ``b`` joined by a veth: ``a_dev`` in ``a``, ``b_dev`` in ``b``, both up, no addresses."""

    a: str
    b: str
    a_dev: str = "v0"
    b_dev: str = "v1"


def veth_between(a: str, b: str, a_dev: str = "v0", b_dev: str = "v1") -> VethPair:
    """Join namespaces ``a`` and ``b`` by a veth (``a_dev`` in ``a``, ``b_dev`` in ``b``) and set both ends up."""
    run(a, "ip", "link", "add", a_dev, "type", "veth", "peer", "name", b_dev, "netns", b)
    run(a, "ip", "link", "set", a_dev, "up")
    run(b, "ip", "link", "set", b_dev, "up")
    return VethPair(a, b, a_dev, b_dev)
