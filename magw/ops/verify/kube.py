"""``magw verify --kubeconfig A --kubeconfig B ...``: the connectivity suite through the clusters' API servers.

Nothing here enters a node: everything is a pod, created through the API, as an operator's own workload would be.

1. Each cluster: its id (the ``Submariner`` object's ``spec.clusterID`` in magw's namespace, else the kubeconfig's
   context) and, from its own ``Cluster`` object, its global CIDR when it runs Globalnet. Ids must differ.
2. Each cluster: an echo server pod (``python -m magw.lab.payload.traffic serve``, the lab's echo server, in the
   magw image) in ``--namespace`` (created if missing), labelled with the run's id. With Globalnet, a headless
   Service over it, exported (``ServiceExport``): Globalnet gives the pod a global IP (its ``GlobalIngressIP``
   ``pod-<name>``), which is what the other clusters reach.
3. Each ordered pair of clusters: a client pod in the first that sends one TCP request and one UDP datagram to
   the second's server (``traffic probe``) and exits; its log is one JSON line per protocol.
4. A check passes when the server answered and saw the client pod's own IP (with Globalnet: an address of the
   client cluster's global CIDR: its egress IP).
5. Every pod, Service and ServiceExport made is deleted, also on a failure or Ctrl-C; one left behind is named.

A failing check says what came back (a timeout, a refused connection, a wrong source, a pod that never ran),
not the hop where it died: that needs the nodes, which only ``--lab`` mode enters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, ip_address
from typing import Any

import attrs

from magw.ops.verify.kubeapi import KubeCallError
from magw.ops.verify.kubepods import Cluster, KubeRunError, Run, Settings, close_all, open_clusters, why_not_running
from magw.sources.kube.client import KubeConfigError

__all__ = ["KubeConfigError", "KubeRunError", "Settings", "report_json", "run", "table"]

ECHO_PORT = 8080
PROTOS = ("tcp", "udp")
TRAFFIC = ("python", "-m", "magw.lab.payload.traffic")
SERVING = '"traffic.serving"'  # the echo server's first log line, once it listens
LISTEN_LIMIT = 15.0


@attrs.frozen(kw_only=True)
class KubeCheck:
    client: str  # cluster/pod
    client_ip: str | None
    target: str  # cluster/pod
    address: str | None
    via: str
    proto: str
    ok: bool
    detail: str

    def as_json(self) -> dict[str, object]:
        return {"check": "pod", "client": self.client, "client_ip": self.client_ip, "target": self.target,
                "address": self.address, "via": self.via, "proto": self.proto, "ok": self.ok, "detail": self.detail,
                "hop": None}  # fmt: skip


@attrs.frozen(kw_only=True)
class KubeResult:
    clusters: tuple[str, ...]
    checks: tuple[KubeCheck, ...]
    left_behind: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks) and not self.left_behind


@attrs.define
class Server:
    name: str
    ip: IPv4Address | None = None  # what the others reach: the pod IP, or its global IP
    problem: str = ""


async def _server(r: Run, c: Cluster) -> Server:
    name = f"magw-verify-server-{r.id}"
    argv = [*TRAFFIC, "serve", "--name", f"{c.id}/{name}", "--port", str(ECHO_PORT), "--max-seconds", "3600"]
    await r.create_pod(c, name, "server", argv)
    if c.global_cidr is not None:
        await r.export(c, name, [(p, ECHO_PORT) for p in PROTOS])
    ip, problem = await r.address(c, name, await r.pod(c, name, terminal=False))
    if ip is not None and not await r.wait_log(c, name, SERVING, LISTEN_LIMIT):
        ip, problem = None, f"pod {name}: its echo server did not say it listens within {LISTEN_LIMIT:g} s"
    return Server(name=f"{c.id}/{name}", ip=ip, problem=problem)


async def _pair(r: Run, timeout: float, a: Cluster, b: Cluster, server: Server) -> list[KubeCheck]:
    via = "global IP" if b.global_cidr is not None else "pod IP"
    address = str(server.ip) if server.ip is not None else None
    name = f"magw-verify-{r.id}-to-{b.id}"[:63]
    client = f"{a.id}/{name}"

    def checks(verdicts: Sequence[tuple[bool, str]], client_ip: str | None = None) -> list[KubeCheck]:
        return [KubeCheck(client=client, client_ip=client_ip, target=server.name, address=address, via=via, proto=p,
                          ok=ok, detail=detail) for p, (ok, detail) in zip(PROTOS, verdicts, strict=True)]  # fmt: skip

    if server.ip is None:
        return checks([(False, server.problem or "the server has no address")] * len(PROTOS))
    targets = [arg for p in PROTOS for arg in ("--target", f"{p}:{server.ip}:{ECHO_PORT}")]
    await r.create_pod(a, name, "client", [*TRAFFIC, "probe", *targets, "--timeout", f"{timeout:g}"])
    pod = await r.pod(a, name, terminal=True)
    client_ip = (pod.get("status") or {}).get("podIP")
    state = why_not_running(pod)
    if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        return checks([(False, state)] * len(PROTOS), client_ip)
    lines = {}
    for line in (await r.log(a, name)).splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("target"), str):
            lines[doc["target"].split(":", 1)[0]] = doc
    return checks([verdict(lines.get(p), client_ip, a.global_cidr, state) for p in PROTOS], client_ip)


def verdict(doc: dict[str, Any] | None, client_ip: str | None, global_cidr: IPv4Network | None,
            pod_state: str) -> tuple[bool, str]:  # fmt: skip
    """Whether one probe line passed, and what to say of it."""
    if doc is None:
        return False, f"no result in the client's log ({pod_state})"
    if not doc.get("ok"):
        return False, str(doc.get("error") or "no answer")
    seen = str(doc.get("seen_ip"))
    if global_cidr is not None:
        try:
            inside = ip_address(seen) in global_cidr
        except ValueError:
            inside = False
        if not inside:
            return False, f"answered by {doc.get('server')}, saw source {seen}: not of the global CIDR {global_cidr}"
        return True, f"answered by {doc.get('server')}, saw the global source {seen}"
    if seen != client_ip:
        return False, f"answered by {doc.get('server')}, saw source {seen}, not the client pod's {client_ip}"
    return True, f"answered by {doc.get('server')}, saw the pod's own source {seen}"


async def _run(kubeconfigs: Sequence[str], s: Settings, timeout: float) -> KubeResult:
    clusters = await open_clusters(kubeconfigs, s)
    r = Run(s)
    checks: list[KubeCheck] = []
    try:
        try:
            for c in clusters:
                await r.namespace(c)
            servers = await asyncio.gather(*(_server(r, c) for c in clusters))
            pairs = [(a, b, srv) for a in clusters for b, srv in zip(clusters, servers, strict=True) if a is not b]
            for found in await asyncio.gather(*(_pair(r, timeout, a, b, srv) for a, b, srv in pairs)):
                checks += found
        finally:
            left = await asyncio.shield(r.cleanup())
    except KubeCallError as exc:
        raise KubeRunError(str(exc)) from None
    finally:
        await close_all(clusters)
    return KubeResult(clusters=tuple(c.id for c in clusters), checks=tuple(checks), left_behind=left)


def run(kubeconfigs: Sequence[str], settings: Settings, *, timeout: float = 2.0) -> KubeResult:
    """The suite over ``kubeconfigs`` (two or more clusters), ``timeout`` seconds per probe; ``KubeRunError``
    when it could not run."""
    return asyncio.run(_run(kubeconfigs, settings, timeout))


def report_json(result: KubeResult) -> dict[str, Any]:
    failing = [f"{c.client} -> {c.target} {c.proto} ({c.via} {c.address}): {c.detail}" for c in result.checks
               if not c.ok]  # fmt: skip
    failing += [f"left behind: {what}" for what in result.left_behind]
    return {"ok": result.ok, "mode": "kube", "clusters": list(result.clusters),
            "checks": [c.as_json() for c in result.checks], "failing": failing,
            "left_behind": list(result.left_behind)}  # fmt: skip


def table(result: KubeResult) -> str:
    rows = [("CLIENT", "TARGET", "VIA", "ADDRESS", "PROTO", "RESULT", "DETAIL")]
    for c in result.checks:
        rows.append((c.client, c.target, c.via, c.address or "-", c.proto, "ok" if c.ok else "FAIL", c.detail))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1] for r in rows]
    passed = sum(1 for c in result.checks if c.ok)
    lines.append(f"\n{passed}/{len(result.checks)} checks passed between {', '.join(result.clusters)}")
    lines += [f"left behind: {what}" for what in result.left_behind]
    return "\n".join(lines) + "\n"
