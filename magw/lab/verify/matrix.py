"""The connectivity matrix: every pod to a pod and to a service of every other cluster, over TCP and UDP."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from magw.lab.spec.layout import ECHO_PORT, ClusterLayout, LabLayout, PodLayout
from magw.lab.verify.connectivity import TrafficTarget, probe_many


@attrs.frozen(kw_only=True)
class Cell:
    """One probe of the matrix: a client pod, a target (a remote pod or service) and a protocol."""

    client: PodLayout
    kind: str  # "pod" or "service"
    target_name: str
    target: TrafficTarget
    ok: bool
    seen_ip: str | None
    server: str | None
    error: str | None
    # The lab keeps a remote client's address to a service's backend (Config.keep_client_ip, docs/client-ip.md):
    # then a service target must see it too.
    client_ip_kept_to_services: bool = False

    @property
    def source_kept(self) -> bool:
        """True when the server saw the client pod's own IP."""
        return self.seen_ip == str(self.client.ip)

    @property
    def passed(self) -> bool:
        """A pod target must answer and see the client's own IP; a service target must answer, and see the
        client's own IP too when the lab keeps it."""
        if self.kind == "service" and not self.client_ip_kept_to_services:
            return self.ok
        return self.ok and self.source_kept


def _targets(client_index: int, remote: ClusterLayout) -> list[tuple[str, str, TrafficTarget]]:
    """A remote pod (rotating with the client, so every remote node is hit) and the first remote service."""
    out = []
    pod = remote.pods[client_index % len(remote.pods)]
    for proto in ("tcp", "udp"):
        out.append(("pod", pod.name, TrafficTarget(proto=proto, ip=pod.ip, port=ECHO_PORT)))
    for svc in remote.services[:1]:
        if svc.backends:
            for proto in ("tcp", "udp"):
                out.append(("service", f"{remote.id}/{svc.name}", TrafficTarget(proto=proto, ip=svc.ip, port=svc.port)))
    return out


def run_matrix(
    lab: LabLayout,
    *,
    clients: Sequence[PodLayout] | None = None,
    timeout: float = 2.0,
    client_ip: bool | None = None,
) -> list[Cell]:
    """Probe from ``clients`` (default: every pod) to every other cluster; one Cell per probe.

    ``client_ip``: whether services must see the client's own IP; None: the topology's ``keep_client_ip``
    (an OVN lab passes False: its gateway routers SNAT, docs/ovn.md)."""
    keep = lab.topology.keep_client_ip if client_ip is None else client_ip
    chosen = list(lab.pods if clients is None else clients)
    plan: dict[str, list[tuple[PodLayout, str, str, TrafficTarget]]] = {}
    for i, pod in enumerate(chosen):
        for remote in lab.clusters:
            if remote.id != pod.cluster:
                plan.setdefault(pod.namespace, []).extend((pod, k, n, t) for k, n, t in _targets(i, remote))
    results = probe_many({ns: [t for *_, t in items] for ns, items in plan.items()}, timeout=timeout)
    cells = []
    for ns, items in plan.items():
        for (pod, kind, name, _t), r in zip(items, results[ns], strict=True):
            cells.append(Cell(client=pod, kind=kind, target_name=name, target=r.target, ok=r.ok,
                              seen_ip=r.seen_ip, server=r.server, error=r.error,
                              client_ip_kept_to_services=keep))  # fmt: skip
    return cells


def matrix_text(cells: Sequence[Cell]) -> str:
    """One line per probe: client, target, protocol, OK/FAIL and what source IP the server saw."""
    lines = [f"{'client':<16} {'target':<16} {'proto':<5} {'result':<6} source seen by the server"]
    for c in cells:
        if not c.ok:
            src = c.error or ""
        elif c.source_kept:
            src = f"{c.seen_ip} (client's own IP)"
        elif c.kind == "service" and not c.client_ip_kept_to_services:
            src = f"{c.seen_ip} (SNAT by the serving cluster's gateway: keep_client_ip is off)"
        else:
            src = f"{c.seen_ip} (REWRITTEN)"
        verdict = "OK" if c.passed else "FAIL"
        lines.append(f"{c.client.name:<16} {c.target_name:<16} {c.target.proto:<5} {verdict:<6} {src}")
    passed = sum(1 for c in cells if c.passed)
    lines.append(f"{passed}/{len(cells)} OK")
    return "\n".join(lines)
