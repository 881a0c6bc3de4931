"""``br-submariner`` with its internal port ``ovn-k8s-sub0``, and OVN's ``localnet`` mapping to it.

On an OVN-Kubernetes node, OVN's ``submariner_gateway`` switch has a localnet port whose ``network_name`` is
``submariner_gateway``; ovn-controller bridges it to the OVS bridge that ``external_ids:ovn-bridge-mappings`` of
the ``Open_vSwitch`` row names for that network. That bridge is ``br-submariner``, and its internal port
``ovn-k8s-sub0`` is the host's end (169.254.254.10, planned by magw.desired.ovn.node).

Ownership (docs/ovn-node.md): the bridge, port and interface we create carry ``external_ids:magw-owner=magw``.
A ``br-submariner`` or ``ovn-k8s-sub0`` without that mark is foreign: ``ensure`` refuses to touch it (fail
closed) and ``cleanup`` leaves it. The mapping is merged into ``ovn-bridge-mappings`` (other networks' entries
stay); a ``submariner_gateway`` entry naming another bridge is never overwritten. The entry we added is
recorded in ``external_ids:magw-bridge-mapping``, so ``cleanup`` removes exactly that entry.

Why ``ovs-vsctl`` and not ovsdbapp's Open_vSwitch API: it ships with Open vSwitch (the node has it wherever it
has ovs-vswitchd), every call is one OVSDB transaction, it waits until ovs-vswitchd has applied the change (so
the tap device exists when ``ensure`` returns), and the route agent keeps no IDL connection, thread or schema
copy for a handful of rows it touches once per sync. Known gap: the mapping is read, merged and written in two
calls; a foreign writer changing ``ovn-bridge-mappings`` in between loses its change, and the next sync of ours
would not notice. OVN-K writes it at node start only.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Literal

import attrs

BRIDGE = "br-submariner"
PORT = "ovn-k8s-sub0"
NETWORK = "submariner_gateway"  # magw.desired.ovn.topology.LOCALNET_NETWORK
OWNER_KEY = "magw-owner"
OWNER = "magw"
MAPPINGS_KEY = "ovn-bridge-mappings"
OUR_MAPPING_KEY = "magw-bridge-mapping"
DEFAULT_TIMEOUT = 10.0

Ownership = Literal["missing", "ours", "foreign"]


class OvsError(RuntimeError):
    """ovs-vsctl failed, or a foreign object is in the way (one line, says which and why)."""


@attrs.frozen(kw_only=True)
class BridgeState:
    """What the OVS database holds of the OVN mode's objects."""

    bridge: Ownership
    datapath_type: str = ""
    port: Ownership = "missing"
    port_bridge: str | None = None  # the bridge holding a port named ovn-k8s-sub0
    interface_type: str = ""
    mapping: str | None = None  # the bridge that ovn-bridge-mappings names for submariner_gateway
    mapping_ours: bool = False  # we added that entry (external_ids:magw-bridge-mapping)

    def converged(self, datapath_type: str) -> bool:
        return (
            self.bridge == "ours"
            and self.datapath_type == datapath_type
            and self.port == "ours"
            and self.port_bridge == BRIDGE
            and self.interface_type == "internal"
            and self.mapping == BRIDGE
        )


def parse_mappings(text: str) -> list[tuple[str, str]]:
    """``net1:br1,net2:br2`` as pairs, in order; empty entries are skipped."""
    pairs = []
    for entry in text.split(","):
        net, sep, bridge = entry.strip().partition(":")
        if sep and net:
            pairs.append((net, bridge))
    return pairs


def _map(value: Any) -> dict[str, str]:
    """An OVSDB JSON map (``["map", [[k, v], ...]]``) as a dict."""
    if isinstance(value, list) and len(value) == 2 and value[0] == "map":
        return {str(k): str(v) for k, v in value[1]}
    return {}


def _owned(external_ids: dict[str, str]) -> Ownership:
    return "ours" if external_ids.get(OWNER_KEY) == OWNER else "foreign"


def _quoted(value: str) -> str:
    """An ovs-vsctl map value: double-quoted (it holds ``:`` and ``,``)."""
    return json.dumps(value)


