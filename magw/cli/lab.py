"""``magw lab up|down|status|exec|kubectl|demo|fail|recover|verify|upgrade|add-gateway|remove-gateway``: a whole
clusterset in network namespaces (docs/lab.md)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from typing import NoReturn

import attrs

from magw.cli import UsageError, lab_grow, lab_kubectl, log_level
from magw.lab.build import lifecycle as build
from magw.lab.build import ownership, state
from magw.lab.build.state import CNIS, CONTROL_PLANES
from magw.lab.errors import LabError, LabInputError
from magw.lab.observe.status import status_doc, status_text
from magw.lab.spec import naming
from magw.lab.spec.cloud import LoadBalancerSpec
from magw.lab.spec.topology import Topology, default_topology, load_topology
from magw.model.cable import Cable
from magw.util.logsetup import FORMATS, configure_logging

EXIT_OK = 0
EXIT_FAILURE = 1
MIN_FLOWS, MAX_FLOWS, DEFAULT_FLOWS = 1, 1024, 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="lab_verb", metavar="VERB", required=True)

    up = verbs.add_parser("up", help="build a lab and start its daemons")
    _name(up)
    _topology(up)
    up.add_argument("--no-daemons", action="store_true", help="build the network, pods and services only")
    up.add_argument("--timeout", type=_seconds, default=60.0, help="seconds to wait for connectivity (default 60)")
    _control_plane(up)
    _cni(up)
    up.add_argument(
        "--daemons-from",
        metavar="DIR",
        default="",
        help="run the daemons from the magw source tree DIR (same venv and Python, DIR first on their PYTHONPATH; "
        "status shows each daemon's build): e.g. an older checkout to upgrade from",
    )
    up.set_defaults(lab_run=_up)

    upgrade = verbs.add_parser("upgrade", help="rolling restart of every daemon onto another build, one at a time")
    _name(upgrade)
    upgrade.add_argument("--to", metavar="DIR", default="",
                         help="the magw source tree to run the daemons from (default: the installed magw)")  # fmt: skip
    upgrade.add_argument("--only", metavar="KIND|NODE", default=None,
                         help="only the daemons of this kind (route-agent, gateway, globalnet, egress, egress-agent) "
                              "or of this node (or cluster, for its controllers)")  # fmt: skip
    upgrade.add_argument("--json", action="store_true", help="print the steps as JSON at the end")
    upgrade.set_defaults(lab_run=_upgrade)

    verify = verbs.add_parser(
        "verify", help="check a --cni ovn lab's OVN paths: ovn-trace and real packets (one line per check)"
    )
    _name(verify)
    verify.set_defaults(lab_run=_verify)

    down = verbs.add_parser("down", help="remove every namespace, process and file of a lab")
    _name(down)
    down.set_defaults(lab_run=_down)

    status = verbs.add_parser("status", help="show a lab's nodes, pods, services and processes")
    _name(status)
    status.add_argument("--json", action="store_true", help="print the status document as JSON")
    status.set_defaults(lab_run=_status)

    ex = verbs.add_parser("exec", help="run a command inside a lab namespace (node, pod, wan or <cluster>-ul)")
    ex.add_argument(
        "target",
        metavar="NODE",
        help="a node (east-gw1), a pod (east-w1-p1), 'wan', '<cluster>-ul', (egress labs) 'outside' or "
        "(--load-balancer) '<cluster>-cloud'",
    )
    _name(ex)
    # REMAINDER keeps CMD's own options; "--name" may still come between NODE and "--" (see _split_exec).
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command and its arguments")
    ex.set_defaults(lab_run=_exec)

    lab_kubectl.add_verb(verbs, _name)
    lab_grow.add_verbs(verbs, _name, _seconds)

    demo = verbs.add_parser("demo", help="bring a lab up, show connectivity and gateway spread, tear it down")
    _name(demo)
    _topology(demo)
    demo.add_argument("--keep", action="store_true", help="leave the lab running afterwards")
    demo.add_argument("--flows", type=_flows, default=None, metavar="N",
                      help=f"UDP flows for the spread measurement ({MIN_FLOWS}-{MAX_FLOWS}, default {DEFAULT_FLOWS}; "
                           "the default demo only)")  # fmt: skip
    demo.add_argument("--globalnet", action="store_true",
                      help="three clusters with identical CIDRs (or --topology with globalnet: true): which source "
                           "IP each server saw, and why")  # fmt: skip
    demo.add_argument("--egress-gateway", action="store_true",
                      help="the egress gateway lab (examples/lab-egress-gateway.yaml, or --topology with egress:): "
                           "source IPs outside, ingress, hairpin, a VIP failover")  # fmt: skip
    _control_plane(demo)
    _cni(demo)
    demo.set_defaults(lab_run=_demo)

    fail = verbs.add_parser("fail", help="power loss of a node: its links down, its daemons SIGKILLed")
    fail.add_argument("node", metavar="NODE", help="a node of the lab (east-gw1)")
    _name(fail)
    fail.add_argument("--wan-only", action="store_true", help="only cut the gateway's WAN link; daemons keep running")
    fail.set_defaults(lab_run=_fail)

    recover = verbs.add_parser("recover", help="bring a failed node back: links up, daemons restarted")
    recover.add_argument("node", metavar="NODE", help="a node of the lab (east-gw1)")
    _name(recover)
    recover.set_defaults(lab_run=_recover)


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=naming.DEFAULT_LAB_NAME, help="the lab's name (default: magw)")


def _topology(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", metavar="FILE", help="topology YAML (default: two clusters, east and west)")
    p.add_argument(
        "--cable",
        choices=[c.value for c in Cable],
        default=None,
        help="between gateways: vxlan (plain), or wireguard (VXLAN through one WireGuard device per gateway, "
        "wireguard-go here; docs/cables.md). Default: the topology's cable, else vxlan",
    )
    p.add_argument(
        "--load-balancer",
        action="store_true",
        help="put each cluster's gateways behind an emulated cloud: one public IP per cluster with a UDP listener "
        "per gateway (port 45000+k), a NAT that rewrites source ports, and the cloud's own health check (every 5 s, "
        "out after 2 failures); the topology's load_balancer: key sets these (docs/load-balancer.md)",
    )


def _with_cable(args: argparse.Namespace, topo: Topology) -> Topology:
    """``topo`` with ``--cable`` (it wins over the topology file's ``cable``) and ``--load-balancer`` (the file's
    ``load_balancer`` settings, if any, stay) applied."""
    topo = topo if args.cable is None else attrs.evolve(topo, cable=Cable(args.cable))
    if getattr(args, "load_balancer", False) and topo.load_balancer is None:
        if topo.wan_rate is not None:
            raise LabInputError("--load-balancer: the topology's wan_rate shapes gateways' own WAN links, which "
                                "gateways behind a load balancer have not")  # fmt: skip
        topo = attrs.evolve(topo, load_balancer=LoadBalancerSpec())
    return topo


def _control_plane(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--control-plane",
        choices=CONTROL_PLANES,
        default="file",
        help="what feeds the daemons: the file broker (default), or 'kube': an API server emulator per cluster and "
        "one for the broker (for tests and the lab, not a production control plane; docs/lab.md)",
    )


def _flows(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not MIN_FLOWS <= value <= MAX_FLOWS:
        raise argparse.ArgumentTypeError(f"must be from {MIN_FLOWS} to {MAX_FLOWS}, got {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 1 to 3600 seconds, got {text}")
    return value


def _cni(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cni",
        choices=CNIS,
        default="generic",
        help="'ovn': OVN-Kubernetes' datapath for real: an OVN control plane (NB, SB, northd) and an OVN syncer per "
        "cluster, Open vSwitch (userspace datapath) and ovn-controller on every node, pods on br-int; with "
        "--control-plane kube, every cluster needs a worker (its route agent hosts the syncer; docs/lab.md)",
    )


def run(args: argparse.Namespace) -> int:
    action: Callable[[argparse.Namespace], int] = args.lab_run
    try:
        naming.check_lab_name(args.name)
        return action(args)
    except LabInputError as exc:
        raise UsageError(str(exc)) from None
    except LabError as exc:
        print(f"magw: error: lab {args.lab_verb}: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _out(line: str) -> None:
    print(line, flush=True)


def _load(args: argparse.Namespace) -> Topology:
    return _with_cable(args, load_topology(args.topology) if args.topology else default_topology())


def _up(args: argparse.Namespace) -> int:
    topo = _load(args)
    build.up(
        topo,
        name=args.name,
        daemons=not args.no_daemons,
        wait_timeout=args.timeout,
        progress=_out,
        control_plane=args.control_plane,
        cni=args.cni,
        daemons_from=args.daemons_from,
    )
    if args.cni == "ovn":
        _out(f"verify the OVN paths: magw lab verify --name {args.name}")
    _out(f"status: magw lab status --name {args.name}; remove: magw lab down --name {args.name}")
    return EXIT_OK


def _down(args: argparse.Namespace) -> int:
    report = build.down(args.name)
    for ns, why in report.left_alone:
        _out(ownership.bystander_line(ns, why))
    if not report.namespaces and not report.processes and not report.state_removed:
        raise _unknown_lab(args.name)
    _out(f"lab {args.name}: removed {len(report.namespaces)} namespaces, {len(report.processes)} processes")
    return EXIT_OK


def _unknown_lab(name: str) -> LabInputError:
    return LabInputError(state.no_lab_line(name))


def _read(name: str) -> state.LabState:
    """The lab's state; an unknown lab is bad input (exit 2)."""
    st = state.read(name)
    if st is None:
        raise _unknown_lab(name)
    return st


