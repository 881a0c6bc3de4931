"""``python -m magw.ops.verify.nodefail``: cut one gateway's datapath for a while (``magw verify --kubeconfig
--failover``), then restore it.

``magw verify`` runs this, once asked and confirmed, in a privileged ``hostNetwork`` pod on the victim gateway.
It loads a table of the run's own that drops every packet entering or leaving magw's datapath devices (the
cluster-side VXLAN ``vx-submariner``, the cable's ``vxlan-tunnel`` and ``magw-wg``) at priority -400, before
anything of ours or the CNI's sees them: the peers' health probes go unanswered and every flow through the gateway
stops, as when the gateway dies, while the node itself (its kubelet, its API traffic) carries on. It prints
``{"event": "failed", "at": WALL_CLOCK, "devices": [...]}``, holds for ``--hold`` seconds (or until SIGTERM:
the pod deleted), removes the table, prints ``{"event": "recovered", "at": WALL_CLOCK}`` and exits 0.

It refuses (exit 2, one line) the host's initial namespace unless ``--allow-init-netns`` (a hostNetwork pod on a
real node: verify passes it), and a namespace with none of those devices (exit 1: nothing of magw's to cut).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from collections.abc import Sequence

from magw.drivers.netns import ALLOW_FLAG, current_netns_refusal
from magw.model.cable import WG_DEVICE
from magw.model.vtep import VX_SUBMARINER, VXLAN_TUNNEL
from magw.ops.verify import nodetrace

DEVICES = (VX_SUBMARINER, VXLAN_TUNNEL, WG_DEVICE)
TABLE_RE = re.compile(r"^magw_verify_fail[a-z0-9_]{0,40}$")
SYS_NET = "/sys/class/net"


def table_text(table: str, devices: Sequence[str]) -> str:
    names = ", ".join(f'"{d}"' for d in devices)
    return (
        f"add table ip {table}\ndelete table ip {table}\n"
        f"table ip {table} {{\n"
        "  chain pre {\n    type filter hook prerouting priority -400; policy accept;\n"
        f"    iifname {{ {names} }} drop\n  }}\n"
        "  chain post {\n    type filter hook postrouting priority -400; policy accept;\n"
        f"    oifname {{ {names} }} drop\n  }}\n}}\n"
    )


def present(sys_net: str = SYS_NET) -> list[str]:
    """magw's datapath devices in this namespace."""
    return [d for d in DEVICES if os.path.exists(os.path.join(sys_net, d))]


def fail(table: str, hold: float) -> None:
    """Cut the datapath for ``hold`` seconds (or until a signal), then restore it (always)."""
    devices = present()
    if not devices:
        raise RuntimeError(f"none of magw's datapath devices ({', '.join(DEVICES)}) is here: not a magw gateway")
    with nodetrace.table_held(table, table_text(table, devices),
                              lambda: nodetrace.say({"event": "recovered", "at": time.time()})):  # fmt: skip
        nodetrace.say({"event": "failed", "at": time.time(), "devices": devices})
        time.sleep(hold)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.ops.verify.nodefail", description=__doc__.split("\n")[0])
    parser.add_argument("--table", default="magw_verify_fail", help="the table's name, magw_verify_fail...")
    parser.add_argument("--hold", type=float, required=True, help="seconds the datapath stays cut (0.1..120)")
    parser.add_argument(ALLOW_FLAG, action="store_true", dest="allow_init",
                        help="allow the host's initial namespace (a hostNetwork pod on a real node)")  # fmt: skip
    args = parser.parse_args(argv)
    if not TABLE_RE.match(args.table):
        parser.error(f"--table: {args.table!r} is not magw_verify_fail followed by up to 40 of [a-z0-9_]")
    if not 0.1 <= args.hold <= 120:
        parser.error("--hold: 0.1..120 seconds")
    refused = current_netns_refusal("cut the datapath of", allow=args.allow_init, instead="run it in a node's pod")
    if refused is not None:
        print(f"nodefail: {refused}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, nodetrace.raise_stop)
    signal.signal(signal.SIGINT, nodetrace.raise_stop)
    try:
        fail(args.table, args.hold)
    except (RuntimeError, OSError) as exc:
        print(f"nodefail: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
