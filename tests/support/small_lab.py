"""The smallest lab that shows the operator's view (``magw show``, ``magw top``): east and west, two gateways
(so a group spreads over two paths) and one worker each, one pod per node; always taken down."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from magw.lab.build.state import LabState
from magw.lab.spec.layout import LabLayout
from magw.lab.spec.topology import parse_topology
from tests.support.labkit import running_lab

WAIT = 60.0  # generous: a loaded 2-CPU machine
TOPOLOGY = {"clusters": [{"id": c, "workers": 1, "pods_per_node": 1} for c in ("east", "west")]}


@contextlib.contextmanager
def small_lab(*, control_plane: str = "file") -> Iterator[tuple[LabLayout, LabState]]:
    topo = parse_topology(TOPOLOGY, source="small_lab")
    with running_lab(topo, daemons=True, control_plane=control_plane, wait_timeout=120.0) as lab:
        yield lab


def poll_for(what: str, fetch: Callable[[], Any], ok: Callable[[Any], bool], limit: float = WAIT) -> Any:
    """``fetch()`` again until ``ok`` of it (bounded); fail with what was last fetched."""
    deadline = time.monotonic() + limit
    while True:
        value = fetch()
        if ok(value):
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not reached within {limit:g} s; last:\n{str(value)[:3000]}")
        time.sleep(0.5)
