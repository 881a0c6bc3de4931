"""Benchmark: how late the event loop runs while a big sync or a broker rescan is under way.

Usage (as root): ``.venv/bin/python benchmarks/loop_lag.py [--routes 10000] [--files 1000] [--rounds 5]``

The health monitor shares its event loop with the reconciler and the file broker, and probes against
20 ms deadlines: whatever blocks the loop delays reading a reply, and a late reply counts as a miss. A
sampler task sleeps 5 ms in a loop and records each overshoot (the lag); the figures are its p50, p99
and maximum, in milliseconds, during:

* ``idle``: nothing else runs (the floor of this machine);
* ``route sync``: a ``Reconciler`` runs the initial sync of a worker whose plan holds ``--routes``
  routes (one remote cluster with that many /24 pod CIDRs), with the real netlink and nft drivers, into
  a throwaway namespace made here (a CNI bridge with the node's CNI address, a veth with its node IP);
* ``broker first scan``: a ``FileBroker`` reads a directory of ``--files`` Endpoint files (plus the
  Cluster and Node documents) for the first time;
* ``broker heartbeats``: ``--rounds`` rounds, 0.5 s apart, in which another process touches every
  Endpoint file (as each gateway's heartbeat does once a second) and gives one of them a new address.

Where the work runs in a worker thread, the loop still waits for the GIL: up to the interpreter's switch
interval (``--switch-interval``; ``magw-route-agent`` sets 1 ms) and for the cyclic garbage collector.
Run it on two versions of the code to compare them (docs/reconciler.md and docs/filebroker.md give the
figures before and after the blocking work moved off the loop). The namespace is deleted in ``finally``;
the broker directory is a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import structlog

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from magw.daemons.route_agent.node_driver import LazyDriver  # after sys.path
from magw.desired.node.planner import plan  # after sys.path
from magw.model import Cluster, Config, Endpoint, Node, Snapshot  # after sys.path
from magw.reconcile.driver import Driver  # after sys.path
from magw.reconcile.loop import Reconciler, SyncResult  # after sys.path
from magw.sources.file.broker import FileBroker  # after sys.path

TICK = 0.005  # seconds the sampler sleeps
NODE_IP, CNI_IP = "172.16.0.3", "10.0.3.1"
FIRST_REMOTE = int(IPv4Address("11.0.0.0"))
LIMIT = 600.0  # seconds: safety limit of every wait
MAX_ROUTES, MAX_FILES, MAX_ROUNDS = 200_000, 20_000, 50


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)


@contextmanager
def namespace() -> Iterator[str]:
    """A throwaway namespace holding what a node already has: its node IP on a veth, a CNI bridge."""
    name = f"magw-lag-{uuid.uuid4().hex[:10]}"
    sh("ip", "netns", "add", name)
    try:
        for cmd in (
            "link set lo up",
            "link add eth0 type veth peer name eth0p",
            f"addr add {NODE_IP}/24 dev eth0",
            "link set eth0 up",
            "link set eth0p up",
            "link add cni0 type bridge",
            f"addr add {CNI_IP}/24 dev cni0",
            "link set cni0 up",
        ):
            sh("ip", "-n", name, *cmd.split())
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, timeout=60)


# ----- the lag sampler ----------------------------------------------------------------------------


class Sampler:
    """A task that sleeps ``TICK`` in a loop and records how much later than asked it woke up (ms)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(TICK)
            self.lags.append((time.perf_counter() - started - TICK) * 1000)

    async def stop(self) -> list[float]:
        self._stop.set()
        await self._task
        return self.lags


def row(what: str, lags: list[float], note: str = "") -> None:
    if not lags:
        print(f"{what:<34} no samples", flush=True)
        return
    ordered = sorted(lags)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{what:<34} {len(lags):>7} {p50:>8.2f} {p99:>8.2f} {ordered[-1]:>8.2f}  {note}", flush=True)


