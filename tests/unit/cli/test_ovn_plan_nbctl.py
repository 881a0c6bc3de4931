"""``magw ovn plan --nbctl`` prints one ``ovn-nbctl`` line that can be pasted as is into a shell (docs/ovn.md).

The line finds the Load_Balancer_Group by name itself (no placeholder to fill in). The test pastes it into bash
against a real NB with OVN-Kubernetes' rows; ``ovn-nbctl`` is the oracle for the routers' group.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.ovn_fixture import OvnDbs, build_ovnk, nbctl
from tests.support.paths import EXAMPLES, REPO

pytestmark = pytest.mark.ovn

SEED = str(EXAMPLES / "seed-east.yaml")  # east: gateways e-gw1 and e-gw2, one remote cluster (west)


def _magw(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "magw.cli.main", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_printed_line_runs_as_pasted_and_creates_the_plan(ovn_dbs: OvnDbs) -> None:
    """Pasted into bash (the NB named by OVN_NB_DB, as an operator's shell has it), the line exits 0; each of our
    gateway routers then carries OVN-K's clusterLBGroup, and ``magw ovn show`` lists exactly the planned rows."""
    build_ovnk(ovn_dbs, nodes=("e-w1", "e-gw1", "e-gw2"))
    line = _magw("ovn", "plan", "--snapshot", SEED, "--nbctl")
    assert line.startswith("ovn-nbctl ") and line.count("\n") == 1
    pasted = subprocess.run(
        ["bash", "-c", line],
        env={**os.environ, "OVN_NB_DB": ovn_dbs.nb, "OVS_RUNDIR": str(ovn_dbs.dir)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (pasted.returncode, pasted.stderr) == (0, "")
    group = nbctl(ovn_dbs, "--bare", "--columns=_uuid", "find", "Load_Balancer_Group", "name=clusterLBGroup").strip()
    routers = ("submariner_router", "submariner_router_2")
    assert {r: nbctl(ovn_dbs, "get", "Logical_Router", r, "load_balancer_group").strip() for r in routers} == {
        r: f"[{group}]" for r in routers
    }
    # Two active gateways: each router SNATs what its load balancers DNAT (docs/ovn.md, "Services").
    assert {r: nbctl(ovn_dbs, "get", "Logical_Router", r, "options:lb_force_snat_ip").strip() for r in routers} == {
        r: "router_ip" for r in routers
    }
    shown = _magw("ovn", "show", "--nb", ovn_dbs.nb, "--sb", ovn_dbs.sb)
    assert shown == _magw("ovn", "plan", "--snapshot", SEED)


def test_the_line_names_no_placeholder() -> None:
    """Nothing in the line is for the reader to fill in: no ``<...>``; the group is looked up by name in the batch."""
    line = _magw("ovn", "plan", "--snapshot", SEED, "--nbctl")
    assert "<" not in line
    assert line.startswith("ovn-nbctl --id=@g0 get Load_Balancer_Group clusterLBGroup -- ")
