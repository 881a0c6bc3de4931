"""Benchmark: the file broker's scans under 1k / 10k / 100k CIDRs, with and without the parse cache.

Run: ``.venv/bin/python benchmarks/broker_scale.py [--routes 1000 10000 100000] [--repeat 3] [--no-uncached]``.
No root, no namespace: everything is in process on a temporary directory.

The directory is ``event_latency.write_broker``'s: cluster ``east`` (two gateways, a worker) and 100 remote
clusters sharing the CIDRs, one Endpoint each. For each size, each repetition on a fresh directory and a fresh
broker times ``FileBroker.scan()``:

- ``initial``: the first scan;
- ``gateway``: the rescan after a third east gateway is added (its Node in ``nodes-east.yaml``, its Endpoint);
- ``bad``: the rescan after an Endpoint whose host is not a node appears (the assembly's walk);
- ``bad-cold``: a first scan of a new broker with that bad Endpoint already there.

With ``--subnets`` every remote Endpoint publishes its cluster's CIDRs as subnets, as Submariner's do (the
subnet check then sees every CIDR again).

``cached`` is the default broker (``magw.snapshot.cache.SnapshotParser``), ``plain`` one given plain
``parse_snapshot`` (every assembly parses everything). Medians of ``--repeat``, in seconds; nothing is
asserted. The figures depend on the machine; compare the columns, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import event_latency as ev  # the broker layout is that benchmark's

from magw.snapshot.load import parse_snapshot
from magw.sources.file.assemble import Parse
from magw.sources.file.broker import FileBroker

PHASES = ("initial", "gateway", "bad", "bad-cold")
BAD_HOST = "e-bad"


def _timed(scan: Callable[[], object]) -> float:
    started = time.perf_counter()
    scan()
    return time.perf_counter() - started


def _broker(directory: Path, parse: Parse | None) -> FileBroker:
    return FileBroker(directory, local_cluster="east", parse=parse)


def add_subnets(directory: Path) -> None:
    """Each remote Endpoint document gets its cluster's CIDRs as ``subnets``."""
    docs = yaml.safe_load_all((directory / "clusterset.yaml").read_text())
    clusters = {d["id"]: d for d in docs if d["kind"] == "Cluster"}
    for path in sorted(directory.glob("endpoint-c*@*.yaml")):
        doc = yaml.safe_load(path.read_text())
        doc["subnets"] = clusters[doc["cluster"]]["pod_cidrs"] + clusters[doc["cluster"]]["service_cidrs"]
        ev.write_atomic(path, yaml.safe_dump(doc))


def one_run(routes: int, parse: Parse | None, *, subnets: bool = False) -> dict[str, float]:
    """The four timings on a fresh directory; the directory is removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="magw-broker-scale-"))
    try:
        ev.write_broker(directory, routes)
        if subnets:
            add_subnets(directory)
        broker = _broker(directory, parse)
        out = {"initial": _timed(broker.scan)}
        ev.write_atomic(directory / "nodes-east.yaml", ev.nodes_text([*ev.EAST_NODES, ev.NEW_GW, ev.WORKER]))
        gw, ip = ev.NEW_GW[0], ev.NEW_GW[1]
        ev.write_atomic(directory / f"endpoint-east@{gw}.yaml", ev.endpoint_text("east", gw, ip))
        out["gateway"] = _timed(broker.scan)
        ev.write_atomic(directory / f"endpoint-east@{BAD_HOST}.yaml", ev.endpoint_text("east", BAD_HOST, "172.18.0.99"))
        out["bad"] = _timed(broker.scan)
        if broker.problem_files() != {f"endpoint-east@{BAD_HOST}.yaml"}:
            raise RuntimeError(f"the bad Endpoint was not the one problem: {sorted(broker.problem_files())}")
        out["bad-cold"] = _timed(_broker(directory, parse).scan)
        return out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-uncached", action="store_true", help="skip the broker with plain parse_snapshot")
    parser.add_argument("--subnets", action="store_true", help="remote Endpoints publish their cluster's CIDRs")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # the bad document's warning
    variants: list[tuple[str, Parse | None]] = [("cached", None)]
    if not args.no_uncached:
        variants.append(("plain", parse_snapshot))
    one_run(min(args.routes), None)  # warm-up, not shown: the first run of a process pays imports and caches
    print(f"{'CIDRs':>7} {'parser':<7} " + " ".join(f"{p:>9}" for p in PHASES) + "   (median s)")
    for routes in args.routes:
        for name, parse in variants:
            runs = [one_run(routes, parse, subnets=args.subnets) for _ in range(args.repeat)]
            medians = [statistics.median(r[p] for r in runs) for p in PHASES]
            print(f"{routes:>7} {name:<7} " + " ".join(f"{m:>9.3f}" for m in medians), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
