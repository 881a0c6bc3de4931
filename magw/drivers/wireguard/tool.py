"""The ``wg`` tool, the one way magw configures and reads a WireGuard device, kernel or userspace alike.

``wg`` speaks both configuration protocols: generic netlink to the kernel module, and the UAPI socket
``/var/run/wireguard/<dev>.sock`` to wireguard-go. A userspace device's socket lives in a mount namespace of
its own (magw.drivers.wireguard.userspace), so its ``wg`` runs through ``nsenter`` into that namespace: the
``prefix``. Why the tool and not the protocols: docs/cables.md ("One driver").

``wg show DEV dump`` prints the private key on its first line; ``parse_dump`` drops it at once and keeps the
public key only, and nothing here logs the tool's output.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from ipaddress import IPv4Network

import attrs

from magw.desired.cable.values import WgChanges, WgObserved, WgObservedPeer

WG = "wg"
TIMEOUT = 5.0


class WgError(RuntimeError):
    """A ``wg`` command that failed; ``str()`` is one line with the tool's own reason."""


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _allowed(text: str) -> tuple[IPv4Network, ...]:
    if text in ("(none)", ""):
        return ()
    try:
        return tuple(IPv4Network(a) for a in text.split(",") if ":" not in a)  # IPv6 prefixes: not ours
    except ValueError:
        raise WgError(f"wg show dump: allowed ips {text[:60]!r} are not IPv4 prefixes") from None


def parse_dump(text: str) -> WgObserved:
    """``wg show DEV dump``: the interface line (private key, public key, port, fwmark), then one line per peer
    (public key, preshared key, endpoint, allowed IPs, latest handshake, rx, tx, keepalive)."""
    lines = [line.split("\t") for line in text.splitlines() if line]
    if not lines or len(lines[0]) < 3:
        raise WgError("wg show dump: no interface line")
    head = lines[0]
    public = None if head[1] == "(none)" else head[1]
    peers = []
    for fields in lines[1:]:
        if len(fields) < 7:
            raise WgError(f"wg show dump: a peer line of {len(fields)} fields, not 7 or 8")
        peers.append(
            WgObservedPeer(
                public_key=fields[0],
                endpoint=None if fields[2] == "(none)" else fields[2],
                allowed_ips=_allowed(fields[3]),
                latest_handshake=_int(fields[4]),
                rx_bytes=_int(fields[5]),
                tx_bytes=_int(fields[6]),
            )
        )
    return WgObserved(public_key=public, listen_port=_int(head[2]), peers=tuple(peers))


def set_args(device: str, changes: WgChanges, key_path: str) -> list[str]:
    """One ``wg set`` command line for ``changes`` (the private key by path, never by value)."""
    args = ["set", device]
    if changes.listen_port is not None:
        args += ["listen-port", str(changes.listen_port)]
    if changes.private_key:
        args += ["private-key", key_path]
    for peer in changes.upsert:
        allowed = ",".join(str(a) for a in peer.allowed_ips)
        args += ["peer", peer.public_key, "endpoint", f"{peer.endpoint}:{peer.port}", "allowed-ips", allowed]
    for key in changes.remove:
        args += ["peer", key, "remove"]
    return args


@attrs.frozen
class WgTool:
    """Runs ``wg`` (after ``prefix``, e.g. ``nsenter -t PID -m``) for one device."""

    device: str
    prefix: tuple[str, ...] = ()

    def run(self, args: Sequence[str]) -> str:
        argv = [*self.prefix, WG, *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        except FileNotFoundError as exc:
            raise WgError(f"{exc.filename}: not found (install wireguard-tools)") from None
        except subprocess.TimeoutExpired:
            raise WgError(f"wg {args[0]} {self.device}: no answer in {TIMEOUT:g} s") from None
        if done.returncode != 0:
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            raise WgError(f"wg {args[0]} {self.device}: {reason}")
        return done.stdout

    def show(self) -> WgObserved:
        return parse_dump(self.run(["show", self.device, "dump"]))

    def apply(self, changes: WgChanges, key_path: str) -> None:
        if not changes.empty:
            self.run(set_args(self.device, changes, key_path))
