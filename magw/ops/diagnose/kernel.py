"""Kernel features: nexthop objects, resilient groups, nft, and what the cable needs (verdicts only).

The cable needs the ``vxlan`` module (both cables carry VXLAN); WireGuard needs the ``wireguard`` module or
``wireguard-go`` (a userspace device). A module counts when it is loaded, built in, or installed for the
running kernel (``modprobe`` would load it).
"""

from __future__ import annotations

import attrs

from magw.ops.diagnose.verdict import Check, failed, passed, warned

TOPIC = "kernel"


@attrs.frozen(kw_only=True)
class KernelReadings:
    kernel: str
    nexthops: bool
    resilient: bool
    nft: str | None
    iproute2: str | None
    modules: dict[str, str | None]  # name -> "loaded" / "builtin" / "installed", None when absent
    wireguard_go: str | None  # its path on PATH, None when absent
    cable: str | None  # "vxlan" / "wireguard" when known (a lab, a running gateway), None: check both
    notes: tuple[str, ...] = ()


def _module(r: KernelReadings, name: str) -> str | None:
    return r.modules.get(name)


def kernel_checks(r: KernelReadings) -> list[Check]:
    out: list[Check] = []
    note = f" ({'; '.join(r.notes)})" if r.notes else ""
    if r.nexthops:
        out.append(passed(TOPIC, "nexthop objects", f"supported by kernel {r.kernel}"))
    else:
        out.append(warned(TOPIC, "nexthop objects", f"not supported by kernel {r.kernel}{note}: routes carry "
                          "their gateways inline, a failover rewrites every route",
                          "run a kernel >= 5.3 with CONFIG_IP_NEXTHOP (nexthop objects)"))
    if r.resilient:
        out.append(passed(TOPIC, "resilient groups", f"supported{note}"))
    else:
        out.append(warned(TOPIC, "resilient groups", "not supported: strategy 'resilient' falls back, a failover "
                          "may move flows that did not use the failed gateway",
                          "run a kernel >= 5.13 (resilient nexthop groups)"))
    if r.nft:
        out.append(passed(TOPIC, "nft", f"nftables {r.nft}"))
    else:
        out.append(failed(TOPIC, "nft", "the nft tool is not found (magw's tables cannot be applied)",
                          "apt-get install nftables"))
    if r.iproute2:
        out.append(passed(TOPIC, "iproute2", f"ip {r.iproute2}"))
    else:
        out.append(failed(TOPIC, "iproute2", "the ip tool is not found", "apt-get install iproute2"))
    vxlan = _module(r, "vxlan")
    if vxlan:
        out.append(passed(TOPIC, "cable: vxlan", f"vxlan module {vxlan}"))
    else:
        out.append(failed(TOPIC, "cable: vxlan", "no vxlan module: neither cable can be built",
                          "modprobe vxlan (or a kernel with CONFIG_VXLAN)"))
    if r.cable in (None, "wireguard"):
        out.append(_wireguard(r))
    return out


def _wireguard(r: KernelReadings) -> Check:
    name = "cable: wireguard"
    wg = _module(r, "wireguard")
    if wg:
        return passed(TOPIC, name, f"wireguard module {wg}")
    if r.wireguard_go:
        return passed(TOPIC, name, f"no wireguard module, wireguard-go at {r.wireguard_go} (userspace device)")
    detail = "neither the wireguard module nor wireguard-go"
    fix = "modprobe wireguard (kernel >= 5.6), or apt-get install wireguard-go"
    if r.cable == "wireguard":
        return failed(TOPIC, name, detail + ": the WireGuard cable cannot come up", fix)
    return warned(TOPIC, name, detail + ": only the vxlan cable is possible", fix)
