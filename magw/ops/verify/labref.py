"""A running lab as ``magw verify`` and ``magw benchmark`` see it: its state, its layout, and how one pod reaches
another (by pod IP, or with Globalnet by the global IP the controller allocated).

With Globalnet the clusters' pod CIDRs overlap, so a remote pod is reachable only by a global IP: the one of a
GlobalIngressIP for the pod (it backs an exported headless Service), and a remote Service only by its exported
ClusterIP's global IP. ``Addressing`` reads those from the same place the lab's own views do (the broker
directory, or the API server emulators of a ``--control-plane kube`` lab).
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Address

import attrs

from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.errors import LabInputError
from magw.lab.observe import globalview, kube_view
from magw.lab.observe.globalview import ClusterView
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout, PodLayout, ServiceLayout, layout


@attrs.frozen(kw_only=True)
class Lab:
    st: LabState
    layout: LabLayout

    @property
    def name(self) -> str:
        return self.st.name

    @property
    def globalnet(self) -> bool:
        return self.st.topology.globalnet

    def pod(self, name: str) -> PodLayout:
        for p in self.layout.pods:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.layout.pods)
        raise LabInputError(f"{name!r} is not a pod of lab {self.name} (pods: {known})")

    def first_pods(self) -> list[PodLayout]:
        """The first pod of every node, in cluster and node order (the default clients)."""
        return [pods[0] for c in self.layout.clusters for n in c.nodes if (pods := c.pods_of(n.name))]

    def workers_first(self, cluster: str) -> list[PodLayout]:
        """The cluster's pods, those on workers first (pod-to-pod), then those on gateways."""
        c = self.layout.cluster(cluster)
        gws = {n.name for n in c.gateways}
        return [p for p in c.pods if p.node not in gws] + [p for p in c.pods if p.node in gws]

    def on_gateway(self, cluster: str, index: int = 0) -> PodLayout | None:
        """The first pod of the cluster's ``index``-th gateway node."""
        gws = self.layout.cluster(cluster).gateways
        if index >= len(gws):
            return None
        pods = self.layout.cluster(cluster).pods_of(gws[index].name)
        return pods[0] if pods else None


def open_lab(name: str, *, verb: str) -> Lab:
    """Lab ``name``, which must be up with its daemons; anything else is one line of bad input."""
    naming.check_lab_name(name)
    st = state.require_with_daemons(name, verb, what=f": nothing to {verb}")
    if len(st.topology.clusters) < 2:
        raise LabInputError(f"{verb}: lab {name} has one cluster: nothing to reach across clusters")
    return Lab(st=st, layout=layout(st.name, st.topology))


@attrs.frozen(kw_only=True)
class Address:
    """Where a client sends to reach a target, and how that address was found."""

    ip: IPv4Address
    via: str  # "pod IP", "ClusterIP", "global IP (GlobalIngressIP)"


class Addressing:
    """Pod and Service addresses as seen from another cluster. Without Globalnet: the pod IP and the ClusterIP.
    With Globalnet: the global IPs, read once from the controllers' statuses."""

    def __init__(self, lab: Lab) -> None:
        self._lab = lab
        self._views: Mapping[str, ClusterView] = {}
        if lab.globalnet:
            gws = {c.id: tuple(g.name for g in c.gateways) for c in lab.layout.clusters}
            if lab.st.kube:
                self._views = kube_view.KubeViewReader(lab.layout, lab.st).read()
            else:
                self._views = globalview.Reader(lab.st.broker_dir, gws).read()

    def pod(self, pod: PodLayout) -> Address | None:
        """None: a Globalnet pod without a global IP (no exported headless Service selects it)."""
        if not self._lab.globalnet:
            return Address(ip=pod.ip, via="pod IP")
        view = self._views.get(pod.cluster)
        gip = view.pod_ip(pod.kube_namespace, pod.ip) if view is not None else None
        return None if gip is None else Address(ip=gip, via="global IP")

    def service(self, svc: ServiceLayout) -> Address | None:
        """None: headless, or a Globalnet Service without a global IP (not exported)."""
        if svc.cluster_ip is None:
            return None
        if not self._lab.globalnet:
            return Address(ip=svc.cluster_ip, via="ClusterIP")
        view = self._views.get(svc.cluster)
        gip = view.service_ip(svc.namespace, svc.name) if view is not None else None
        return None if gip is None else Address(ip=gip, via="global IP")

    def pod_target(self, pods: list[PodLayout]) -> tuple[PodLayout, Address] | None:
        """The first of ``pods`` that has an address from another cluster."""
        for p in pods:
            addr = self.pod(p)
            if addr is not None:
                return p, addr
        return None