def _status(args: argparse.Namespace) -> int:
    doc = status_doc(_read(args.name))
    _out(json.dumps(doc, indent=2, sort_keys=True) if args.json else status_text(doc))
    return EXIT_OK


_EXEC_USAGE = "usage: magw lab exec NODE [--name N] [-v] [--log-format F] -- CMD"


class _ExecHeadParser(argparse.ArgumentParser):
    """Reads the flags between NODE and "--"; a refusal is bad input (exit 2), one line."""

    def error(self, message: str) -> NoReturn:
        raise LabInputError(f"exec: {message} before '--' ({_EXEC_USAGE})")


def _split_exec(args: argparse.Namespace) -> tuple[str, list[str]]:
    """(lab name, command): flags between NODE and "--" land in the remainder, so read them here.

    ``--name`` and the global flags (``-v``, ``--log-format``) may stand there; the
    global flags given there win, as after any other verb, and logging is set up again.
    """
    rest = list(args.cmd)
    head, cmd = (rest[: rest.index("--")], rest[rest.index("--") + 1 :]) if "--" in rest else ([], rest)
    if cmd and cmd[0].startswith(("--name", "-v", "--verbose", "--log-format")) and "--" not in rest:
        raise LabInputError(f"exec: CMD: put '--' before the command ({_EXEC_USAGE})")
    parser = _ExecHeadParser(prog="magw lab exec", add_help=False)
    parser.add_argument("--name", default=args.name)
    parser.add_argument("-v", "--verbose", action="count", default=None)
    parser.add_argument("--log-format", choices=FORMATS, default=None)
    flags = parser.parse_args(head)
    if flags.verbose is not None or flags.log_format is not None:
        verbose = flags.verbose if flags.verbose is not None else args.verbose
        try:
            configure_logging(flags.log_format or args.log_format, log_level(verbose))
        except ValueError as exc:
            raise LabInputError(str(exc)) from None
    if not cmd:
        raise LabInputError(f"exec: CMD: missing ({_EXEC_USAGE})")
    return naming.check_lab_name(flags.name), cmd


