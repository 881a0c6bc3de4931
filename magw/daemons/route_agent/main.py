"""``magw-route-agent``: flags, the node driver, the source, signals (docs/daemons.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import structlog
from prometheus_client import REGISTRY

from magw.daemons.common.cable import add_state_dir_argument
from magw.daemons.common.flags import (
    EXIT_FAILURE,
    EXIT_USAGE,
    OneLineParser,
    common_parser,
    interface_name,
    parse,
    port_or_off,
)
from magw.daemons.common.runner import run_until_signalled, start_metrics
from magw.daemons.route_agent.app import SWITCH_INTERVAL, RouteAgent, StrategyPicker
from magw.daemons.route_agent.cable import CableDriver, add_cable_arguments, cable_driver
from magw.daemons.route_agent.health import build_monitor
from magw.daemons.route_agent.health_flags import HealthSettings, add_health_arguments, endpoint_ttl, health_settings
from magw.daemons.route_agent.node_driver import LazyDriver, fake_driver, real_node_driver
from magw.daemons.route_agent.ovn_host import add_ovn_arguments, check_ovn_arguments, hosted_syncer
from magw.daemons.route_agent.ovn_node import add_ovn_node_arguments, check_ovn_node_arguments, ovn_node_driver
from magw.drivers.netlink.heldgroups import held_group_ids_in
from magw.drivers.netns import current_netns_refusal
from magw.health import natdisc
from magw.health.natdisc import NatDiscovery
from magw.metrics.route_agent import read_conntrack
from magw.model import Cni
from magw.reconcile.driver import Driver
from magw.sources.base import StateSource
from magw.sources.file.broker import FileBroker
from magw.util.logsetup import configure_logging

log = structlog.get_logger(__name__)


def build_parser() -> OneLineParser:
    p = common_parser("magw-route-agent", "Program this node's magw plan into the namespace it runs in.")
    p.add_argument("--once", action="store_true", help="one full sync, then exit (0: converged, 1: failures)")
    p.add_argument("--fake", action="store_true", help="use the in-memory fake node driver (no kernel, no root)")
    p.add_argument(
        "--status-file",
        metavar="PATH",
        # Not checked here: in a pod its directory is a volume that exists only at run time (deploy/magw.yaml);
        # a write that fails is one log line (route_agent.status_file_failed) and the agent goes on.
        help="write a JSON status after every sync (atomic replace)",
    )
    p.add_argument(
        "--allow-init-netns",
        action="store_true",
        help="allow programming the host's initial network namespace, or one we cannot tell apart (default: refuse)",
    )
    p.add_argument(
        "--nexthop-compat-mode",
        choices=("keep", "off"),
        default="keep",
        help="off: set net.ipv4.nexthop_compat_mode=0 in the node's namespace, so a nexthop group change costs the "
        "kernel no notification per route that uses it (a failover under 100k routes: 3 ms instead of 0.1-0.2 s), "
        "and dumps show magw's routes as 'nhid N' only; keep: leave it as it is (default; docs/daemons.md)",
    )
    p.add_argument(
        "--cni-interface",
        type=interface_name,
        metavar="NAME",
        help="--source kube: publish this interface's first IPv4 address as the node's CNI address (default: the "
        "first local address inside the cluster's pod CIDRs)",
    )
    p.add_argument(
        "--egress",
        action="store_true",
        help="--source kube: also read the egress gateway's EgressVIP/EgressConfig objects and the workloads, and "
        "plan its datapath (needs their CRDs; the file broker reads them whenever they are there)",
    )
    p.add_argument(
        "--nat-discovery-port",
        type=port_or_off,
        default=natdisc.PORT,
        metavar="PORT",
        help=f"on a gateway: ask each remote gateway on its private address, on this UDP port, whether the cable can "
        f"go there instead of its public address, and answer theirs (default {natdisc.PORT}; 0: off; off with "
        f"--fake; docs/load-balancer.md)",
    )
    add_health_arguments(p)
    add_state_dir_argument(p)
    add_cable_arguments(p)
    add_ovn_arguments(p)
    add_ovn_node_arguments(p)
    return p


def _prepare_kernel(compat_off: bool) -> StrategyPicker:
    """Detect what the kernel supports and set the multipath hash policy (and with ``compat_off`` the nexthop
    compat mode), here (the node's namespace)."""
    from magw.drivers.netlink.capabilities import detect, set_hash_policy, set_nexthop_compat_mode

    caps = detect(None)
    log.info("route_agent.capabilities", nexthops=caps.nexthops, resilient=caps.resilient, kernel=caps.kernel)
    try:
        set_hash_policy(None)
    except (OSError, RuntimeError) as exc:
        log.error("route_agent.hash_policy_failed", error=str(exc))
    if compat_off:
        try:
            set_nexthop_compat_mode(None, 0)
        except (OSError, RuntimeError) as exc:  # an older kernel without it: routes are expanded, as before
            log.error("route_agent.nexthop_compat_mode_failed", error=str(exc))
    return caps.strategy


async def _run(args: argparse.Namespace, health: HealthSettings | None) -> int:
    driver, picker, audit = await _driver(args)
    if args.source == "kube":
        from magw.daemons.route_agent.kube import run_kube

        return await run_kube(args, lambda source: _agent(args, health, source, driver, picker, audit))
    agent = _agent(
        args,
        health,
        FileBroker(args.broker_dir, local_cluster=args.cluster, endpoint_ttl=endpoint_ttl(args)),
        driver,
        picker,
        audit,
    )
    log.info("route_agent.started", node=args.node, cluster=args.cluster, fake=args.fake, once=args.once)
    if args.once:
        return await agent.once()
    start_metrics(args.metrics_port, registry=REGISTRY, address=args.metrics_address)
    return await run_until_signalled("route_agent", agent.serve)


async def _driver(args: argparse.Namespace) -> tuple[Driver, StrategyPicker, Driver | None]:
    """The node driver, the strategy picker, and the second driver the periodic resync's audit observes with
    (its own sockets, built in the audit's thread; none with ``--fake``, whose resync observes in place)."""
    if args.fake:
        driver: Driver = LazyDriver(fake_driver, what="fake")
        picker: StrategyPicker = lambda requested: requested  # noqa: E731  # the fake supports every strategy
        return driver, picker, None
    picker = await asyncio.to_thread(_prepare_kernel, args.nexthop_compat_mode == "off")
    return LazyDriver(real_node_driver, what="kernel"), picker, LazyDriver(real_node_driver, what="kernel audit")


def _agent(
    args: argparse.Namespace,
    health: HealthSettings | None,
    source: StateSource,
    driver: Driver,
    picker: StrategyPicker,
    audit: Driver | None,
) -> RouteAgent:
    made: list[RouteAgent] = []  # the OVN node driver asks the agent (made next) what its last plan was for
    wanted = lambda: bool(made) and made[0].cni is Cni.OVN  # noqa: E731
    cable = cable_driver(args, ovn_node_driver(args, driver, wanted), lambda: made[0].cable_plan if made else None)
    agent = RouteAgent(
        source=source,
        node=args.node,
        driver=cable,
        cable=cable if isinstance(cable, CableDriver) else None,
        audit=None if audit is None else ovn_node_driver(args, audit, wanted, announce=False).observe,
        resync_period=args.resync_period,
        pick_strategy=picker,
        status_file=args.status_file,
        health=build_monitor(args.node, health, allow_initial=args.allow_init_netns),
        natdisc=_natdisc(args),
        registry=REGISTRY,
        ovn_mgmt_nexthop=args.ovn_mgmt_nexthop,
        conntrack=None if args.fake else read_conntrack,  # the node's own namespace (main refuses the host's)
        held_groups=frozenset() if args.fake else held_group_ids_in(None),  # the node's own namespace, as above
    )
    made.append(agent)
    agent.ovn = hosted_syncer(args, source, agent.health, args.resync_period)
    return agent


def _natdisc(args: argparse.Namespace) -> NatDiscovery | None:
    """NAT discovery, unless off (port 0) or --fake (no kernel: the agent may run in the host's namespace)."""
    return None if args.fake or not args.nat_discovery_port else NatDiscovery(args.node, port=args.nat_discovery_port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    health = health_settings(parser, args)
    check_ovn_arguments(parser, args)
    check_ovn_node_arguments(parser, args)
    configure_logging(args.log_format, args.log_level)
    refused = None if args.fake else current_netns_refusal("program", allow=args.allow_init_netns)
    if refused is not None:  # the host's namespace, or one we cannot tell from it
        parser.error(refused)
    # The loop waits for the GIL while the reconciler's or the source's worker thread computes: at most the
    # switch interval, 5 ms by default; 1 ms keeps probe replies on time (benchmarks/loop_lag.py, docs/health.md).
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        return asyncio.run(_run(args, health))
    except OSError as exc:  # e.g. the metrics port is taken
        log.error("route_agent.failed", error=str(exc))
        return EXIT_FAILURE


__all__ = ["EXIT_USAGE", "RouteAgent", "build_parser", "main"]


if __name__ == "__main__":
    sys.exit(main())
