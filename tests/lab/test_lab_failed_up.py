"""A real ``up`` that fails (its wait for the gateways' Endpoints bounded to 10 ms) removes the lab as before but
keeps its files: the error's "see .../logs" names a directory that exists and holds every daemon's log.

Kernel test: the lab has a unique random name; it and the kept copy are removed afterwards, also on failure.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build.procs import ProcRecord
from magw.lab.errors import LabError
from magw.lab.spec import naming
from magw.lab.spec.topology import parse_topology
from tests.support.labkit import NOTHING_LEFT, leftovers, unique_name

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

SMALL = {"clusters": [{"id": "east", "gateways": 1, "workers": 1}, {"id": "west", "gateways": 1, "workers": 0}]}


def test_a_failed_up_keeps_the_logs_it_points_to() -> None:
    """LabError "(see <kept>/logs)": that directory, outside the lab's state directory, holds the route agents'
    and gateways' logs and the state file; no namespace, process or state directory of the lab is left."""
    name = unique_name()
    kept: Path | None = None
    lines: list[str] = []
    try:
        with pytest.raises(LabError) as info:
            build.up(parse_topology(SMALL), name=name, wait_timeout=0.01, progress=lines.append)
        found = re.search(r"see (\S+)/logs\)", str(info.value))
        assert found is not None, str(info.value)
        kept = Path(found.group(1))
        assert kept.name.startswith(f"magw-lab-{name}-failed-") and naming.STATE_ROOT not in kept.parents
        logs = {p.name for p in (kept / "logs").iterdir()}
        assert {"route-agent-east-gw1.log", "route-agent-east-w1.log", "gateway-east-gw1.log"} <= logs, logs
        assert f"lab {name}'s logs and status files are kept in {kept}" in lines
        records = [ProcRecord.from_doc(p) for p in json.loads((kept / "state.json").read_text())["processes"]]
        assert records and leftovers(name, records) == NOTHING_LEFT
    finally:
        build.down(name)
        if kept is not None:
            shutil.rmtree(kept, ignore_errors=True)
