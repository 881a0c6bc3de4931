"""The CNI found on a node, and stale state from an earlier install (verdicts only).

CNI: recognised by its devices and sockets (``cni0``: a generic bridge CNI such as the lab's; ``br-int`` or
``genev_sys_*`` or an ``ovn-controller`` control socket: OVN-Kubernetes; ``flannel.1``, ``vxlan.calico``/``cali*``,
``cilium_host``). Stale: gateway-only objects on a node that is not a gateway (``vxlan-tunnel``, the
``magw_health`` table, routes in table 100), magw routes through a device that no longer exists, and (in a lab)
namespaces of the lab that no node of its plan owns.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from magw.model.vtep import VXLAN_TUNNEL
from magw.ops.diagnose.verdict import Check, passed, warned

TOPIC = "cni"
STALE = "stale"

Sign = Callable[[set[str], set[str]], bool]
_SIGNS: tuple[tuple[str, Sign], ...] = (
    ("ovn-kubernetes", lambda links, socks: "br-int" in links or any(n.startswith("genev_sys") for n in links)
     or any("ovn-controller" in s for s in socks)),
    ("flannel", lambda links, socks: "flannel.1" in links),
    ("calico", lambda links, socks: "vxlan.calico" in links or any(n.startswith("cali") for n in links)),
    ("cilium", lambda links, socks: "cilium_host" in links),
    ("generic bridge", lambda links, socks: "cni0" in links),
)


def detect_cni(links: set[str], sockets: set[str]) -> list[str]:
    return [name for name, sign in _SIGNS if sign(links, sockets)]


def cni_checks(links: set[str], sockets: set[str]) -> list[Check]:
    found = detect_cni(links, sockets)
    if not found:
        return [warned(TOPIC, "cni", "no known CNI device (cni0, br-int, flannel.1, vxlan.calico, cilium_host)",
                       "check --netns names a node's namespace; magw supports generic and ovn-kubernetes")]
    names = ", ".join(found)
    if "ovn-kubernetes" in found:
        return [passed(TOPIC, "cni", f"{names}: magw's OVN syncer must run for this cluster (magw ovn sync)")]
    return [passed(TOPIC, "cni", names)]


@attrs.frozen(kw_only=True)
class StaleReadings:
    gateway: bool | None  # None: role unknown
    links: set[str]
    nft_tables: set[str]
    gateway_routes: int  # magw routes in table 100
    dangling_devices: set[str]  # devices our routes/nexthops name that do not exist
    foreign_namespaces: tuple[str, ...] = ()  # lab namespaces no node of the plan owns


def stale_checks(r: StaleReadings, prefix: str, netns: str | None) -> list[Check]:
    out = []
    where = f" --netns {netns}" if netns else ""
    if r.gateway is False:
        left = sorted(({VXLAN_TUNNEL} & r.links) | ({"magw_health"} & r.nft_tables))
        if r.gateway_routes:
            left.append(f"{r.gateway_routes} routes in table 100")
        if left:
            out.append(warned(STALE, "gateway objects", f"not a gateway, yet: {', '.join(left)}",
                              f"magw cleanup{where}, then restart the route agent"))
    for dev in sorted(r.dangling_devices):
        out.append(warned(STALE, f"device {dev}", "magw routes name it but it does not exist",
                          f"magw cleanup{where}, then restart the route agent"))
    for ns in r.foreign_namespaces:
        out.append(warned(STALE, f"namespace {ns}", "a namespace of this lab that no node of its plan owns",
                          f"ip netns del {ns}"))
    if not out:
        role = {True: "gateway", False: "worker", None: "role unknown"}[r.gateway]
        out.append(passed(STALE, "leftovers", f"no stale magw objects ({role})"))
    return out