def _exec(args: argparse.Namespace) -> int:
    name, cmd = _split_exec(args)
    st = _read(name)
    ns = args.target if args.target in st.namespaces else f"{name}-{args.target}"
    if ns not in st.namespaces:
        raise LabInputError(
            f"exec: NODE: {args.target!r} is not a node, pod, 'wan', '<cluster>-ul', 'outside' or '<cluster>-cloud' of "
            f"lab {name}"
        )
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=False).returncode


def _verify(args: argparse.Namespace) -> int:
    from magw.lab.spec.layout import layout
    from magw.lab.verify.ovn import verify

    st = _read(args.name)
    if not st.ovn:
        raise LabInputError(f"verify: lab {args.name} was built with --cni {st.cni}; verify is for --cni ovn labs")
    if st.topology.globalnet:
        # Its checks address pods by their pod IPs, which overlap between Globalnet clusters: they would prove nothing.
        raise LabInputError(
            f"verify: lab {args.name} has globalnet: true; verify's checks address pods by their (overlapping) pod "
            "IPs: use magw lab demo --globalnet --cni ovn (docs/ovn-globalnet.md)"
        )
    result = verify(layout(st.name, st.topology), st)
    for check in result.checks:
        _out(check.line())
    failed = sum(1 for c in result.checks if not c.ok)
    _out(f"== {len(result.checks) - failed}/{len(result.checks)} OK" + (f", {failed} FAILED" if failed else ""))
    return EXIT_FAILURE if failed else EXIT_OK


