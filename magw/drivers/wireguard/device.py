"""``WireGuardDriver``: keeps one WireGuard device as planned (magw.desired.cable), kernel or userspace.

``ensure(plan)`` is level-driven and idempotent: the device (made if missing: the kernel's where the module
exists, else wireguard-go), its MTU, its one address and up state (netlink), then ``wg show`` against the plan
(magw.reconcile.cable) and one ``wg set`` for the difference, the private key by path. ``ensure(None)`` removes
a device of ours. Every refusal and failure is a ``WgError`` of one line.
"""

from __future__ import annotations

import time
from ipaddress import IPv4Interface
from pathlib import Path
from typing import Protocol

import attrs
import structlog

from magw.desired.cable.values import WgChanges, WgDevice, WgObserved
from magw.drivers.wireguard import keys
from magw.drivers.wireguard.kernel import KernelDevice, kernel_available, link_kind
from magw.drivers.wireguard.tool import WgError, WgTool
from magw.drivers.wireguard.userspace import UserspaceDevice, link_exists
from magw.model.cable import WG_DEVICE
from magw.reconcile.cable import diff_wireguard

log = structlog.get_logger(__name__)

BACKENDS = ("auto", "kernel", "userspace")


class Backend(Protocol):
    backend: str

    def present(self) -> bool: ...

    def create(self) -> None: ...

    def tool(self) -> WgTool: ...

    def stop(self) -> None: ...


@attrs.frozen
class EnsureResult:
    """What ``ensure`` did: the changes in words (no key material but public keys) and the public key in use."""

    changes: tuple[str, ...]
    public_key: str | None
    backend: str | None


def _link_settings(name: str, mtu: int, address: IPv4Interface) -> list[str]:
    """MTU, the one address and up state of ``name``; what it changed."""
    from pyroute2.iproute import IPRoute

    changed = []
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=name)
        if not found:
            raise WgError(f"{name}: the device vanished while it was being set up")
        index = found[0]
        (link,) = ipr.get_links(index)
        have = {
            IPv4Interface(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}") for a in ipr.get_addr(index=index, family=2)
        }
        for extra in have - {address}:
            ipr.addr("del", index=index, address=str(extra.ip), prefixlen=extra.network.prefixlen)
            changed.append(f"address {extra} removed")
        if address not in have:
            ipr.addr("add", index=index, address=str(address.ip), prefixlen=address.network.prefixlen)
            changed.append(f"address {address}")
        if link.get_attr("IFLA_MTU") != mtu:
            ipr.link("set", index=index, mtu=mtu)
            changed.append(f"mtu {mtu}")
        if not link["flags"] & 1:  # IFF_UP
            ipr.link("set", index=index, state="up")
            changed.append("up")
    return changed


