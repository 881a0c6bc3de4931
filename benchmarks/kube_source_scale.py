"""The Kubernetes source at 100k pods: a pod event to the kernel, the source's assembly included (issue 33).

One ``KubeSource`` (the daemons' own class) is fed a Globalnet cluster as objects, without an API server: its
reflectors get the objects and call the source as a watch would (a complete list, then one ADDED or DELETED
event per pod). The cluster: ``east`` (global CIDR 242.1.0.0/16) with gateway e-gw1 and worker e-w1, ``west``,
the namespace ``shop`` with N pods on e-w1, and the namespace GlobalEgressIP ``shop/all`` whose status gives
e-gw1 two global IPs, so every pod is one element of e-gw1's ``gn_egress`` map.

Per event, alternately a new pod and the removal of one: the source's pass (``scan()``: the incremental assembly,
``magw.sources.file.incremental``), the gateway's plan with its memo, the diff against what the kernel holds,
the apply to a namespace's nftables. Printed: p50/p99 of each and of the whole (event to kernel); beside it,
every ``--full-every``-th event the same documents assembled as a whole by ``assemble()`` with a warm
``SnapshotParser``, which is what the source did before (timed: the assembly, the last good versions and the
comparison with the last snapshot; not the sort of 100k slots it also did), and both snapshots must be equal.

With ``--audit-beside``, a second thread at nice 19 observes the namespace's nftables with a driver of its own
over and over while the events run, as the reconciler's periodic audit does once per resync period (here the
worst case: always): the figures then say what an event pays when it meets the audit. As in the reconciler, each
event is synced inside ``gate.busy()`` and the audit reads as the gate's reader, stepping aside meanwhile
(``magw.util.courtesy``); ``--gate both`` (the default with ``--audit-beside``) runs the churn twice in one run,
without the gate (the audit shares the GIL with the events, as before) and with it. ``--gap MS`` waits that long
between events (default 0: back to back, the worst case for the audit, which then gets only its grants). The
whole assembly of every ``--full-every``-th event runs inside ``gate.busy()`` too: without it, an audit let loose
beside 2 s of allocation-heavy work made the collections that followed hit the events (p99 285-329 ms with the
gate, measured 2026-12-01).

Run as root: ``.venv/bin/python benchmarks/kube_source_scale.py [--pods 100000] [--events 1000]
[--audit-beside [--gate both|on|off] [--gap MS]]``. The namespace is deleted in ``finally``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.globalnet_scale import namespace  # after sys.path
from magw.desired.node.memo import PlanMemo  # after sys.path
from magw.desired.node.planner import plan  # after sys.path
from magw.drivers.nft import NftDriver  # after sys.path
from magw.model import Snapshot  # after sys.path
from magw.reconcile.changeset import NftChange  # after sys.path
from magw.reconcile.diff import nft_changes  # after sys.path
from magw.snapshot.cache import SnapshotParser  # after sys.path
from magw.sources.file.assemble import Ident, assemble  # after sys.path
from magw.sources.file.documents import Document  # after sys.path
from magw.sources.kube import mapping  # after sys.path
from magw.sources.kube.reflector import WatchEvent, key_of  # after sys.path
from magw.sources.kube.source import KubeSource  # after sys.path
from magw.util.courtesy import Gate  # after sys.path
from magw.util.logsetup import configure_logging  # after sys.path

NS = "submariner-operator"
NODE = "e-gw1"
FIRST_POD = int(IPv4Address("10.0.128.0"))
Obj = dict[str, Any]


_VERSIONS = itertools.count(1)


def _obj(kind: str, version: str, name: str, namespace: str | None = None, **rest: Any) -> Obj:
    """An object as the API hands it out: with a resourceVersion of its own."""
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(next(_VERSIONS))}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": version, "kind": kind, "metadata": meta, **rest}


def _node(name: str, ip: str, cni: str, *, gateway: bool) -> Obj:
    obj = _obj("Node", "v1", name, status={"addresses": [{"type": "InternalIP", "address": ip}]})
    obj["metadata"]["annotations"] = {mapping.CNI_IP_ANNOTATION: cni}
    if gateway:
        obj["metadata"]["labels"] = {mapping.GATEWAY_LABEL: "true"}
    return obj


def pod(index: int) -> Obj:
    ip = str(IPv4Address(FIRST_POD + index))
    return _obj("Pod", "v1", f"p{index}", "shop", spec={"nodeName": "e-w1"}, status={"phase": "Running", "podIP": ip})


def cluster_objects(pods: int) -> dict[str, list[Obj]]:
    """The objects of each kind the source watches."""
    egress_ips = ["242.1.0.7", "242.1.0.8"]
    status = {"allocatedIPs": egress_ips, "gateways": [{"node": NODE, "allocatedIPs": egress_ips}]}
    clusters = [
        _obj("Cluster", "submariner.io/v1", cid, NS,
             spec={"cluster_id": cid, "cluster_cidr": ["10.0.0.0/16"], "service_cidr": ["100.0.0.0/16"],
                   "global_cidr": [f"242.{k}.0.0/16"]})
        for k, cid in ((1, "east"), (2, "west"))
    ]  # fmt: skip
    endpoints = [
        _obj("Endpoint", "submariner.io/v1", f"{cid}-{host}", NS,
             spec={"cluster_id": cid, "hostname": host, "private_ip": ip, "backend": "vxlan",
                   "allocated_ips": [f"242.{k}.0.1", f"242.{k}.0.2"]})
        for k, cid, host, ip in ((1, "east", NODE, "172.17.0.11"), (2, "west", "w-gw1", "172.18.0.11"))
    ]  # fmt: skip
    return {
        "Submariner": [_obj("Submariner", "submariner.io/v1alpha1", mapping.SUBMARINER, NS,
                            spec={"multiActiveGatewayEnabled": True})],
        "ConfigMap": [_obj("ConfigMap", "v1", mapping.CONFIG_MAP, NS, data={"strategy": "resilient"})],
        "Cluster": clusters,
        "Endpoint": endpoints,
        "Node": [_node(NODE, "172.17.0.11", "10.0.1.1", gateway=True),
                 _node("e-w1", "172.17.0.101", "10.0.4.1", gateway=False)],
        "Namespace": [_obj("Namespace", "v1", "shop")],
        "Pod": [pod(i) for i in range(pods)],
        "GlobalEgressIP": [_obj("GlobalEgressIP", "submariner.io/v1", "all", "shop", spec={"numberOfIPs": 2},
                                status=status)],
    }  # fmt: skip


def fed_source(objects: dict[str, list[Obj]]) -> KubeSource:
    """A source whose reflectors hold ``objects``, as after their first complete list."""
    source = KubeSource(object(), local_cluster="east", namespace=NS, globalnet=True)  # type: ignore[arg-type]
    for kind, reflector in source.reflectors.items():
        reflector.objects = {key_of(o): o for o in objects.get(kind, [])}
        reflector.synced = True
        reflector.on_change([WatchEvent(type="SYNCED", key=("", ""), obj=None)])
    return source


def event(source: KubeSource, kind: str, obj: Obj, *, deleted: bool) -> None:
    """What a watch does with one ADDED or DELETED event."""
    reflector, key = source.reflectors[kind], key_of(obj)
    if deleted:
        reflector.objects.pop(key, None)
    else:
        reflector.objects[key] = obj
    reflector.on_change([WatchEvent(type="DELETED" if deleted else "ADDED", key=key, obj=None if deleted else obj)])


class WholeAssembly:
    """The source's assembly before: every document through ``assemble()`` with a warm parse cache."""

    def __init__(self) -> None:
        self.parser = SnapshotParser()
        self.last_good: dict[Ident, Document] = {}
        self.snapshot: Snapshot | None = None

    def __call__(self, docs: list[Document]) -> Snapshot | None:
        done = assemble("east", docs, self.last_good, parse=self.parser)
        if done.snapshot is not None:
            self.last_good = {d.ident: d for d in done.accepted}
        _ = done.snapshot != self.snapshot
        self.snapshot = done.snapshot
        return done.snapshot


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


