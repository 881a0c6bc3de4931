"""magw.drivers.ovs: br-submariner/ovn-k8s-sub0 on a real ovs-vswitchd (userspace datapath) in a namespace, with
its own ovsdb-server (tests/support/ovs_fixture.py). The oracle is ``ovs-vsctl`` and ``ip`` run by the test, not the
driver's own observe."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from magw.drivers.ovs.bridge import OvsBridge, OvsError
from tests.support.netns import ip_json, netns, run
from tests.support.ovs_fixture import Ovs, ovs_in_netns, ovs_missing

pytestmark = pytest.mark.kernel


@pytest.fixture
def ovs() -> Iterator[Ovs]:
    missing = ovs_missing()
    if missing:
        pytest.skip(missing)
    with netns("magwt-ovs") as ns, ovs_in_netns(ns) as made:
        yield made


def devices(ovs: Ovs) -> set[str]:
    return {link["ifname"] for link in ip_json(ovs.ns, "link", "show")}


def external_ids(ovs: Ovs, table: str, record: str) -> dict[str, str]:
    out = json.loads(ovs.vsctl("--format=json", "--columns=external_ids", "list", table, record))
    return dict(out["data"][0][0][1])


def mappings(ovs: Ovs) -> str | None:
    return external_ids(ovs, "Open_vSwitch", ".").get("ovn-bridge-mappings")


def db_text(ovs: Ovs) -> str:
    """Everything the tests compare: bridges, ports and interfaces with their marks, and the mappings."""
    parts = [ovs.vsctl("show").partition("\n")[2]]  # without the Open_vSwitch row's UUID line
    for table in ("Bridge", "Port", "Interface"):
        parts.append(ovs.vsctl("--format=json", "--columns=name,external_ids", "list", table))
    parts.append(str(sorted(external_ids(ovs, "Open_vSwitch", ".").items())))
    return "\n".join(parts)


def test_ensure_creates_the_bridge_port_and_mapping(ovs: Ovs) -> None:
    changed = OvsBridge(ovs.db).ensure()
    assert changed
    assert ovs.vsctl("list-ports", "br-submariner") == "ovn-k8s-sub0"
    assert ovs.vsctl("get", "Bridge", "br-submariner", "datapath_type") == "netdev"
    assert ovs.vsctl("get", "Interface", "ovn-k8s-sub0", "type") == "internal"
    for table, record in (("Bridge", "br-submariner"), ("Port", "ovn-k8s-sub0"), ("Interface", "ovn-k8s-sub0")):
        assert external_ids(ovs, table, record)["magw-owner"] == "magw"
    assert mappings(ovs) == "submariner_gateway:br-submariner"
    assert {"br-submariner", "ovn-k8s-sub0"} <= devices(ovs)  # the userspace datapath's taps, in the namespace


def test_ensure_is_idempotent(ovs: Ovs) -> None:
    bridge = OvsBridge(ovs.db)
    bridge.ensure()
    before = db_text(ovs)
    assert bridge.ensure() == ()
    assert db_text(ovs) == before


def test_ensure_repairs_a_deleted_port(ovs: Ovs) -> None:
    bridge = OvsBridge(ovs.db)
    bridge.ensure()
    ovs.vsctl("del-port", "br-submariner", "ovn-k8s-sub0")
    assert "ovn-k8s-sub0" not in devices(ovs)
    assert bridge.ensure() != ()
    assert ovs.vsctl("list-ports", "br-submariner") == "ovn-k8s-sub0"
    assert "ovn-k8s-sub0" in devices(ovs)


def test_mapping_is_merged_and_cleanup_removes_only_our_entry(ovs: Ovs) -> None:
    ovs.vsctl("set", "Open_vSwitch", ".", 'external_ids:ovn-bridge-mappings="physnet:br-ex"')
    bridge = OvsBridge(ovs.db)
    bridge.ensure()
    assert mappings(ovs) == "physnet:br-ex,submariner_gateway:br-submariner"
    bridge.cleanup()
    assert mappings(ovs) == "physnet:br-ex"
    assert "magw-bridge-mapping" not in external_ids(ovs, "Open_vSwitch", ".")


def test_a_foreign_mapping_is_refused_and_nothing_changes(ovs: Ovs) -> None:
    ovs.vsctl("set", "Open_vSwitch", ".", 'external_ids:ovn-bridge-mappings="submariner_gateway:br-other"')
    before = db_text(ovs)
    with pytest.raises(OvsError, match=r"maps submariner_gateway to br-other.*not overwriting"):
        OvsBridge(ovs.db).ensure()
    assert db_text(ovs) == before


def test_a_foreign_br_submariner_is_refused_and_survives_cleanup(ovs: Ovs) -> None:
    ovs.vsctl("add-br", "br-submariner", "--", "set", "Bridge", "br-submariner", "datapath_type=netdev")
    before = db_text(ovs)
    bridge = OvsBridge(ovs.db)
    with pytest.raises(OvsError, match="br-submariner exists and is not magw's"):
        bridge.ensure()
    assert bridge.cleanup() == ()
    assert db_text(ovs) == before


def test_cleanup_removes_ours_and_leaves_a_foreign_bridge_and_port(ovs: Ovs) -> None:
    ovs.vsctl(
        "add-br", "br-foreign", "--", "set", "Bridge", "br-foreign", "datapath_type=netdev",
        "--", "add-port", "br-foreign", "foreign0", "--", "set", "Interface", "foreign0", "type=internal",
    )  # fmt: skip
    foreign = db_text(ovs)
    bridge = OvsBridge(ovs.db)
    bridge.ensure()
    assert bridge.cleanup() != ()
    assert db_text(ovs) == foreign
    assert ovs.vsctl("list-br") == "br-foreign"
    assert ovs.vsctl("list-ports", "br-foreign") == "foreign0"
    assert mappings(ovs) is None
    assert bridge.cleanup() == ()


def test_ovs_db_unreachable_is_one_line() -> None:
    with pytest.raises(OvsError, match=r"ovs-vsctl --db=unix:/nonexistent/db.sock: .*") as err:
        OvsBridge("unix:/nonexistent/db.sock", timeout=1).ensure()
    assert "\n" not in str(err.value)


def test_link_up_sets_the_internal_port_up(ovs: Ovs) -> None:
    OvsBridge(ovs.db).ensure()
    code = "from magw.drivers.ovs.link import link_up; print(link_up('ovn-k8s-sub0'), link_up('ovn-k8s-sub0'))"
    assert run(ovs.ns, sys.executable, "-c", code).stdout.split() == ["True", "False"]
    (link,) = ip_json(ovs.ns, "link", "show", "ovn-k8s-sub0")
    assert "UP" in link["flags"]
    missing = subprocess.run(
        ["ip", "netns", "exec", ovs.ns, sys.executable, "-c", "from magw.drivers.ovs.link import link_up; "
         "link_up('nothere0', wait=0.2)"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode != 0
    assert "device nothere0 did not appear within 0.2 s" in missing.stderr


def test_magw_cleanup_with_ovs_db_removes_ours_and_dry_run_changes_nothing(ovs: Ovs) -> None:
    """``magw cleanup --ovs-db``, as a user runs it in the node's namespace: a dry run lists and keeps; the real
    run removes our bridge and mapping entry and leaves a foreign bridge and mapping."""
    ovs.vsctl("add-br", "br-foreign", "--", "set", "Bridge", "br-foreign", "datapath_type=netdev")
    ovs.vsctl("set", "Open_vSwitch", ".", 'external_ids:ovn-bridge-mappings="physnet:br-foreign"')
    foreign = db_text(ovs)
    OvsBridge(ovs.db).ensure()
    ours = db_text(ovs)
    cmd = [sys.executable, "-m", "magw.cli.main", "cleanup", "--netns", ovs.ns, "--ovs-db", ovs.db]
    dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, timeout=60, check=False)
    assert dry.returncode == 0, dry.stderr
    assert "would remove ovs br-submariner" in dry.stdout
    assert "would remove ovs ovn-bridge-mappings -= submariner_gateway:br-submariner" in dry.stdout
    assert db_text(ovs) == ours
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "remove ovs br-submariner" in done.stdout
    assert db_text(ovs) == foreign
    assert "ovn-k8s-sub0" not in devices(ovs)
