"""Pods made through the clusters' API servers, for ``magw verify --kubeconfig`` and ``magw benchmark
--kubeconfig``: each cluster's id and Globalnet CIDR, the pods (and, with Globalnet, the exported headless Service
that gives a server pod its global IP), waiting for them, their logs, and deleting everything made (``Run``).

A pod's command is one of the magw image's (``python -m magw...``, ``iperf3``); ``restartPolicy: Never``; it is
labelled ``app=magw-verify`` with its role and the run's id, so what a run left behind is easy to find."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator, Sequence
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import attrs
import yaml

from magw.ops.verify.kubeapi import Api, KubeCallError
from magw.sources.kube.mapping import GATEWAY_LABEL, SUBMARINER
from magw.sources.kube.resources import GROUP, MCS_GROUP, MCS_VERSION, SUBMARINER_VERSION, VERSION

POLL = 0.5
ECHO_PORT = 8080  # the server pods' (``traffic serve``)
APP_LABEL = "magw-verify"
TERMINAL = ("Succeeded", "Failed")


class KubeRunError(RuntimeError):
    """A suite or benchmark could not run (a cluster unreadable, ids not distinct); ``str()`` is one line."""


@attrs.frozen(kw_only=True)
class Settings:
    namespace: str = "magw-verify"  # the pods'
    magw_namespace: str = "submariner-operator"  # where the Submariner and Cluster objects are
    image: str = "magw:0.1.0"
    pod_timeout: float = 90.0  # for a pod to run, and for a Globalnet ingress IP to be given


@attrs.define
class Cluster:
    api: Api
    id: str = ""
    global_cidr: IPv4Network | None = None
    gateways: tuple[str, ...] = ()  # node names, labelled submariner.io/gateway=true
    workers: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Target:
    """One thing of a cluster the others reach: its server pod or the Service over it."""

    kind: str  # "pod" or "service"
    name: str  # cluster/name
    server: str  # the server's name in its answers
    via: str
    ip: IPv4Address | None = None
    problem: str = ""
    node: str = ""  # the server pod's


def _context(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return path
    return str(doc.get("current-context") or path) if isinstance(doc, dict) else path


async def identify(c: Cluster, s: Settings) -> None:
    """The cluster's id (its Submariner object's ``spec.clusterID``, else the kubeconfig's context), its global
    CIDR (its own Cluster object's ``global_cidr``) and its gateway and worker nodes."""
    subs = await c.api.json("GET", f"/apis/{GROUP}/{SUBMARINER_VERSION}/namespaces/{s.magw_namespace}/submariners")
    for item in subs.get("items") or ():
        if item.get("metadata", {}).get("name") == SUBMARINER and (item.get("spec") or {}).get("clusterID"):
            c.id = str(item["spec"]["clusterID"])
    c.id = c.id or _context(c.api.path)
    try:
        own = await c.api.json("GET", f"/apis/{GROUP}/{VERSION}/namespaces/{s.magw_namespace}/clusters/{c.id}")
        cidrs = (own.get("spec") or {}).get("global_cidr") or []
        c.global_cidr = IPv4Network(cidrs[0]) if cidrs else None
    except KubeCallError as exc:
        if exc.status != 404:
            raise
    nodes = (await c.api.json("GET", "/api/v1/nodes")).get("items") or []
    names = sorted((n["metadata"]["name"], (n["metadata"].get("labels") or {}).get(GATEWAY_LABEL) == "true")
                   for n in nodes)  # fmt: skip
    c.gateways = tuple(n for n, gw in names if gw)
    c.workers = tuple(n for n, gw in names if not gw)


async def open_clusters(kubeconfigs: Sequence[str], s: Settings) -> list[Cluster]:
    """Each kubeconfig's cluster, identified; the caller closes their ``api``s (also on a failure: see
    ``close_all``)."""
    clusters: list[Cluster] = []
    try:
        for path in kubeconfigs:
            clusters.append(Cluster(api=await Api.open(path)))
        for c in clusters:
            await identify(c, s)
    except BaseException:
        await close_all(clusters)
        raise
    ids = [c.id for c in clusters]
    if len(set(ids)) != len(ids):
        await close_all(clusters)
        raise KubeRunError(f"the kubeconfigs name the same cluster twice: {', '.join(ids)}")
    return clusters


async def close_all(clusters: Sequence[Cluster]) -> None:
    for c in clusters:
        await c.api.close()


def json_objects(log: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a pod's log, one per line, in order; other lines skipped."""
    for line in log.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


def why_not_running(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    why = status.get("message") or status.get("reason") or ""
    return f"pod {pod['metadata']['name']} is {phase}" + (f": {why}" if why else "")


class Run:
    """One run: a random id, what it created (deleted by ``cleanup``, newest first) and the paths of its objects."""

    def __init__(self, s: Settings) -> None:
        self.s = s
        self.id = secrets.token_hex(3)
        self.created: list[tuple[Cluster, str]] = []  # (cluster, object path)

    def path(self, kind: str, name: str = "") -> str:
        ns = self.s.namespace
        base = {
            "pods": f"/api/v1/namespaces/{ns}/pods",
            "services": f"/api/v1/namespaces/{ns}/services",
            "serviceexports": f"/apis/{MCS_GROUP}/{MCS_VERSION}/namespaces/{ns}/serviceexports",
            "globalingressips": f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/globalingressips",
        }[kind]
        return f"{base}/{name}" if name else base

    async def namespace(self, c: Cluster) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.s.namespace}}
        try:
            await c.api.json("POST", "/api/v1/namespaces", body)
        except KubeCallError as exc:
            if exc.status != 409:
                raise

    async def create(self, c: Cluster, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        created = await c.api.json("POST", self.path(kind), obj)
        self.created.append((c, self.path(kind, obj["metadata"]["name"])))
        return created

    async def create_pod(self, c: Cluster, name: str, role: str, argv: Sequence[str], node: str | None = None, *,
                         host_network: bool = False) -> None:  # fmt: skip
        """Pod ``name`` running ``argv`` (the magw image's), on ``node`` if given; ``host_network``: privileged, in
        the node's own network namespace, tolerating every taint (a node tool: ``nodetrace``)."""
        container: dict[str, Any] = {"name": role, "image": self.s.image, "command": list(argv)}
        spec: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]}
        if node is not None:
            spec["nodeName"] = node
        if host_network:
            spec |= {"hostNetwork": True, "tolerations": [{"operator": "Exists"}]}
            container["securityContext"] = {"privileged": True}
        labels = {"app": APP_LABEL, "role": role, "run": self.id}
        meta = {"name": name, "namespace": self.s.namespace, "labels": labels}
        await self.create(c, "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})

    async def service(
        self, c: Cluster, name: str, ports: Sequence[tuple[str, int]], *, headless: bool
    ) -> dict[str, Any]:
        """Service ``name`` over the run's server pod (by its labels): headless, or with a ClusterIP the API server
        gives; the object as created."""
        selector = {"app": APP_LABEL, "role": "server", "run": self.id}
        spec: dict[str, Any] = {"selector": selector, "ports": [{"name": f"{proto}-{port}", "port": port,
                                "protocol": proto.upper(), "targetPort": port} for proto, port in ports]}  # fmt: skip
        if headless:
            spec["clusterIP"] = "None"
        meta = {"name": name, "namespace": self.s.namespace}
        return await self.create(c, "services", {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})

    async def export(self, c: Cluster, name: str, ports: Sequence[tuple[str, int]], *, create_service: bool = True
                     ) -> None:  # fmt: skip
        """Export Service ``name`` (``ServiceExport``; first a headless one over the server pod, unless
        ``create_service`` is False): Globalnet gives its pod (headless) or itself a global IP (``global_ip``)."""
        if create_service:
            await self.service(c, name, ports, headless=True)
        export = {"apiVersion": f"{MCS_GROUP}/{MCS_VERSION}", "kind": "ServiceExport",
                  "metadata": {"name": name, "namespace": self.s.namespace}}  # fmt: skip
        await self.create(c, "serviceexports", export)

    async def pod(self, c: Cluster, name: str, *, terminal: bool, limit: float | None = None) -> dict[str, Any]:
        """Pod ``name`` once it runs with an IP (``terminal``: once it ended), or as it is at the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.s.pod_timeout if limit is None else limit)
        while True:
            pod = await c.api.json("GET", self.path("pods", name))
            status = pod.get("status") or {}
            phase = status.get("phase")
            if phase in TERMINAL or (not terminal and phase == "Running" and status.get("podIP")):
                return pod
            if loop.time() >= deadline:
                return pod
            await asyncio.sleep(POLL)

    async def log(self, c: Cluster, name: str) -> str:
        return (await c.api.call("GET", self.path("pods", name) + "/log")).decode("utf-8", "replace")

    async def wait_log(self, c: Cluster, name: str, needle: str, limit: float) -> bool:
        """Whether pod ``name``'s log shows ``needle`` within ``limit`` seconds (a server saying it listens)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while loop.time() < deadline:
            try:
                if needle in await self.log(c, name):
                    return True
            except KubeCallError as exc:
                if exc.status not in (400, 404):  # 400: the container has not started yet
                    raise
            await asyncio.sleep(0.2)
        return False

    async def global_ip(self, c: Cluster, name: str) -> IPv4Address | None:
        """The global IP Globalnet gave: GlobalIngressIP ``name`` (``pod-<pod>`` for an exported headless Service's
        pod, ``svc-<service>`` for an exported ClusterIP Service); None by the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.s.pod_timeout
        while loop.time() < deadline:
            try:
                gip = await c.api.json("GET", self.path("globalingressips", name))
                if ip := (gip.get("status") or {}).get("allocatedIP"):
                    return IPv4Address(ip)
            except KubeCallError as exc:
                if exc.status != 404:
                    raise
            await asyncio.sleep(POLL)
        return None

    async def address(self, c: Cluster, name: str, pod: dict[str, Any]) -> tuple[IPv4Address | None, str]:
        """What another cluster reaches running pod ``name`` by: its pod IP, or with Globalnet its global IP; and
        why there is none."""
        if (pod.get("status") or {}).get("phase") != "Running":
            return None, why_not_running(pod)
        if c.global_cidr is None:
            return IPv4Address(pod["status"]["podIP"]), ""
        ip = await self.global_ip(c, f"pod-{name}")
        if ip is None:
            return None, f"no global IP for pod {name} (GlobalIngressIP pod-{name}) within {self.s.pod_timeout:g} s"
        return ip, ""

    async def cleanup(self) -> tuple[str, ...]:
        """Delete everything made, newest first; what could not be deleted, one line each."""
        left = []
        for c, path in reversed(self.created):
            try:
                await c.api.call("DELETE", path)
            except KubeCallError as exc:
                if exc.status != 404:
                    left.append(f"{c.id}: {path} ({exc})")
        self.created.clear()
        return tuple(left)
