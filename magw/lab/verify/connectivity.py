"""Run ``magw.lab.payload.traffic`` clients inside pod namespaces and read their results.

A probe batch is one short-lived process per client pod (``ip netns exec POD
python -m magw.lab.payload.traffic probe ...``); batches for several pods run in
parallel threads. Everything is bounded by the per-target timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Address
from typing import Any

import attrs

from magw.lab.errors import LabError

PARALLEL = 8


@attrs.frozen(kw_only=True)
class TrafficTarget:
    proto: str  # "tcp" or "udp"
    ip: IPv4Address
    port: int

    def __str__(self) -> str:
        return f"{self.proto}:{self.ip}:{self.port}"


@attrs.frozen(kw_only=True)
class ConnectivityResult:
    target: TrafficTarget
    ok: bool
    seen_ip: str | None
    server: str | None
    error: str | None


def traffic_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "magw.lab.payload.traffic", *args]


def _run_in(namespace: str, argv: Sequence[str], timeout: float) -> str:
    try:
        proc = subprocess.run(
            ["ip", "netns", "exec", namespace, *argv], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise LabError(f"traffic in {namespace}: no result in {timeout:g}s") from None
    if proc.returncode not in (0, 1):
        err = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise LabError(f"traffic in {namespace}: {err[0]}")
    return proc.stdout


def probe(
    namespace: str, targets: Sequence[TrafficTarget], *, timeout: float = 2.0, attempts: int = 3
) -> list[ConnectivityResult]:
    """Probe every target from ``namespace`` (one process); results in target order."""
    if not targets:
        return []
    args = ["probe", "--timeout", f"{timeout:g}", "--attempts", str(attempts)]
    for t in targets:
        args += ["--target", str(t)]
    out = _run_in(namespace, traffic_argv(*args), timeout * len(targets) + 10)
    docs = [json.loads(line) for line in out.splitlines() if line.strip()]
    if len(docs) != len(targets):
        raise LabError(f"traffic in {namespace}: {len(docs)} results for {len(targets)} targets")
    return [
        ConnectivityResult(
            target=t, ok=bool(d["ok"]), seen_ip=d.get("seen_ip"), server=d.get("server"), error=d.get("error")
        )
        for t, d in zip(targets, docs, strict=True)
    ]


def probe_many(
    plan: Mapping[str, Sequence[TrafficTarget]], *, timeout: float = 2.0, attempts: int = 3
) -> dict[str, list[ConnectivityResult]]:
    """Probe from several namespaces at once: namespace -> its targets; results keyed the same way."""
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = {
            ns: pool.submit(probe, ns, targets, timeout=timeout, attempts=attempts) for ns, targets in plan.items()
        }
        return {ns: f.result() for ns, f in futures.items()}


def udp_flows(
    namespace: str, ip: IPv4Address, port: int, *, flows: int, packets: int, timeout: float = 5.0, proto: str = "udp"
) -> dict[str, Any]:
    """Send ``flows`` x ``packets`` UDP requests (``proto="tcp"``: over ``flows`` TCP connections) from
    ``namespace``; the traffic tool's JSON summary."""
    args = ["flows", "--target", f"{ip}:{port}", "--flows", str(flows), "--packets", str(packets), "--proto", proto]
    out = _run_in(namespace, traffic_argv(*args, "--timeout", f"{timeout:g}"), timeout + packets * 0.01 + 20)
    doc: dict[str, Any] = json.loads(out)
    return doc