async def until(condition: Callable[[], bool]) -> None:
    """Wait (bounded by LIMIT) until ``condition()`` holds, looking every 10 ms."""
    for _ in range(int(LIMIT * 100)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise SystemExit("a phase did not end within the safety limit")


async def measured(work: Callable[[], Awaitable[str]]) -> tuple[list[float], str]:
    sampler = Sampler()
    try:
        note = await work()
    finally:
        lags = await sampler.stop()
    return lags, note


# ----- (a) a big initial sync through the Reconciler ----------------------------------------------


def route_snapshot(routes: int) -> Snapshot:
    """Local cluster c0 (gateway gw1, worker w1), remote cluster c1 with ``routes`` /24 pod CIDRs."""
    cidrs = [IPv4Network((FIRST_REMOTE + (i << 8), 24)) for i in range(routes - 1)]
    return Snapshot(
        local_cluster="c0",
        clusters=[
            Cluster(id="c0", pod_cidrs=[IPv4Network("10.0.0.0/16")], service_cidrs=[IPv4Network("10.96.0.0/16")]),
            Cluster(id="c1", pod_cidrs=cidrs, service_cidrs=[IPv4Network("10.97.0.0/16")]),
        ],
        nodes=[
            Node(name="gw1", ip=IPv4Address("172.16.0.2"), cni_ip=IPv4Address("10.0.2.1"), gateway=True),
            Node(name="w1", ip=IPv4Address(NODE_IP), cni_ip=IPv4Address(CNI_IP)),
        ],
        endpoints=[
            Endpoint(cluster="c0", hostname="gw1", private_ip=IPv4Address("172.16.0.2")),
            Endpoint(cluster="c1", hostname="c1-gw1", private_ip=IPv4Address("172.17.0.2")),
        ],
        config=Config(),
    )


def kernel_driver(ns: str) -> Driver:
    from magw.drivers.netlink.driver import NetlinkDriver
    from magw.drivers.nft.driver import NftDriver
    from magw.drivers.node import NodeDriver

    return NodeDriver(netlink=NetlinkDriver(ns), nft=NftDriver(ns))


async def route_sync(ns: str, routes: int) -> str:
    snapshot = route_snapshot(routes)
    results: list[SyncResult] = []
    driver = LazyDriver(lambda: kernel_driver(ns), what="kernel")
    rec = Reconciler(
        driver, lambda: plan(snapshot, "w1"), resync_period=3600, name="lag", registry=None, on_sync=results.append
    )
    started = time.perf_counter()
    task = asyncio.create_task(rec.run())
    try:
        await until(lambda: bool(results))
    finally:
        rec.stop()
        await asyncio.wait_for(task, LIMIT)
    took = time.perf_counter() - started
    result = results[0]
    planned_routes = sum(1 for op in result.applied if getattr(op, "kind", None) == "routes")
    if not result.ok or planned_routes < routes:
        raise SystemExit(f"the sync did not converge: ok={result.ok}, routes created {planned_routes}, {result.error}")
    return f"{planned_routes} routes, {len(result.applied)} operations in {took:.2f} s"


# ----- (b) a broker directory of many Endpoint files ----------------------------------------------


def broker_directory(directory: Path, files: int) -> list[Path]:
    """Cluster and Node documents, and ``files`` Endpoint files of 100 remote clusters; returns the latter."""
    remotes = max(1, min(100, files))
    clusters = ["kind: Cluster\nid: c0\npod_cidrs: [10.0.0.0/16]\nservice_cidrs: [10.96.0.0/16]\n"]
    for r in range(1, remotes + 1):
        clusters.append(f"kind: Cluster\nid: c{r}\npod_cidrs: [11.{r}.0.0/16]\nservice_cidrs: [12.{r}.0.0/16]\n")
    (directory / "clusters.yaml").write_text("---\n".join(clusters))
    (directory / "nodes.yaml").write_text(f"kind: Node\ncluster: c0\nname: w1\nip: {NODE_IP}\ncni_ip: {CNI_IP}\n")
    paths = []
    for i in range(files):
        cluster = f"c{1 + i % remotes}"
        host = f"{cluster}-gw{i // remotes}"
        path = directory / f"endpoint-{cluster}@{host}.yaml"
        ip = IPv4Address(int(IPv4Address("172.20.0.0")) + i + 1)
        path.write_text(f"kind: Endpoint\ncluster: {cluster}\nhostname: {host}\nprivate_ip: {ip}\n")
        paths.append(path)
    return paths


def heartbeats(names: list[str], rounds: int) -> None:
    """In a process of its own (as the gateways are): touch every file, give one a new address; every 0.5 s."""
    paths = [Path(name) for name in names]
    for r in range(rounds):
        for path in paths:
            os.utime(path)
        changed = paths[r % len(paths)]
        lines = [line for line in changed.read_text().splitlines() if not line.startswith("private_ip:")]
        tmp = changed.with_name(f".{changed.name}.tmp")
        tmp.write_text("\n".join([*lines, f"private_ip: 172.30.{r}.{1 + r % 250}"]) + "\n")
        os.rename(tmp, changed)
        time.sleep(0.5)


async def broker_phases(directory: Path, files: int, rounds: int) -> None:
    paths = broker_directory(directory, files)
    broker = FileBroker(directory, local_cluster="c0", poll_interval=0.03)
    seen: list[object] = []
    broker.subscribe(seen.append)
    tasks: list[asyncio.Task[None]] = []
    try:

        async def first_scan() -> str:
            started = time.perf_counter()
            tasks.append(asyncio.create_task(broker.run()))  # after the sampler started: a blocked loop shows
            await until(lambda: bool(seen))
            return f"{files} endpoint files in {time.perf_counter() - started:.2f} s"

        lags, note = await measured(first_scan)
        row("broker first scan", lags, note)
        if broker.snapshot is None or len(broker.snapshot.endpoints) != files:
            raise SystemExit(f"the broker's snapshot does not hold the {files} endpoints")

        async def beats() -> str:
            before = len(seen)
            writer = multiprocessing.get_context("spawn").Process(
                target=heartbeats, args=([str(p) for p in paths], rounds)
            )
            writer.start()
            try:
                await until(lambda: not writer.is_alive())
            finally:
                writer.join(LIMIT)
            await asyncio.sleep(0.2)  # the last round's rescan
            return f"{rounds} rounds of {files} touches + 1 change; {len(seen) - before} snapshot changes"

        lags, note = await measured(beats)
        row("broker heartbeats", lags, note)
    finally:
        broker.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), LIMIT)


