"""``magw ovn sync|show|cleanup`` and a route agent hosting the syncer, as processes, against a real NB.

The oracle is ``ovn-nbctl`` (what it lists), never our driver.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ovn_fixture import OvnDbs, build_ovnk, nb_dump, nbctl
from tests.support.paths import REPO

pytestmark = pytest.mark.ovn

BROKER = REPO / "examples" / "broker"  # east: gateways e-gw1 and e-gw2; west remote: 10.2.0.0/16, 100.2.0.0/16
EAST_NODES = ("e-w1", "e-gw1", "e-gw2")


def magw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "magw.cli.main", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def _db(dbs: OvnDbs) -> list[str]:
    return ["--nb", dbs.nb, "--sb", dbs.sb]


def _policies(dbs: OvnDbs) -> str:
    return nbctl(dbs, "lr-policy-list", "ovn_cluster_router")


def test_sync_once_show_and_cleanup(ovn_dbs: OvnDbs, tmp_path: Path) -> None:
    build_ovnk(ovn_dbs, nodes=EAST_NODES)
    before = nb_dump(ovn_dbs)
    out = magw(
        "ovn", "sync", "--once", *_db(ovn_dbs), "--broker-dir", str(BROKER), "--cluster", "east", "--endpoint-ttl", "0"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["slots"] == {"e-gw1": 1, "e-gw2": 2}
    routers = nbctl(ovn_dbs, "--bare", "--columns=name", "list", "Logical_Router").split()
    assert {"submariner_router", "submariner_router_2"} <= set(routers)
    assert "169.254.254.1, 169.254.254.3" in _policies(ovn_dbs)
    assert "10.2.0.0/16" in nbctl(ovn_dbs, "lr-route-list", "submariner_router_2")
    shown = magw("ovn", "show", *_db(ovn_dbs))
    assert shown.returncode == 0 and "submariner_router_2" in shown.stdout
    dry = magw("ovn", "cleanup", "--dry-run", *_db(ovn_dbs))
    assert dry.returncode == 0 and "would delete Router" in dry.stdout
    assert "submariner_router" in nbctl(ovn_dbs, "lr-list")  # a dry run deletes nothing
    done = magw("ovn", "cleanup", *_db(ovn_dbs))
    assert done.returncode == 0, done.stderr
    assert nb_dump(ovn_dbs) == before  # exactly what was there before: OVN-K's rows untouched, ours gone


def test_sync_once_refuses_a_missing_chassis_and_writes_nothing(ovn_dbs: OvnDbs) -> None:
    build_ovnk(ovn_dbs, nodes=("e-w1", "e-gw1"))  # no chassis for e-gw2
    before = nb_dump(ovn_dbs)
    out = magw(
        "ovn", "sync", "--once", *_db(ovn_dbs), "--broker-dir", str(BROKER), "--cluster", "east", "--endpoint-ttl", "0"
    )
    assert out.returncode == 1
    assert "no SB chassis has hostname e-gw2" in json.loads(out.stdout)["error"]
    assert nb_dump(ovn_dbs) == before


def test_sync_reports_an_unreachable_database_in_one_line(tmp_path: Path) -> None:
    missing = f"unix:{tmp_path}/none.sock"
    out = magw("ovn", "show", "--nb", missing, "--sb", missing, "--timeout", "1")
    assert out.returncode != 0
    assert "cannot reach OVN_Northbound" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.skipif(shutil.which("ip") is None, reason="iproute2 missing")
def test_a_route_agent_hosting_the_syncer_writes_the_nb(ovn_dbs: OvnDbs, tmp_path: Path) -> None:
    build_ovnk(ovn_dbs, nodes=EAST_NODES)
    status = tmp_path / "ovn.json"
    out = subprocess.run(
        [
            sys.executable, "-m", "magw.daemons.route_agent.main", "--fake", "--once", "--node", "e-w1",
            "--cluster", "east",
            "--broker-dir", str(BROKER), "--ovn-nb", ovn_dbs.nb, "--ovn-sb", ovn_dbs.sb,
            "--ovn-status-file", str(status), "--endpoint-ttl", "0",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "169.254.254.1, 169.254.254.3" in _policies(ovn_dbs)
    assert json.loads(status.read_text())["last_sync"]["ok"] is True


def test_route_agent_ovn_flags_go_together(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "magw.daemons.route_agent.main", "--fake", "--once", "--node", "e-w1",
            "--cluster", "east",
         "--broker-dir", str(BROKER), "--ovn-nb", "unix:/nowhere"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--ovn-nb and --ovn-sb: give both or neither" in out.stderr
