"""The egress gateway's world twice: as Kubernetes objects (for the emulator) and as the file broker's
documents, written out separately by hand so that a test can compare the two sources' snapshots."""

from __future__ import annotations

from typing import Any

import yaml

from magw.kubeemu import Emulator
from tests.support import kube_objects as ko
from tests.support.paths import DEPLOY

DEPLOY_CRDS = DEPLOY / "crds"
EGRESS_CRDS = ("submariner.io_egressvips.yaml", "submariner.io_egressconfigs.yaml")


def serve_egress_crds(emulator: Emulator) -> None:
    """Serve EgressVIP and EgressConfig from deploy/crds (the emulator does not build them in)."""
    for name in EGRESS_CRDS:
        emulator.add_crd(yaml.safe_load((DEPLOY_CRDS / name).read_text()))


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def pod(ns: str, name: str, app: str, ip: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
        "spec": {"nodeName": node},
        "status": {"podIP": ip, "phase": "Running"},
    }


def service(ns: str, name: str, cluster_ip: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterIP": cluster_ip, "selector": {"app": name}},
    }


def egress_config(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "submariner.io/v1alpha1",
        "kind": "EgressConfig",
        "metadata": {"name": name, "namespace": ko.NS},
        "spec": spec,
    }


def egress_vip(
    name: str, last: int, bindings: list[dict[str, str]], status: dict[str, Any] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "submariner.io/v1alpha1",
        "kind": "EgressVIP",
        "metadata": {"name": name, "namespace": ko.NS},
        "spec": {"vip": f"192.0.2.{last}", "vrid": last, "candidates": ["e-gw1", "e-gw2"], "bindings": bindings},
    }
    if status is not None:
        obj["status"] = status
    return obj


SINCE = "2025-01-01T00:00:00.000000Z"


def world() -> list[dict[str, Any]]:
    """Namespaces shop and blog; shop's web and db, blog's api; VIP a shared by shop, VIP b db's alone (it
    wins over a), VIP c bound to nothing; a's status says e-gw1 holds it."""
    return [
        namespace("shop"),
        namespace("blog"),
        pod("shop", "web-0", "web", "10.1.3.10", "e-w1"),
        pod("shop", "db-0", "db", "10.1.3.11", "e-w1"),
        pod("blog", "api-0", "api", "10.1.3.12", "e-w1"),
        service("shop", "web", "100.1.0.10"),
        service("shop", "db", "100.1.0.11"),
        service("blog", "api", "100.1.0.12"),
        egress_config(vipRanges=["192.0.2.0/24"], advertInt=0.1, conntrackSync=False),
        egress_vip("a", 10, [{"namespace": "shop"}], {"holder": "e-gw1", "since": SINCE, "services": ["shop/web"]}),
        egress_vip("b", 11, [{"namespace": "shop", "service": "db"}]),
        egress_vip("c", 12, []),
    ]


WORLD_DOCUMENTS = f"""\
{{kind: Namespace, cluster: east, name: shop}}
---
{{kind: Namespace, cluster: east, name: blog}}
---
{{kind: Pod, cluster: east, namespace: shop, name: web-0, ip: 10.1.3.10, labels: {{app: web}}, node: e-w1,
  phase: Running}}
---
{{kind: Pod, cluster: east, namespace: shop, name: db-0, ip: 10.1.3.11, labels: {{app: db}}, node: e-w1,
  phase: Running}}
---
{{kind: Pod, cluster: east, namespace: blog, name: api-0, ip: 10.1.3.12, labels: {{app: api}}, node: e-w1,
  phase: Running}}
---
{{kind: Service, cluster: east, namespace: shop, name: web, cluster_ip: 100.1.0.10, selector: {{app: web}}}}
---
{{kind: Service, cluster: east, namespace: shop, name: db, cluster_ip: 100.1.0.11, selector: {{app: db}}}}
---
{{kind: Service, cluster: east, namespace: blog, name: api, cluster_ip: 100.1.0.12, selector: {{app: api}}}}
---
{{kind: EgressConfig, cluster: east, vipRanges: [192.0.2.0/24], advertInt: 0.1, conntrackSync: false}}
---
{{kind: EgressVIP, cluster: east, name: a, vip: 192.0.2.10, vrid: 10, candidates: [e-gw1, e-gw2],
  bindings: [{{namespace: shop}}]}}
---
{{kind: EgressVIP, cluster: east, name: b, vip: 192.0.2.11, vrid: 11, candidates: [e-gw1, e-gw2],
  bindings: [{{namespace: shop, service: db}}]}}
---
{{kind: EgressVIP, cluster: east, name: c, vip: 192.0.2.12, vrid: 12, candidates: [e-gw1, e-gw2], bindings: []}}
---
{{kind: EgressVIPStatus, cluster: east, name: a, holder: e-gw1, since: '{SINCE}', services: [shop/web]}}
"""