@attrs.define
class OvsBridge:
    """Ensure, observe and clean up the OVN mode's bridge through ``ovs-vsctl --db=DB``."""

    db: str
    datapath_type: str = "netdev"  # the userspace datapath; "system" needs the openvswitch kernel module
    timeout: float = DEFAULT_TIMEOUT
    vsctl: str = "ovs-vsctl"

    def _run(self, *args: str) -> str:
        argv = [self.vsctl, f"--db={self.db}", f"--timeout={max(1, int(self.timeout))}", *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout + 5, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OvsError(f"ovs-vsctl --db={self.db}: {exc}") from None
        if done.returncode != 0:
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            raise OvsError(f"ovs-vsctl --db={self.db}: {reason}")
        return done.stdout

    def _find(self, table: str, name: str, columns: str) -> dict[str, Any] | None:
        out = json.loads(self._run("--format=json", f"--columns={columns}", "find", table, f"name={name}"))
        rows = out.get("data") or []
        return dict(zip(out["headings"], rows[0], strict=True)) if rows else None

    def _open_vswitch_ids(self) -> dict[str, str]:
        out = json.loads(self._run("--format=json", "--columns=external_ids", "list", "Open_vSwitch"))
        rows = out.get("data") or []
        return _map(rows[0][0]) if rows else {}

    def observe(self) -> BridgeState:
        bridge = self._find("Bridge", BRIDGE, "name,external_ids,datapath_type")
        port = self._find("Port", PORT, "name,external_ids")
        iface = self._find("Interface", PORT, "name,type")
        port_bridge = self._run("port-to-br", PORT).strip() if port is not None else None
        ids = self._open_vswitch_ids()
        mapping = dict(parse_mappings(ids.get(MAPPINGS_KEY, ""))).get(NETWORK)
        return BridgeState(
            bridge="missing" if bridge is None else _owned(_map(bridge["external_ids"])),
            datapath_type="" if bridge is None else str(bridge["datapath_type"]),
            port="missing" if port is None else _owned(_map(port["external_ids"])),
            port_bridge=port_bridge,
            interface_type="" if iface is None else str(iface["type"]),
            mapping=mapping,
            mapping_ours=ids.get(OUR_MAPPING_KEY) == f"{NETWORK}:{BRIDGE}",
        )

    def ensure(self) -> tuple[str, ...]:
        """Make the bridge, port and mapping exist as ours; what it changed (empty: nothing to do).

        OvsError, with nothing changed, when a foreign object is in the way.
        """
        state = self.observe()
        if state.converged(self.datapath_type):
            return ()
        if state.bridge == "foreign":
            raise OvsError(f"{BRIDGE} exists and is not magw's (no external_ids:{OWNER_KEY}={OWNER}); not touching it")
        if state.port == "foreign" or (state.port_bridge not in (None, BRIDGE)):
            raise OvsError(f"port {PORT} exists on {state.port_bridge} and is not magw's; not touching it")
        if state.mapping not in (None, BRIDGE):
            raise OvsError(
                f"Open_vSwitch external_ids:{MAPPINGS_KEY} maps {NETWORK} to {state.mapping}, not {BRIDGE}; "
                "not overwriting a foreign mapping"
            )
        mark = f"external_ids:{OWNER_KEY}={OWNER}"
        args = [
            "--may-exist", "add-br", BRIDGE,
            "--", "set", "Bridge", BRIDGE, f"datapath_type={self.datapath_type}", mark,
            "--", "--may-exist", "add-port", BRIDGE, PORT,
            "--", "set", "Port", PORT, mark,
            "--", "set", "Interface", PORT, "type=internal", mark,
        ]  # fmt: skip
        changed = [f"{BRIDGE}/{PORT} ({self.datapath_type})"]
        if state.mapping is None:
            ids = self._open_vswitch_ids()
            pairs = [*parse_mappings(ids.get(MAPPINGS_KEY, "")), (NETWORK, BRIDGE)]
            merged = ",".join(f"{n}:{b}" for n, b in pairs)
            args += [
                "--", "set", "Open_vSwitch", ".",
                f"external_ids:{MAPPINGS_KEY}={_quoted(merged)}",
                f"external_ids:{OUR_MAPPING_KEY}={_quoted(f'{NETWORK}:{BRIDGE}')}",
            ]  # fmt: skip
            changed.append(f"{MAPPINGS_KEY} += {NETWORK}:{BRIDGE}")
        self._run(*args)
        return tuple(changed)

    def cleanup(self, *, dry_run: bool = False) -> tuple[str, ...]:
        """Remove exactly ours: our bridge (with its ports), our port elsewhere, the mapping entry we added.

        Returns what it removed (with ``dry_run``: what it would remove, and changes nothing)."""
        state = self.observe()
        args: list[str] = []
        removed = []
        if state.bridge == "ours":
            args += ["--", "del-br", BRIDGE]
            removed.append(BRIDGE)
        elif state.port == "ours" and state.port_bridge is not None:
            args += ["--", "del-port", state.port_bridge, PORT]
            removed.append(PORT)
        if state.mapping_ours:
            ids = self._open_vswitch_ids()
            pairs = [p for p in parse_mappings(ids.get(MAPPINGS_KEY, "")) if p != (NETWORK, BRIDGE)]
            args += ["--", "remove", "Open_vSwitch", ".", "external_ids", OUR_MAPPING_KEY]
            if pairs:
                merged = ",".join(f"{n}:{b}" for n, b in pairs)
                args += ["--", "set", "Open_vSwitch", ".", f"external_ids:{MAPPINGS_KEY}={_quoted(merged)}"]
            else:
                args += ["--", "remove", "Open_vSwitch", ".", "external_ids", MAPPINGS_KEY]
            removed.append(f"{MAPPINGS_KEY} -= {NETWORK}:{BRIDGE}")
        if args and not dry_run:
            self._run(*args[1:])
        return tuple(removed)
