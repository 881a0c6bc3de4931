"""The route agent's OVN mode on a node (``config.cni: ovn``): its flags, and the bridge it keeps before each full
sync.

- ``--ovs-db unix:PATH``: the node's Open vSwitch database. Before every full sync (start, then each resync
  period) the agent ensures ``br-submariner`` with ``ovn-k8s-sub0`` and the ``submariner_gateway`` bridge mapping
  (magw.drivers.ovs.bridge), and sets ``ovn-k8s-sub0`` up, so a port deleted behind our back is back within a
  resync period. A failure is logged and the sync goes on: the rest of the node's plan does not depend on it.
- Without ``--ovs-db`` the agent expects ``ovn-k8s-sub0`` to exist (made by someone else) and says so, once, when
  it does not: a gateway's address and table 149 routes on it will then fail, each reported by the reconciler.
- ``--ovs-datapath-type``: ``system`` (default, the kernel datapath OVN-Kubernetes' ``br-int`` uses: patch ports
  only join bridges of one datapath type) or ``netdev`` (the userspace datapath: the lab and the tests here, where
  the openvswitch kernel module is missing).
- ``--ovn-mgmt-nexthop IP``: the next hop of ``ovn-k8s-mp0`` for table 150 (default: the node's ``cni_ip`` - 1,
  OVN-Kubernetes' layout; magw.desired.ovn.node).

On a gateway (``ovn-k8s-sub0`` holds 169.254.254.10) the agent also sends ARP requests for the gateway router's
169.254.254.9 from ``ovn-k8s-sub0``, so the router knows the host's MAC before the first reply must go there
(magw.drivers.ovs.announce): a burst of six over 8 s when the address is added, and at each full sync.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from ipaddress import IPv4Address
from typing import Any

import attrs
import structlog

from magw.daemons.common.flags import ipv4
from magw.desired.ovn.node import SUB_DEV
from magw.desired.ovn.topology import HOST_IP, UP_IP
from magw.desired.state import DesiredState
from magw.drivers.ovs.announce import Announcer, send_arp_request
from magw.reconcile.changeset import ChangeSet
from magw.reconcile.driver import ApplyResult, Driver

log = structlog.get_logger(__name__)

DATAPATH_TYPES = ("system", "netdev")


def add_ovn_node_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ovs-db",
        metavar="REMOTE",
        help="cni ovn: the node's Open vSwitch database (unix:PATH); keep br-submariner/ovn-k8s-sub0 and the "
        "submariner_gateway bridge mapping (default: expect ovn-k8s-sub0 to exist)",
    )
    p.add_argument(
        "--ovs-datapath-type",
        choices=DATAPATH_TYPES,
        default="system",
        help="with --ovs-db: br-submariner's datapath, the same as br-int's (default system; netdev: userspace)",
    )
    p.add_argument(
        "--ovn-mgmt-nexthop",
        type=ipv4,
        metavar="IP",
        help="cni ovn: the next hop of ovn-k8s-mp0 for table 150 (default: the node's cni_ip minus one)",
    )


def check_ovn_node_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.ovs_db and args.fake:
        parser.error("--ovs-db: not with --fake (the fake node has no Open vSwitch)")
    if args.ovs_db and not str(args.ovs_db).startswith(("unix:", "tcp:", "ssl:")):
        parser.error(f"--ovs-db: {args.ovs_db!r} is not unix:PATH, tcp:IP:PORT or ssl:IP:PORT")


def _device_exists(name: str) -> bool:
    try:
        socket.if_nametoindex(name)
    except OSError:
        return False
    return True


@attrs.define
class OvnBridgeDriver:
    """A node driver that, in OVN mode, prepares the bridge before each observe (i.e. each full sync)."""

    inner: Driver
    bridge: Any  # magw.drivers.ovs.bridge.OvsBridge, or None without --ovs-db
    wanted: Callable[[], bool]  # the last plan was for cni ovn
    announcer: Announcer | None = None  # the main driver's, not the audit's
    _warned: bool = attrs.field(init=False, default=False)

    def observe(self) -> DesiredState:
        if self.wanted():
            self.prepare()
        state = self.inner.observe()
        if self.announcer is not None and any(a.dev == SUB_DEV for a in state.addresses):
            self.announcer.trigger()  # a full sync: a router made again since the last burst learns the MAC
        return state

    def apply(self, changes: ChangeSet) -> ApplyResult:
        result = self.inner.apply(changes)
        if self.announcer is not None and any(
            op.kind == "addresses" and op.verb != "delete" and getattr(op.obj, "dev", None) == SUB_DEV
            for op in changes.ops
        ):
            self.announcer.trigger()  # this node just became a gateway: its router is new, or about to be
        return result

    def prepare(self) -> None:
        if self.bridge is None:
            if not self._warned and not _device_exists(SUB_DEV):
                log.warning(
                    "route_agent.ovn_sub0_missing",
                    device=SUB_DEV,
                    reason="cni ovn without --ovs-db: ovn-k8s-sub0 must be made by someone else; a gateway's "
                    "169.254.254.10 and table 149 need it",
                )
                self._warned = True
            return
        from magw.drivers.ovs.bridge import OvsError
        from magw.drivers.ovs.link import link_up

        try:
            changed = self.bridge.ensure()
            if changed:
                log.info("route_agent.ovn_bridge_ensured", changed=list(changed))
            if link_up(SUB_DEV):
                log.info("route_agent.ovn_sub0_up", device=SUB_DEV)
        except (OvsError, OSError) as exc:
            log.error("route_agent.ovn_bridge_failed", error=str(exc))


def ovn_node_driver(
    args: argparse.Namespace, inner: Driver, wanted: Callable[[], bool], *, announce: bool = True
) -> Driver:
    """``inner`` wrapped for the OVN mode (a no-op until a plan says ``cni: ovn``); ``inner`` with ``--fake``.
    ``announce``: send the ARP requests above (the main driver; not the audit's, which only observes)."""
    if args.fake:
        return inner
    bridge = None
    if args.ovs_db:
        from magw.drivers.ovs.bridge import OvsBridge

        bridge = OvsBridge(args.ovs_db, datapath_type=args.ovs_datapath_type)
    return OvnBridgeDriver(inner, bridge, wanted, _announcer() if announce else None)


def _announcer() -> Announcer:
    host, router = IPv4Address(HOST_IP), IPv4Address(UP_IP)
    return Announcer(lambda: send_arp_request(SUB_DEV, host, router), what=f"{SUB_DEV} {HOST_IP} -> {UP_IP}")