class WireGuardDriver:
    """One WireGuard device in the current network namespace, with its key in ``state_dir``."""

    def __init__(self, state_dir: str | Path, *, backend: str = "auto", device: str = WG_DEVICE) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
        self.state_dir = Path(state_dir)
        self.device = device
        self.requested = backend
        self._userspace = UserspaceDevice(device, self.state_dir / keys.KEY_DIR)
        self._kernel = KernelDevice(device)
        self._backend: Backend | None = None
        self._public: tuple[keys.KeyFile, str] | None = None  # the key file read and its public key
        # Per peer's public key, the endpoint ("IP:PORT") we set or found as planned: a peer that roamed away from
        # it is left where WireGuard followed it (magw.reconcile.cable.diff_wireguard).
        self._placed: dict[str, str] = {}
        self._roamed_logged: list[str] = []

    def _present(self) -> Backend | None:
        """The backend holding our device now, if any, chosen by the device's kind (refusing one we did not make):
        asking wireguard-go first would refuse a kernel device as one no wireguard-go of ours serves."""
        if not link_exists(self.device):
            self._userspace.present()  # forgets a wireguard-go that exited with its device
            return None
        kind = link_kind(self.device)
        if kind == "wireguard" and self.requested in ("auto", "kernel"):
            return self._kernel
        if kind == "tun" and self.requested in ("auto", "userspace") and self._userspace.present():
            return self._userspace  # present() refuses a tun device no wireguard-go of ours serves
        raise WgError(
            f"{self.device}: exists here as a {kind or 'device of unknown kind'} device that the {self.requested} "
            "backend did not make; refusing to configure a device we did not create"
        )

    def _create(self) -> Backend:
        if self.requested == "kernel" or (self.requested == "auto" and kernel_available()):
            self._kernel.create()
            chosen: Backend = self._kernel
        else:
            self._userspace.create()
            chosen = self._userspace
        log.info("wireguard.device_created", device=self.device, backend=chosen.backend)
        return chosen

    def key(self) -> tuple[keys.KeyFile, str]:
        """The key file and its public key (derived again only when the file changed: a rotation)."""
        current, made = keys.ensure_private_key(self.state_dir)
        if made:
            log.info("wireguard.key_created", path=str(current.path))
        if self._public is None or self._public[0] != current:
            self._public = (current, keys.public_key(current))
        return self._public

    def ensure(self, plan: WgDevice | None) -> EnsureResult:
        """Make the device hold ``plan`` (None: remove ours). Raises WgError or keys.KeyFileError (one line)."""
        if plan is None:
            backend = self._present()
            if backend is None:
                return EnsureResult((), None, None)
            backend.stop()
            self._backend = None
            log.info("wireguard.device_removed", device=self.device, backend=backend.backend)
            return EnsureResult(("device removed",), None, backend.backend)
        if plan.name != self.device:
            raise WgError(f"plan names device {plan.name!r}, this driver keeps {self.device!r}")
        key_file, public = self.key()
        changes: list[str] = []
        backend = self._present()
        if backend is None:
            backend = self._create()
            changes.append(f"device created ({backend.backend})")
        self._backend = backend
        changes += _link_settings(self.device, plan.mtu, plan.address)
        tool = backend.tool()
        observed = tool.show()
        diff = diff_wireguard(plan, observed, public, placed=self._placed, now=time.time())
        tool.apply(diff, str(key_file.path))
        self._remember(plan, observed, diff)
        if diff.private_key:
            changes.append(f"private key of public key {public}")
        if diff.listen_port is not None:
            changes.append(f"listen-port {diff.listen_port}")
        changes += [f"peer {p.owner} {p.public_key} at {p.endpoint}:{p.port}" for p in diff.upsert]
        changes += [f"peer {k} removed" for k in diff.remove]
        if changes:
            log.info("wireguard.ensured", device=self.device, backend=backend.backend, changes=changes)
        return EnsureResult(tuple(changes), public, backend.backend)

    def _remember(self, plan: WgDevice, observed: WgObserved, diff: WgChanges) -> None:
        """After a ``wg set`` that succeeded: each peer's planned endpoint, when we set it, found it in place, or
        had set it before it roamed; a roamed peer left alone is logged once per change."""
        at = {p.public_key: p.endpoint for p in observed.peers}
        upserted = {p.public_key for p in diff.upsert}
        placed: dict[str, str] = {}
        roamed: list[str] = []
        for peer in plan.peers:
            key, want = peer.public_key, f"{peer.endpoint}:{peer.port}"
            if key in upserted or at.get(key) == want or self._placed.get(key) == want:
                placed[key] = want
            if key not in upserted and at.get(key) not in (None, want):
                roamed.append(f"{peer.owner} at {at[key]} (planned {want})")
        self._placed = placed
        if roamed and roamed != self._roamed_logged:
            log.info("wireguard.roamed_kept", device=self.device, peers=roamed)
        self._roamed_logged = roamed

    def observe(self) -> WgObserved | None:
        """The device's peers and handshakes as ``wg show`` reports them (None without our device)."""
        backend = self._present()
        return None if backend is None else backend.tool().show()

    def stop(self) -> None:
        """Remove our device (the route agent does not call this on exit: a restart must move no flow)."""
        self.ensure(None)
