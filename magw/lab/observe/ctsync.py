"""How far conntrackd has synced a lab's flows: the backups' external caches, read with ``conntrackd -e``.

A failover test or benchmark fails a VIP's holder only once every other candidate's conntrackd holds the flows
it started (ESTABLISHED in the external cache): failing it after a fixed time measured the machine's load as
much as the failover (at a load of 5-8 on 2 vCPUs, 1.5 s was sometimes not enough). Each candidate's
conntrackd runs in its node's namespace with its configuration in ``<lab dir>/egress/<node>/conntrackd/``.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from magw.lab.spec import naming


def egressgw_nodes(lab_name: str) -> list[Path]:
    """The directories of the lab's nodes that run a conntrackd, in name order."""
    root = naming.state_dir(lab_name) / "egress"
    return [d for d in sorted(root.iterdir()) if (d / "conntrackd").is_dir()] if root.is_dir() else []


def external_established(lab_name: str, node_dir: Path, targets: tuple[str, ...]) -> int:
    """ESTABLISHED TCP flows to one of ``targets`` (``IP:PORT``, the original destination) in the external cache of
    that node's conntrackd (``conntrackd -e`` prints the original tuple: ``dst=IP sport=P dport=PORT``)."""
    conf = node_dir / "conntrackd" / "conntrackd.conf"
    done = subprocess.run(
        ["ip", "netns", "exec", f"{lab_name}-{node_dir.name}", "conntrackd", "-C", str(conf), "-e"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    return count_established(done.stdout, targets)


def count_established(cache: str, targets: tuple[str, ...]) -> int:
    """The ESTABLISHED TCP lines of a ``conntrackd -e`` listing whose original destination is one of ``targets``."""
    wanted = {tuple(t.rsplit(":", 1)) for t in targets}
    count = 0
    for line in cache.splitlines():
        words = line.split()
        if words[:1] != ["tcp"] or "ESTABLISHED" not in words:
            continue
        fields: dict[str, str] = {}
        for word in words:
            key, eq, value = word.partition("=")
            if eq:
                fields.setdefault(key, value)  # the first dst= and dport= are the original direction's
        count += (fields.get("dst"), fields.get("dport")) in wanted
    return count


class NotSynced(RuntimeError):
    """The backups did not hold the flows in time (the message says what each held)."""


def wait_synced(
    lab_name: str, holder: str, targets: tuple[str, ...], want: int, *, started: float, least: float, limit: float
) -> dict[str, int]:
    """Until every candidate but ``holder`` holds ``want`` flows to ``targets``, and at least ``least`` s after
    ``started`` (a monotonic time); what each held. Raises NotSynced ``limit`` s after ``started``."""
    backups = [d for d in egressgw_nodes(lab_name) if d.name != holder]
    if not backups:
        raise NotSynced(f"lab {lab_name}: no conntrackd on a node other than {holder}")
    while True:
        held = {d.name: external_established(lab_name, d, targets) for d in backups}
        waited = time.monotonic() - started
        if waited >= least and all(n >= want for n in held.values()):
            return held
        if waited >= limit:
            raise NotSynced(f"conntrackd had synced {held} of {want} flows to the backups in {limit:g} s")
        time.sleep(0.1)
