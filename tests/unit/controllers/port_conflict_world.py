"""A broker directory where two Services of namespace blog use port 8080 (web and feed) and api uses 9000:
binding the namespace to one VIP puts web and feed on the same port of it. Shared by the port-conflict tests of
the operations, the controller, its HTTP API and ``magw egress``."""

from __future__ import annotations

from pathlib import Path

BASE = """\
kind: Cluster
id: east
pod_cidrs: [10.1.0.0/16]
service_cidrs: [100.1.0.0/16]
---
{kind: Node, cluster: east, name: n1, ip: 172.18.0.2, cni_ip: 10.1.1.1}
---
{kind: Node, cluster: east, name: n2, ip: 172.18.0.3, cni_ip: 10.1.2.1}
---
{kind: EgressConfig, cluster: east, vipRanges: [192.0.2.0/24], advertInt: 0.1}
---
{kind: Namespace, cluster: east, name: blog}
---
{kind: Namespace, cluster: east, name: shop}
---
{kind: Service, cluster: east, namespace: blog, name: web, selector: {app: web}, ports: [{port: 8080}]}
---
{kind: Service, cluster: east, namespace: blog, name: feed, selector: {app: feed}, ports: [{port: 8080}]}
---
{kind: Service, cluster: east, namespace: blog, name: api, selector: {app: api}, ports: [{port: 9000}]}
---
{kind: Service, cluster: east, namespace: shop, name: cart, selector: {app: cart}, ports: [{port: 8080}]}
"""

# What the controller's status and ``egress show`` say of a VIP that namespace blog shares.
CLASH = "8080/tcp of blog/web is already blog/feed's; ignored"


def vip_text(name: str, last: int, bindings: str = "[]") -> str:
    return (
        f"kind: EgressVIP\ncluster: east\nname: {name}\nvip: 192.0.2.{last}\nvrid: {last}\n"
        f"candidates: [n1, n2]\nbindings: {bindings}\n"
    )


def make_broker(directory: Path, *, a_bindings: str = "[]") -> Path:
    """BASE, VIP ``a`` (192.0.2.10) with ``a_bindings`` and a free VIP ``b`` (192.0.2.11)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "base.yaml").write_text(BASE)
    (directory / "vip-a.yaml").write_text(vip_text("a", 10, a_bindings))
    (directory / "vip-b.yaml").write_text(vip_text("b", 11))
    return directory


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
