"""``python -m magw.lab.kubelet --lab NAME --cluster ID``: one kube lab cluster's kubelet, started by
``magw lab up --control-plane kube`` (``magw.lab.planes.kube.start_kubelets``) inside the cluster's underlay
namespace and stopped by ``down`` by its PID. It reads the lab's state file for the cluster's nodes, talks to the
cluster's emulator over its unix socket and writes the pods' logs where the emulator serves them from."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from magw.lab.build import state
from magw.lab.build.wiring import pod_mtu
from magw.lab.errors import LabError
from magw.lab.kubelet.agent import POLL, Kubelet
from magw.lab.planes.kube_http import KubeHttp
from magw.lab.spec import naming
from magw.lab.spec.layout import NodeLayout, layout
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def _nodes(lab: str, cluster: str) -> Mapping[str, NodeLayout]:
    try:
        st = state.require(lab)
    except state.UnknownLab as exc:
        raise LabError(str(exc)) from None
    found = [c for c in layout(lab, st.topology).clusters if c.id == cluster]
    if not found:
        raise LabError(f"lab {lab} has no cluster {cluster}")
    return {n.name: n for n in found[0].nodes}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m magw.lab.kubelet", description=__doc__)
    p.add_argument("--lab", required=True, help="the lab's name")
    p.add_argument("--cluster", required=True, help="the cluster id whose pods this kubelet runs")
    p.add_argument("--socket", required=True, help="the cluster's API server emulator (unix socket)")
    p.add_argument("--pod-logs", required=True, help="where containers' logs go (the emulator's --pod-logs)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    args = p.parse_args(argv)
    configure_logging("json", args.log_level)
    try:
        st = state.require(args.lab)
        lab = layout(args.lab, st.topology)
        kubelet = Kubelet(
            KubeHttp(args.socket, timeout=10.0),
            lab=args.lab,
            marker=naming.marker(args.lab, st.token),
            nodes=lambda: _nodes(args.lab, args.cluster),
            logs=Path(args.pod_logs),
            mtu=pod_mtu(lab, ovn=False),
            python=sys.executable,
            static_services=[(svc.namespace, svc.name) for c in lab.clusters if c.id == args.cluster
                             for svc in c.services],
        )
    except (LabError, state.UnknownLab) as exc:
        print(f"magw lab kubelet: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("kubelet.serving", lab=args.lab, cluster=args.cluster, nodes=sorted(kubelet.nodes))
    try:
        while not stop.is_set():
            try:
                kubelet.step()
            except LabError as exc:  # the emulator restarting (the soak's kill-apiserver): try again
                log.warning("kubelet.pass_failed", error=str(exc))
            stop.wait(POLL)
    finally:
        kubelet.shutdown()
        log.info("kubelet.stopped_all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