# ----- main ---------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    print(f"{'phase':<34} {'samples':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  what ran", flush=True)

    async def idle() -> str:
        await asyncio.sleep(1.0)
        return "1 s, nothing else"

    lags, note = await measured(idle)
    row("idle", lags, note)
    if args.routes:
        with namespace() as ns:
            lags, note = await measured(lambda: route_sync(ns, args.routes))
        row("route sync", lags, note)
    if args.files:
        with tempfile.TemporaryDirectory(prefix="magw-lag-") as directory:
            await broker_phases(Path(directory), args.files, args.rounds)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", type=int, default=10_000, help="routes of the synced plan (0: skip)")
    parser.add_argument("--files", type=int, default=1000, help="Endpoint files in the broker directory (0: skip)")
    parser.add_argument("--rounds", type=int, default=5, help="heartbeat rounds over the broker directory")
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=None,
        metavar="MS",
        help="sys.setswitchinterval in ms, as magw-route-agent sets it (default: Python's, 5 ms)",
    )
    args = parser.parse_args(argv)
    if not (args.routes == 0 or 2 <= args.routes <= MAX_ROUTES):
        parser.error(f"--routes: must be 0 or 2..{MAX_ROUTES}, got {args.routes}")
    if not 0 <= args.files <= MAX_FILES:
        parser.error(f"--files: must be 0..{MAX_FILES}, got {args.files}")
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds: must be 1..{MAX_ROUNDS}, got {args.rounds}")
    if args.switch_interval is not None and not 0.1 <= args.switch_interval <= 100:
        parser.error(f"--switch-interval: must be 0.1..100 ms, got {args.switch_interval}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.routes and os.geteuid() != 0:
        print("needs root for --routes (creates a network namespace); --routes 0 runs the broker part only")
        return 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval / 1000)
    print(f"GIL switch interval {sys.getswitchinterval() * 1000:g} ms", flush=True)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
