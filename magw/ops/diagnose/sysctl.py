"""The sysctls magw relies on, read in the node's namespace (verdicts only; nothing is ever written).

- ``net.ipv4.fib_multipath_hash_policy`` must be 1 (L4): with 0 every flow between two hosts takes one gateway.
- ``net.ipv4.ip_forward`` must be 1 on a gateway or any node routing pod traffic.
- ``rp_filter`` on magw's devices: the kernel uses max(all, device); strict (1) drops replies that come back
  through another gateway than the one the forward path used (multi-active is asymmetric). 2 (loose) or 0 pass.
"""

from __future__ import annotations

import attrs

from magw.ops.diagnose.verdict import Check, failed, passed, warned

TOPIC = "sysctl"
HASH_POLICY = "net.ipv4.fib_multipath_hash_policy"
IP_FORWARD = "net.ipv4.ip_forward"


@attrs.frozen(kw_only=True)
class SysctlReadings:
    """Values as read (None: unreadable). ``rp_filter`` maps a device (and ``all``) to its value."""

    hash_policy: int | None
    ip_forward: int | None
    rp_filter: dict[str, int | None]
    netns_flag: str  # how to name the namespace in a fix: "ip netns exec NS " or ""


def sysctl_checks(r: SysctlReadings) -> list[Check]:
    out: list[Check] = []
    pre = r.netns_flag
    if r.hash_policy in (1, 3):
        out.append(passed(TOPIC, HASH_POLICY, f"{r.hash_policy} (per-flow, L4)"))
    elif r.hash_policy is None:
        out.append(warned(TOPIC, HASH_POLICY, "unreadable", f"{pre}sysctl {HASH_POLICY}"))
    else:
        out.append(failed(TOPIC, HASH_POLICY, f"{r.hash_policy}: multipath hashes on L3 only, every flow between "
                          "two hosts takes the same gateway", f"{pre}sysctl -w {HASH_POLICY}=1 (the route agent "
                          "sets it when it starts)"))
    if r.ip_forward == 1:
        out.append(passed(TOPIC, IP_FORWARD, "1"))
    else:
        seen = "unreadable" if r.ip_forward is None else str(r.ip_forward)
        out.append(failed(TOPIC, IP_FORWARD, f"{seen}: the node does not forward pod traffic",
                          f"{pre}sysctl -w {IP_FORWARD}=1"))
    everywhere = r.rp_filter.get("all")
    for dev, value in sorted(r.rp_filter.items()):
        if dev == "all":
            continue
        name = f"rp_filter {dev}"
        if value is None:
            out.append(warned(TOPIC, name, "unreadable", f"{pre}sysctl net.ipv4.conf.{dev}.rp_filter"))
            continue
        effective = max(value, everywhere or 0)
        if effective == 1:
            which = f"net.ipv4.conf.{dev}.rp_filter" if value == 1 else "net.ipv4.conf.all.rp_filter"
            out.append(failed(TOPIC, name, f"strict (device {value}, all {everywhere}): replies through another "
                              "gateway than the forward path are dropped", f"{pre}sysctl -w {which}=2"))
        else:
            out.append(passed(TOPIC, name, f"{effective} (device {value}, all {everywhere})"))
    if len(r.rp_filter) <= 1:
        out.append(warned(TOPIC, "rp_filter", "no magw device in this namespace (vxlan-tunnel, vx-submariner)",
                          "start the route agent (magw-route-agent) or check --netns names the node"))
    return out
