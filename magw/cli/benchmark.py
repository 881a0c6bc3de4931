"""``magw benchmark throughput|latency --lab NAME``: iperf3 and a request/response probe between clusters, parsed
into a table (or ``--json``). docs/benchmark.md. Exit 0 when every pair was measured, 1 when one was not, 2 on
bad input."""

from __future__ import annotations

import argparse
import json
import sys

from magw.cli import UsageError
from magw.cli.argtypes import float_in, int_in
from magw.cli.kubeflags import add_kube_pod_flags


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lab", metavar="NAME", help="the running lab to measure (magw lab up --name NAME)")
    add_kube_pod_flags(p, "the benchmark")
    p.add_argument(
        "--from",
        dest="src",
        metavar="CLUSTER",
        help="the client cluster (default: the first; with --kubeconfig, the first kubeconfig's)",
    )
    p.add_argument(
        "--to",
        dest="dst",
        metavar="CLUSTER",
        action="append",
        help="a server cluster (repeatable; default: every other cluster)",
    )
    p.add_argument(
        "--between",
        choices=("gateways", "pods", "both"),
        default="both",
        help="gateways: pods on gateway nodes (the cable only); pods: pods on workers (default: both)",
    )
    p.add_argument("--json", action="store_true", help="one JSON document instead of the table")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    t = verbs.add_parser("throughput", help="iperf3 TCP throughput, client pod to server pod")
    _common(t)
    t.add_argument(
        "--duration", metavar="S", type=int_in(1, 60), default=5, help="seconds per test (1..60, default 5)"
    )
    t.add_argument(
        "--streams", metavar="N", type=int_in(1, 16), default=1, help="parallel TCP streams (1..16, default 1)"
    )
    lat = verbs.add_parser("latency", help="request/response round trips, one at a time, with percentiles")
    _common(lat)
    lat.add_argument(
        "--proto",
        choices=("udp", "tcp", "both"),
        default="both",
        help="udp: a datagram each way; tcp: a line each way on one connection (default: both)",
    )
    lat.add_argument(
        "--count", metavar="N", type=int_in(1, 10000), default=200, help="requests per test (1..10000, default 200)"
    )
    lat.add_argument(
        "--timeout",
        metavar="S",
        type=float_in(0.01, 5),
        default=1.0,
        help="seconds to wait for an answer before counting it lost (default 1)",
    )
    lat.add_argument(
        "--max-seconds",
        metavar="S",
        type=float_in(1, 300),
        default=30.0,
        help="a test stops after this long, whatever --count says (default 30)",
    )


def run(args: argparse.Namespace) -> int:
    from magw.lab.errors import LabError, LabInputError
    from magw.ops.bench import render
    from magw.ops.bench import run as bench
    from magw.ops.verify.labref import Addressing, open_lab

    if args.kubeconfig:
        return _run_kube(args)
    if not args.lab:
        raise UsageError("benchmark: --lab NAME or --kubeconfig (twice or more) is required")
    try:
        lab = open_lab(args.lab, verb="benchmark")
        ids = [c.id for c in lab.layout.clusters]
        src = args.src or ids[0]
        dsts = args.dst or [c for c in ids if c != src]
        for c in (src, *dsts):
            if c not in ids:
                raise LabInputError(f"benchmark: {c!r} is not a cluster of lab {lab.name} (clusters: {', '.join(ids)})")
        if src in dsts:
            raise LabInputError(f"benchmark: --from {src} and --to {src}: the pairs must cross clusters")
        placements = bench.PLACEMENTS if args.between == "both" else (args.between,)
        pairs = bench.plan_pairs(lab, Addressing(lab), [(src, d) for d in dsts], placements)
        if args.verb == "throughput":
            settings = {"duration": args.duration, "streams": args.streams}
            rows = bench.run_all(pairs, lambda p: bench.throughput(p, duration=args.duration, streams=args.streams))
        else:
            protos = _protos(args)
            settings = _latency_settings(args)
            rows = [
                bench.latency(p, proto=proto, count=args.count, timeout=args.timeout, max_seconds=args.max_seconds)
                for p in pairs
                for proto in protos
            ]
    except LabInputError as exc:
        raise UsageError(str(exc)) from None
    except LabError as exc:
        print(f"magw: error: benchmark: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(render.report_json(args.verb, lab.name, rows, settings), indent=2))
    else:
        sys.stdout.write(render.table(args.verb, rows))
    return 0 if all(r.ok for r in rows) else 1


def _protos(args: argparse.Namespace) -> tuple[str, ...]:
    return ("udp", "tcp") if args.proto == "both" else (args.proto,)


def _latency_settings(args: argparse.Namespace) -> dict[str, object]:
    return {"protos": list(_protos(args)), "count": args.count, "timeout": args.timeout,
            "max_seconds": args.max_seconds}  # fmt: skip


def _run_kube(args: argparse.Namespace) -> int:
    from magw.ops.bench import kube, render
    from magw.ops.verify.kubepods import KubeRunError, Settings
    from magw.sources.kube.client import KubeConfigError

    if args.lab:
        raise UsageError("benchmark: --lab and --kubeconfig: give one of them")
    if len(args.kubeconfig) < 2:
        raise UsageError("benchmark: --kubeconfig: give two or more clusters' kubeconfigs (client first)")
    if args.verb == "throughput":
        measure = kube.Measure(kind="throughput", duration=args.duration, streams=args.streams)
        settings: dict[str, object] = {"duration": args.duration, "streams": args.streams}
    else:
        measure = kube.Measure(kind="latency", protos=_protos(args), count=args.count, timeout=args.timeout,
                               max_seconds=args.max_seconds)  # fmt: skip
        settings = _latency_settings(args)
    pods = Settings(namespace=args.pod_namespace, magw_namespace=args.namespace, image=args.image,
                    pod_timeout=args.pod_timeout)  # fmt: skip
    placements = ("gateways", "pods") if args.between == "both" else (args.between,)
    try:
        clusters, rows = kube.run(args.kubeconfig, pods, measure, src=args.src, dsts=args.dst, placements=placements)
    except KubeRunError as exc:
        print(f"magw: error: benchmark: {exc}", file=sys.stderr)
        return 1
    except KubeConfigError as exc:
        raise UsageError(f"benchmark: {exc}") from None
    if args.json:
        print(json.dumps(render.report_json(args.verb, None, rows, settings, clusters=clusters), indent=2))
    else:
        sys.stdout.write(render.table(args.verb, rows))
    return 0 if all(r.ok for r in rows) else 1