def _upgrade(args: argparse.Namespace) -> int:
    from magw.lab.scenarios.upgrade import upgrade

    _read(args.name)
    steps = upgrade(args.name, to=args.to, only=args.only, out=_out)
    if args.json:
        _out(json.dumps([s.to_doc() for s in steps], indent=2))
    return EXIT_OK


def _fail(args: argparse.Namespace) -> int:
    from magw.lab.scenarios.failure import fail

    _read(args.name)
    done = fail(args.name, args.node, wan_only=args.wan_only)
    _out(f"{args.node}: {', '.join(done)}")
    return EXIT_OK


def _recover(args: argparse.Namespace) -> int:
    from magw.lab.scenarios.failure import recover

    _read(args.name)
    done = recover(args.name, args.node)
    _out(f"{args.node}: {', '.join(done) or 'nothing to do'}")
    return EXIT_OK


def _check_demo_flags(args: argparse.Namespace) -> None:
    """Refuse (one line, exit 2) flags that the chosen demo would ignore: the three demos are one each."""
    if args.globalnet and args.egress_gateway:
        raise LabInputError("demo: --globalnet and --egress-gateway are two different demos: give one of them")
    chosen = "--globalnet" if args.globalnet else "--egress-gateway" if args.egress_gateway else None
    if chosen is not None and args.flows is not None:
        raise LabInputError(f"demo: --flows is the default demo's spread measurement; {chosen} sends no such flows")
    if args.cni != "generic" and args.egress_gateway:
        raise LabInputError(
            f"demo: --cni {args.cni}: not with --egress-gateway (the demo shows unbound pods leaving as their node, "
            "which the OVN lab has no way out for; use lab up --cni ovn with an egress: topology)"
        )


def _demo(args: argparse.Namespace) -> int:
    _check_demo_flags(args)
    if args.egress_gateway:
        from magw.lab.scenarios.egressgw_demo import demo_topology as egressgw_topology
        from magw.lab.scenarios.egressgw_demo import run_egressgw_demo

        topo = _with_cable(args, load_topology(args.topology) if args.topology else egressgw_topology())
        if topo.egressgw is None:
            raise LabInputError(f"{args.topology}: --egress-gateway needs a topology with an egress: key")
        return run_egressgw_demo(topo, name=args.name, keep=args.keep, out=_out, control_plane=args.control_plane)
    if args.globalnet:
        from magw.lab.scenarios.globalnet_demo import demo_topology, run_globalnet_demo

        topo = _with_cable(args, load_topology(args.topology) if args.topology else demo_topology())
        if not topo.globalnet:
            raise LabInputError(f"{args.topology}: --globalnet needs a topology with globalnet: true")
        return run_globalnet_demo(
            topo, name=args.name, keep=args.keep, out=_out, control_plane=args.control_plane, cni=args.cni
        )
    from magw.lab.scenarios.demo import run_demo

    return run_demo(
        _load(args),
        name=args.name,
        keep=args.keep,
        out=_out,
        flows=DEFAULT_FLOWS if args.flows is None else args.flows,
        control_plane=args.control_plane,
        cni=args.cni,
    )
