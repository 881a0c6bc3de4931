"""A relist (after a 410, a restarted API server) maps again only the objects that changed.

The source's reflectors are fed as a watch would (``benchmarks/kube_source_scale.py``'s cluster, 300 pods): a
relist that brings every pod back with its resourceVersion, one of them changed, maps and decides that one pod
only, and the snapshot shows the change. Objects without a resourceVersion are mapped again every time.
"""

from __future__ import annotations

import copy
from typing import Any

from benchmarks.kube_source_scale import cluster_objects, fed_source
from magw.sources.kube.reflector import WatchEvent, key_of
from magw.sources.kube.source import KubeSource


def _relist(source: KubeSource, pods: list[dict[str, Any]]) -> None:
    reflector = source.reflectors["Pod"]
    reflector.objects = {key_of(p): p for p in pods}
    reflector.on_change([WatchEvent(type="SYNCED", key=("", ""), obj=None)])


def _ip_of(source: KubeSource, name: str) -> str:
    assert source.snapshot is not None
    return next(str(p.ip) for p in source.snapshot.globalnet.pods if p.name == name)


def test_a_relist_maps_again_only_the_pods_whose_version_moved() -> None:
    objects = cluster_objects(300)
    source = fed_source(objects)
    assert source.scan()
    items = source._assembly.items
    decided = items.decided
    pods = copy.deepcopy(objects["Pod"])
    pods[7]["status"]["podIP"] = "10.0.9.9"
    pods[7]["metadata"]["resourceVersion"] = "100000"
    del pods[8]  # gone while the watch was down
    _relist(source, pods)
    assert source.scan()
    assert items.decided - decided == 2  # p7 changed, p8 gone; the other 298 not mapped or decided again
    assert _ip_of(source, "p7") == "10.0.9.9"
    assert source.snapshot is not None and len(source.snapshot.globalnet.pods) == 299


def test_objects_without_a_version_are_mapped_again() -> None:
    objects = cluster_objects(50)
    for obj in objects["Pod"]:
        del obj["metadata"]["resourceVersion"]
    source = fed_source(objects)
    source.scan()
    decided = source._assembly.items.decided
    _relist(source, copy.deepcopy(objects["Pod"]))
    assert not source.scan()  # the same snapshot
    assert source._assembly.items.decided - decided == 50
