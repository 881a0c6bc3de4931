"""The kernel's WireGuard (the ``wireguard`` module): ``ip link add DEV type wireguard``, configured by ``wg``
over generic netlink in the namespace the driver runs in (no socket files: nothing is shared between
namespaces). These machines lack the module; tests of this backend skip there and say so."""

from __future__ import annotations

import os
import subprocess

from magw.drivers.wireguard.tool import WgError, WgTool
from magw.drivers.wireguard.userspace import link_exists

TIMEOUT = 5.0


def link_kind(name: str) -> str | None:
    """The device's link kind (``wireguard``, ``tun``, ...) in this namespace; None without the device."""
    from pyroute2.iproute import IPRoute

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=name)
        if not index:
            return None
        (link,) = ipr.get_links(index[0])
    info = link.get_attr("IFLA_LINKINFO")
    kind = info.get_attr("IFLA_INFO_KIND") if info is not None else None
    return str(kind) if kind is not None else None


class KernelDevice:
    backend = "kernel"

    def __init__(self, device: str) -> None:
        self.device = device

    def present(self) -> bool:
        if not link_exists(self.device):
            return False
        kind = link_kind(self.device)
        if kind != "wireguard":
            raise WgError(
                f"{self.device}: exists here as a {kind or 'device of unknown kind'}, not a kernel WireGuard "
                "device; refusing to configure a device we did not create"
            )
        return True

    def create(self) -> None:
        done = subprocess.run(
            ["ip", "link", "add", self.device, "type", "wireguard"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise WgError(f"ip link add {self.device} type wireguard: {done.stderr.strip() or 'failed'}")

    def tool(self) -> WgTool:
        return WgTool(self.device)

    def stop(self) -> None:
        if link_exists(self.device) and link_kind(self.device) == "wireguard":
            subprocess.run(["ip", "link", "del", self.device], capture_output=True, timeout=TIMEOUT, check=False)


def kernel_available() -> bool:
    """True when this kernel can make a WireGuard device: the module is loaded or loads on demand. Asked by
    making a throwaway device (a uniquely named one, deleted at once) in the current namespace."""
    probe = f"magw-wgp{os.getpid() % 100000}"
    done = subprocess.run(
        ["ip", "link", "add", probe, "type", "wireguard"], capture_output=True, timeout=TIMEOUT, check=False
    )
    if done.returncode != 0:
        return False
    subprocess.run(["ip", "link", "del", probe], capture_output=True, timeout=TIMEOUT, check=False)
    return True