class Collections:
    """Python's cyclic collections while the events run (``gc.callbacks``): when, which generation, how long."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.spans.append((self._start, time.perf_counter(), info["generation"]))

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def report(self, events: list[tuple[float, float]]) -> None:
        full = [end - start for start, end, generation in self.spans if generation == 2]
        met = [(a, b) for a, b in events if any(s < b and e > a for s, e, g in self.spans if g == 2)]
        worst = max(full) * 1000 if full else 0.0
        print(f"gc     {len(full)} full collections while the events ran (longest {worst:.0f} ms); "
              f"{len(met)} events met one")  # fmt: skip


def _row(name: str, values: list[float]) -> None:
    q = statistics.quantiles(values, n=100) if len(values) > 1 else [values[0]] * 99
    print(f"event  {name:<28} p50={q[49] * 1000:8.1f} ms  p99={q[98] * 1000:8.1f} ms  ({len(values)} events)")


class Auditor:
    """Observes the namespace's nftables in a thread of its own at nice 19 until stopped (the reconciler's audit,
    always on); counts the observations and their time."""

    def __init__(self, ns: str, gate: Gate | None) -> None:
        self.ns = ns
        self.gate = gate
        self.observed: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-beside", daemon=True)

    def _run(self) -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        reading = self.gate.reader() if self.gate is not None else contextlib.nullcontext()
        with reading, NftDriver(self.ns) as driver:
            while not self._stop.is_set() and len(self.observed) < 10_000:
                start = time.perf_counter()
                driver.observe()
                self.observed.append(time.perf_counter() - start)

    def __enter__(self) -> Auditor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


def churn(
    pods: int,
    events: int,
    full_every: int,
    *,
    audit_beside: bool = False,
    gate: Gate | None = None,
    gap: float = 0.0,
    worst_events: int = 0,
) -> None:
    objects = cluster_objects(pods)
    source = fed_source(objects)
    _, first = _timed(source.scan)
    snapshot = source.snapshot
    if snapshot is None or len(snapshot.globalnet.pods) != pods:
        raise SystemExit(f"the source's first snapshot is not the cluster: {source.problem_files()}")
    whole = WholeAssembly()
    _, whole_first = _timed(lambda: whole(source.documents()))
    memo = PlanMemo()
    known = plan(snapshot, NODE, memo=memo)
    assert known.nft is not None
    elements = next(len(m.elements) for m in known.nft.maps if m.name == "gn_egress")
    if elements != pods:
        raise SystemExit(f"gn_egress has {elements} elements, not one per pod ({pods}): not the planned cluster")
    print(f"first  source's first pass {first * 1000:.0f} ms; the whole assembly's first {whole_first * 1000:.0f} ms")
    times: dict[str, list[float]] = {k: [] for k in ("source", "plan", "diff", "apply", "total", "whole")}
    live, next_pod = list(range(pods)), pods
    with namespace() as ns, NftDriver(ns) as driver, contextlib.ExitStack() as stack:
        driver.apply([NftChange(family="ip", name="magw", table=known.nft)])
        auditor = stack.enter_context(Auditor(ns, gate)) if audit_beside else None
        busy = gate.busy if gate is not None else contextlib.nullcontext
        collections = stack.enter_context(Collections())
        spans: list[tuple[float, float]] = []
        for i in range(events):
            if gap and i:
                time.sleep(gap)
            with busy():  # the event is synced: an audit with the gate steps aside
                t0 = time.perf_counter()
                if i % 2 == 0:
                    event(source, "Pod", pod(next_pod), deleted=False)
                    live.append(next_pod)
                    next_pod += 1
                else:
                    event(source, "Pod", pod(live.pop(i % len(live))), deleted=True)
                source.scan()
                t1 = time.perf_counter()
                assert source.snapshot is not None
                want = plan(source.snapshot, NODE, memo=memo)
                t2 = time.perf_counter()
                changes = nft_changes(want.nft, known.nft)
                t3 = time.perf_counter()
                result = driver.apply(list(changes))
                t4 = time.perf_counter()
                assert result.ok, [f.describe() for f in result.failed]
                known = want
                for name, value in (("source", t1 - t0), ("plan", t2 - t1), ("diff", t3 - t2), ("apply", t4 - t3)):
                    times[name].append(value)
                times["total"].append(t4 - t0)
                spans.append((t0, t4))
            if i % full_every == 0:
                docs = source.documents()
                with busy():  # seconds of allocation-heavy work on this thread: the audit steps aside for it too
                    baseline, took = _timed(lambda docs=docs: whole(docs))  # type: ignore[misc]
                times["whole"].append(took)
                assert baseline == source.snapshot, f"event {i}: the incremental assembly differs from the whole one"
        final = driver.observe()
        if auditor is not None:
            auditor.__exit__()
            took = statistics.median(auditor.observed) if auditor.observed else 0.0
            print(f"audit  {len(auditor.observed)} observations of the table beside the events, median {took:.2f} s")
            if gate is not None:
                print(f"audit  stepped aside {gate.waits} times, {gate.waited:.1f} s in all")
        collections.report(spans)
        if worst_events:
            worst = sorted(range(len(spans)), key=lambda k: spans[k][0] - spans[k][1])[:worst_events]
            for k in worst:
                a, b = spans[k]
                met = [(g, round((min(e, b) - max(c, a)) * 1000)) for c, e, g in collections.spans if c < b and e > a]
                steps = ", ".join(f"{n} {times[n][k] * 1000:.0f}" for n in ("source", "plan", "diff", "apply"))
                print(f"worst  event {k}: {(b - a) * 1000:.0f} ms ({steps}); collections met (generation, ms): {met}")
    assert final == known.nft, "after the churn the kernel's table differs from the plan"
    print(f"churn  pods={pods}  events={events}  (a new pod and the removal of one, alternately)")
    names = {"source": "source (event to snapshot)", "plan": "plan (with memo)", "diff": "diff", "apply": "apply",
             "total": "event -> kernel", "whole": f"whole assembly (1 in {full_every})"}  # fmt: skip
    for key, name in names.items():
        _row(name, times[key])
    ratio = statistics.median(times["whole"]) / statistics.median(times["source"])
    print(f"churn  the source's pass vs the whole assembly: {ratio:.0f}x faster (medians)")

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=100_000)
    p.add_argument("--events", type=int, default=1_000)
    p.add_argument("--full-every", type=int, default=20, help="assemble every Nth event as a whole too")
    p.add_argument("--audit-beside", action="store_true", help="observe the table in a nice-19 thread meanwhile")
    p.add_argument("--gate", choices=("both", "on", "off"), default="both",
                   help="with --audit-beside: the audit steps aside while an event syncs (on), not (off), or "
                   "one churn of each in this run (both, the default)")  # fmt: skip
    p.add_argument("--gap", type=float, default=0.0, metavar="MS", help="milliseconds between events (default 0)")
    p.add_argument("--worst", type=int, default=0, metavar="N",
                   help="print the N slowest events: their steps and the collections they met")  # fmt: skip
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("kube_source_scale: run as root (a network namespace)", file=sys.stderr)
        return 2
    configure_logging("console", "warning")  # one line per apply would drown the figures
    print(json.dumps({"load": os.getloadavg()}))
    if not 0 <= args.gap <= 1000:
        p.error("--gap must be 0..1000 ms")
    gates = {"both": (False, True), "on": (True,), "off": (False,)}[args.gate] if args.audit_beside else (False,)
    for gated in gates:
        if args.audit_beside:
            print(f"=== the audit beside the events, {'with' if gated else 'without'} the gate (gap {args.gap} ms)")
        churn(args.pods, args.events, args.full_every, audit_beside=args.audit_beside,
              gate=Gate() if gated else None, gap=args.gap / 1000, worst_events=args.worst)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
