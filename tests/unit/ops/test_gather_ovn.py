"""``magw gather``'s OVN part against a real NB ovsdb-server: ``ovn-nbctl show`` of everything, and per table only
the rows magw owns (``external_ids:magw-owner=magw``), with their columns."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from magw.ops.gather.archive import Archive
from magw.ops.gather.lab import OVN_TABLES, collect_ovn_nb
from tests.support.ovn_fixture import OvnDbs, nbctl

pytestmark = pytest.mark.ovn


def test_magw_rows_per_table_and_the_whole_show(ovn_dbs: OvnDbs, tmp_path: Path) -> None:
    """A router and a switch of ours and a foreign router: the tables' members hold ours only, ``show`` both."""
    nbctl(ovn_dbs, "lr-add", "submariner_router", "--", "set", "Logical_Router", "submariner_router",
          "external_ids:magw-owner=magw", "external_ids:magw-key=router")  # fmt: skip
    nbctl(ovn_dbs, "ls-add", "submariner_join", "--", "set", "Logical_Switch", "submariner_join",
          "external_ids:magw-owner=magw")  # fmt: skip
    nbctl(ovn_dbs, "lr-add", "ovn_cluster_router")
    out = tmp_path / "o.tar.gz"
    archive = Archive(out, "top")
    collect_ovn_nb(archive, "ovn/east", ovn_dbs.nb)
    manifest = archive.close({})
    assert manifest["failed"] == []
    with tarfile.open(out, "r:gz") as tar:
        def read(name: str) -> bytes:
            f = tar.extractfile(f"top/ovn/east/{name}")
            assert f is not None
            return f.read()

        show = read("nbctl-show.txt").decode()
        routers = json.loads(read("Logical_Router.json"))
        switches = json.loads(read("Logical_Switch.json"))
        policies = json.loads(read("Logical_Router_Policy.json"))
    assert "submariner_router" in show
    assert "ovn_cluster_router" in show
    name_col = routers["headings"].index("name")
    assert [row[name_col] for row in routers["data"]] == ["submariner_router"]
    assert [row[switches["headings"].index("name")] for row in switches["data"]] == ["submariner_join"]
    assert policies["data"] == []
    assert {f["path"] for f in manifest["files"]} == {"ovn/east/nbctl-show.txt"} | {
        f"ovn/east/{t}.json" for t in OVN_TABLES
    }
