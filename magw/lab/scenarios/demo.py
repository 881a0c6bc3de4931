"""``magw lab demo``: bring a lab up, show the connectivity matrix and how flows spread over gateways, tear down."""

from __future__ import annotations

from collections.abc import Callable

from magw.lab.build import lifecycle as build
from magw.lab.observe.spread import run_spread, spread_text
from magw.lab.scenarios.cloud_demo import run_cloud_section
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import Topology
from magw.lab.verify.matrix import matrix_text, run_matrix
from magw.model.cable import Cable

Output = Callable[[str], None]


def run_demo(
    topology: Topology,
    *,
    name: str,
    keep: bool,
    out: Output,
    flows: int = 64,
    wait_timeout: float = 60.0,
    control_plane: str = "file",
    cni: str = "generic",
) -> int:
    """0 when every probe of the matrix passed, 1 otherwise. The lab is removed unless ``keep``.

    ``cni="ovn"``: the lab's pods talk through OVN (``magw.lab.planes.ovn_nodes``), and the spread is measured with
    TCP connections: OVN's ECMP in the userspace datapath does not hash UDP ports (``magw.lab.observe.spread``)."""
    lab = layout(name, topology)
    out(f"== bringing up lab {name}{_fed_by(control_plane)}{_cable(topology)}{_on(cni)}")
    st = build.up(
        topology,
        name=name,
        daemons=True,
        wait_timeout=wait_timeout,
        progress=out,
        control_plane=control_plane,
        cni=cni,
    )
    try:
        out("\n== connectivity matrix (each pod -> a remote pod and a remote service)")
        cells = run_matrix(lab, client_ip=topology.keep_client_ip and cni == "generic")
        out(matrix_text(cells))
        if len(lab.clusters) >= 2:
            proto = "tcp" if cni == "ovn" else "udp"
            out(f"\n== {flows} {proto.upper()} flows between {lab.clusters[0].id} and {lab.clusters[1].id}")
            out(spread_text(run_spread(lab, flows=flows, proto=proto)))
        ok = all(c.passed for c in cells)
        cloud_ok = topology.load_balancer is None or run_cloud_section(lab, st, out)
        what = "all OK" if ok and cloud_ok else "FAILURES in the matrix" if not ok else "the cloud was faster"
        out(f"\n== result: {what}")
        return 0 if ok and cloud_ok else 1
    finally:
        finish(name, keep=keep, out=out)


def _cable(topology: Topology) -> str:
    lb = " (gateways behind a cloud load balancer and NAT, docs/load-balancer.md)" if topology.load_balancer else ""
    if topology.cable is Cable.WIREGUARD:
        return f" (gateways' VXLAN through WireGuard: magw-wg on every gateway, docs/cables.md){lb}"
    return lb


def _on(cni: str) -> str:
    if cni == "ovn":
        return " (OVN-Kubernetes: pods on br-int, Open vSwitch and ovn-controller on every node, docs/ovn.md)"
    return ""


def _fed_by(control_plane: str) -> str:
    return " (daemons fed by Kubernetes API server emulators)" if control_plane == "kube" else ""


def finish(name: str, *, keep: bool, out: Output) -> None:
    """The end of a demo: keep the lab (and say how to remove it), or remove it and say what went."""
    if keep:
        out(f"\nlab {name} kept; remove it with: magw lab down --name {name}")
    else:
        out(f"\n== removing lab {name}")
        report = build.down(name)
        out(f"removed {len(report.namespaces)} namespaces and {len(report.processes)} processes")
