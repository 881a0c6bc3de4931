"""Benchmark: an initial sync of N routes (observe, diff, apply) with magw vs ``ip -batch``, in throwaway namespaces.

For each size and variant, each tool installs the same routes into a fresh namespace (a
veth pair, three nexthop objects and a group already in place, not timed):

* ``group``: ``route add DST nhid G table 100 proto 157 metric 100``
* ``inline``: ``route add DST via 10.0.0.2 dev va table 100 proto 157 metric 100``

Then, under the routes of the last repetition of the ``group`` variant: the time of a no-op
``observe()`` (dump and parse everything we own) and of a failover (one group replace that
drops a gateway), ours against ``ip nexthop replace``.

Run as root: ``.venv/bin/python benchmarks/apply.py [--sizes 1000,10000,100000]``.
Prints one row per measurement with the ratio ours / ip. The best of ``--repeat`` runs is
kept for each tool. Every namespace is deleted in ``finally``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address, IPv4Network

import structlog

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from magw.desired.state import DesiredState, GroupMember, NexthopGroup, Route, RouteNexthop  # after sys.path
from magw.drivers.netlink.fastpath import RouteNexthopIO  # after sys.path
from magw.drivers.netlink.rawsock import RawNetlink  # after sys.path
from magw.reconcile.changeset import Op  # after sys.path
from magw.reconcile.diff import diff  # after sys.path

NH_IDS = (0x61000002, 0x61000003, 0x61000004)
GROUP_ID = 0x63000001
BUCKETS = 128
MAX_ROUTES = 200_000
FIRST_DST = int(IPv4Address("11.0.0.0"))
TIMEOUT = 600


def sh(*cmd: str, stdin: str | None = None) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, input=stdin, timeout=TIMEOUT)


@contextmanager
def namespace() -> Iterator[str]:
    """A fresh namespace with va/vb up, 10.0.0.1/24, nexthops .2/.3/.4 and a resilient group of them."""
    name = f"magwb-{uuid.uuid4().hex[:10]}"
    sh("ip", "netns", "add", name)
    try:
        setup = [
            "link add va type veth peer name vb",
            "link set va up",
            "link set vb up",
            "link set lo up",
            "addr add 10.0.0.1/24 dev va",
            *(f"nexthop add id {nh} via 10.0.0.{i + 2} dev va" for i, nh in enumerate(NH_IDS)),
            f"nexthop add id {GROUP_ID} group {'/'.join(map(str, NH_IDS))} type resilient buckets {BUCKETS}",
        ]
        sh("ip", "-n", name, "-batch", "-", stdin="\n".join(setup) + "\n")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=TIMEOUT)


def dsts(count: int) -> list[IPv4Network]:
    return [IPv4Network((FIRST_DST + i, 32)) for i in range(count)]


def routes_for(variant: str, count: int) -> list[Route]:
    if variant == "group":
        return [Route(table=100, dst=d, metric=100, nhid=GROUP_ID) for d in dsts(count)]
    path = (RouteNexthop(via=IPv4Address("10.0.0.2"), dev="va"),)
    return [Route(table=100, dst=d, metric=100, nexthops=path) for d in dsts(count)]


def batch_text(variant: str, count: int) -> str:
    how = f"nhid {GROUP_ID}" if variant == "group" else "via 10.0.0.2 dev va"
    return "".join(f"route add {d} {how} table 100 proto 157 metric 100\n" for d in dsts(count))


def time_ip_batch(variant: str, count: int) -> float:
    text = batch_text(variant, count)
    with namespace() as ns, tempfile.NamedTemporaryFile("w", suffix=".batch") as f:
        f.write(text)
        f.flush()
        started = time.perf_counter()
        sh("ip", "-n", ns, "-batch", f.name)
        return time.perf_counter() - started


def time_ours(variant: str, count: int, after: Callable[[str, RouteNexthopIO], None] | None = None) -> float:
    """A whole initial sync of the routes: observe what we own, diff against the desired state, apply."""
    routes = routes_for(variant, count)
    with namespace() as ns, RawNetlink(ns) as sock:
        io = RouteNexthopIO(sock)
        nexthops, groups, _ = io.observe()  # the set-up's nexthops/group are desired too (not timed)
        desired = DesiredState(nexthops=nexthops, groups=groups, routes=routes)
        started = time.perf_counter()
        observed_nh, observed_groups, observed_routes = io.observe()
        observed = DesiredState(nexthops=observed_nh, groups=observed_groups, routes=observed_routes)
        changes = diff(desired, observed)
        failures = io.apply(changes.ops)
        took = time.perf_counter() - started
        if len(changes.ops) != count:
            raise SystemExit(f"the diff has {len(changes.ops)} operations, expected {count} route creates")
        if failures:
            raise SystemExit(f"apply failed: {failures[0].describe()} (+{len(failures) - 1} more)")
        if after is not None:
            after(ns, io)
        return took


def best(repeat: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(repeat))


def row(what: str, ip_s: float, ours_s: float) -> None:
    print(f"{what:<42} {ip_s * 1000:>10.1f} {ours_s * 1000:>10.1f} {ours_s / ip_s:>8.2f}", flush=True)


def failover_rows(count: int, repeat: int) -> None:
    """No-op observe and one gateway swap under ``count`` routes, ours vs iproute2."""
    results: dict[str, list[float]] = {"observe": [], "swap": [], "ip_show": [], "ip_swap": []}

    def measure(ns: str, io: RouteNexthopIO) -> None:
        started = time.perf_counter()
        observed = io.observe()[2]
        results["observe"].append(time.perf_counter() - started)
        if len(observed) != count:
            raise SystemExit(f"observe saw {len(observed)} routes, expected {count}")
        started = time.perf_counter()
        sh("ip", "-n", ns, "route", "show", "table", "100", "proto", "157")
        results["ip_show"].append(time.perf_counter() - started)
        members = tuple(GroupMember(id=i) for i in NH_IDS)
        for kept in (members[::2], members):  # drop the middle gateway, then bring it back
            group = NexthopGroup(id=GROUP_ID, members=kept, type="resilient", buckets=BUCKETS, idle_timer=120)
            started = time.perf_counter()
            failures = io.apply([Op(verb="replace", kind="groups", obj=group)])
            results["swap"].append(time.perf_counter() - started)
            if failures:
                raise SystemExit(failures[0].describe())
        for kept_ids in (NH_IDS[::2], NH_IDS):
            started = time.perf_counter()
            sh(
                "ip",
                "-n",
                ns,
                "nexthop",
                "replace",
                "id",
                str(GROUP_ID),
                "group",
                "/".join(map(str, kept_ids)),
                "type",
                "resilient",
                "buckets",
                str(BUCKETS),
            )
            results["ip_swap"].append(time.perf_counter() - started)

    for _ in range(repeat):
        time_ours("group", count, after=measure)
    row(f"no-op observe, {count} routes (ip route show)", min(results["ip_show"]), min(results["observe"]))
    row(f"swap a gateway, {count} routes (ip nexthop)", min(results["ip_swap"]), min(results["swap"]))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="route counts, comma separated")
    parser.add_argument("--variants", default="group,inline", help="route shapes: group (nhid) and/or inline")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept")
    parser.add_argument("--failover-routes", type=int, default=10000, help="routes under the observe/swap figures")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.variants = [v for v in args.variants.split(",") if v]
    for size in [*args.sizes, args.failover_routes]:
        if not 1 <= size <= MAX_ROUTES:
            parser.error(f"--sizes/--failover-routes: each must be 1..{MAX_ROUTES}, got {size}")
    if not set(args.variants) <= {"group", "inline"}:
        parser.error(f"--variants: only group and inline exist, got {','.join(args.variants)}")
    if not 1 <= args.repeat <= 20:
        parser.error(f"--repeat: must be 1..20, got {args.repeat}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (creates network namespaces)", file=sys.stderr)
        return 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up only
    print(f"{'measurement':<42} {'ip ms':>10} {'ours ms':>10} {'ratio':>8}")
    for count in args.sizes:
        for variant in args.variants:
            ip_s = best(args.repeat, lambda: time_ip_batch(variant, count))  # noqa: B023  # called at once
            ours_s = best(args.repeat, lambda: time_ours(variant, count))  # noqa: B023  # called at once
            row(f"initial sync, {count} routes, {variant}", ip_s, ours_s)
    failover_rows(args.failover_routes, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
