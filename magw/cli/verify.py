"""``magw verify --lab NAME [--failover]``: the connectivity suite from inside a lab's pods, every failing pair named
with the hop where it died; ``--failover`` (disruptive) kills a gateway's datapath under traffic and measures what
moved. ``magw verify --kubeconfig A --kubeconfig B``: the suite with pods made through the clusters' API servers
(``magw.ops.verify.kube``). docs/verify.md. Exit 0 when every check passed, 1 when one failed, 2 on bad input (or
a refused ``--failover``)."""

from __future__ import annotations

import argparse
import json
import sys

from magw.cli import UsageError
from magw.cli.argtypes import float_in, int_in
from magw.cli.kubeflags import add_kube_pod_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lab", metavar="NAME", help="the running lab to verify (magw lab up --name NAME)")
    add_kube_pod_flags(parser, "the suite")
    parser.add_argument(
        "--client",
        metavar="POD",
        action="append",
        help="a client pod (repeatable; default: the first pod of every node)",
    )
    parser.add_argument(
        "--flows",
        metavar="N",
        type=int_in(0, 256),
        default=32,
        help="traced UDP flows per pair of clusters for the every-gateway check (0: skip it; default 32)",
    )
    parser.add_argument(
        "--timeout", metavar="S", type=float_in(0.2, 10), default=2.0, help="seconds per probe (default 2)"
    )
    parser.add_argument(
        "--failover",
        action="store_true",
        help="DISRUPTIVE: fail a gateway (links down, daemons killed) under traffic, measure what moved, recover it",
    )
    parser.add_argument("--victim", metavar="NODE", help="the gateway --failover fails (default: the first one)")
    parser.add_argument("--yes", action="store_true", help="do not ask before --failover (needed without a tty)")
    parser.add_argument(
        "--failover-flows",
        metavar="N",
        type=int_in(2, 256),
        default=32,
        help="UDP flows of the failover measurement (default 32)",
    )
    parser.add_argument(
        "--failover-rate",
        metavar="N",
        type=int_in(10, 1000),
        default=100,
        help="datagrams per second per flow (default 100: the loss window's resolution is 10 ms)",
    )
    parser.add_argument(
        "--failover-duration",
        metavar="S",
        type=float_in(3, 30),
        default=6.0,
        help="seconds of traffic; the gateway fails a third of the way in (default 6)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")


def _confirm(args: argparse.Namespace, what: str) -> None:
    if args.yes:
        return
    sys.stderr.write(f"--failover: {what}. Go on? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError("verify: --failover: not confirmed")


def run(args: argparse.Namespace) -> int:
    from magw.lab.errors import LabError, LabInputError
    from magw.ops.verify import failover, report, suite
    from magw.ops.verify.labref import open_lab

    if args.kubeconfig:
        return _run_kube(args)
    if not args.lab:
        raise UsageError("verify: --lab NAME or --kubeconfig (twice or more) is required")
    _failover_flags(args)
    try:
        lab = open_lab(args.lab, verb="verify")
        clients = [lab.pod(n) for n in args.client] if args.client else lab.first_pods()
        victim = args.victim or lab.layout.gateways[0].name
        if args.failover:
            failover.check_victim(lab, victim)
            _confirm(args, f"gateway {victim} of lab {args.lab} loses its links and daemons under traffic, "
                           "then is recovered")
        result = suite.run(lab, clients=clients, flows=args.flows, timeout=args.timeout)
        fo = None
        if args.failover:
            fo = failover.run(
                lab, victim=victim, flows=args.failover_flows, rate=args.failover_rate, duration=args.failover_duration
            )
    except LabInputError as exc:
        raise UsageError(str(exc)) from None
    except LabError as exc:
        print(f"magw: error: verify: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.report_json(lab.name, result, fo), indent=2))
    else:
        sys.stdout.write(report.table(result, fo))
    return 0 if result.ok and (fo is None or fo.ok) else 1


def _failover_flags(args: argparse.Namespace) -> None:
    if not args.failover and (args.victim or args.yes):
        raise UsageError("verify: --victim and --yes go with --failover")
    if args.failover and not args.yes and not sys.stdin.isatty():
        raise UsageError("verify: --failover fails a gateway: without a terminal to ask on, add --yes")


def _run_kube(args: argparse.Namespace) -> int:
    from magw.ops.verify import kube

    if args.lab:
        raise UsageError("verify: --lab and --kubeconfig: give one of them")
    if len(args.kubeconfig) < 2:
        raise UsageError("verify: --kubeconfig: give two or more clusters' kubeconfigs (every pair is checked)")
    if args.client:
        raise UsageError("verify: --client: only with --lab (it names a lab pod)")
    _failover_flags(args)
    spec = None
    if args.failover:
        victim = f"gateway {args.victim}" if args.victim else "the first gateway of a cluster with two or more"
        _confirm(args, f"{victim} loses its datapath (magw's devices drop every packet) for about "
                       f"{args.failover_duration + 2:g} s under traffic, then gets it back")  # fmt: skip
        spec = kube.FailoverSpec(victim=args.victim, flows=args.failover_flows, rate=args.failover_rate,
                                 duration=args.failover_duration)  # fmt: skip
    settings = kube.Settings(namespace=args.pod_namespace, magw_namespace=args.namespace, image=args.image,
                             pod_timeout=args.pod_timeout)  # fmt: skip
    try:
        result = kube.run(args.kubeconfig, settings, timeout=args.timeout, flows=args.flows, failover=spec)
    except kube.FailoverInputError as exc:
        raise UsageError(str(exc)) from None
    except kube.KubeRunError as exc:
        print(f"magw: error: verify: {exc}", file=sys.stderr)
        return 1
    except kube.KubeConfigError as exc:
        raise UsageError(f"verify: {exc}") from None
    if args.json:
        print(json.dumps(kube.report_json(result), indent=2))
    else:
        sys.stdout.write(kube.table(result))
    return 0 if result.ok else 1
