"""Foreign state survives a sync and a cleanup: we touch only what we own.

Before anything of ours exists, the namespace gets routes in main and table 100
under other protocols (one with the same destination as ours), foreign rules, a
foreign nft table with a masquerade rule, a foreign VXLAN link with an address,
a neighbor and an FDB entry, and foreign nexthops just outside our id range. An
independent checker (``ip -json``, ``bridge -json``, ``nft -j``) reads all of it
before and after.
"""

from __future__ import annotations

from typing import Any

import pytest

from magw.desired.node.ids import NEXTHOP_ID_MAX, NEXTHOP_ID_MIN
from magw.desired.node.planner import plan
from magw.desired.state import DesiredState
from magw.drivers.netlink.constants import RTPROT_MAGW
from magw.model import Strategy
from magw.snapshot.load import load_snapshot
from tests.support.kernel_node import add_cni_device, nft_script, real_node_driver, sync_once
from tests.support.netns import bridge_json, ip_json, nft_json, run
from tests.support.paths import EXAMPLES
from tests.support.planner_seed import seed_east

pytestmark = pytest.mark.kernel

CNI_NFT = """
table ip cni {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 10.1.0.0/16 oifname "cni0" masquerade
  }
}
"""


FOREIGN_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("ip", "route", "add", "10.77.0.0/16", "via", "192.168.50.2", "proto", "static"),
    ("ip", "route", "add", "10.78.0.0/16", "via", "192.168.50.2", "table", "100", "proto", "boot"),
    # Same table and destination as one of our gateway routes, another protocol and metric.
    ("ip", "route", "add", "10.2.0.0/16", "via", "192.168.50.2", "table", "100", "metric", "200", "proto", "static"),
    ("ip", "route", "add", "10.79.0.0/16", "via", "192.168.50.2", "table", "150", "proto", "static"),
    ("ip", "rule", "add", "priority", "200", "lookup", "200"),
    ("ip", "rule", "add", "from", "10.9.0.0/16", "lookup", "100", "priority", "300"),
    ("ip", "link", "add", "vx-foreign", "type", "vxlan", "id", "77", "dstport", "4789", "nolearning"),
    ("ip", "addr", "add", "243.0.0.1/8", "dev", "vx-foreign"),
    ("ip", "link", "set", "vx-foreign", "up"),
    ("ip", "neigh", "add", "243.0.0.2", "lladdr", "02:00:00:00:77:02", "dev", "vx-foreign", "nud", "permanent"),
    ("bridge", "fdb", "append", "02:00:00:00:77:02", "dev", "vx-foreign", "dst", "192.168.50.2", "self", "permanent"),
    ("ip", "nexthop", "add", "id", "10", "via", "192.168.50.2", "dev", "fgn0"),
    ("ip", "nexthop", "add", "id", "11", "group", "10"),
    ("ip", "nexthop", "add", "id", str(NEXTHOP_ID_MIN - 1), "via", "192.168.50.3", "dev", "fgn0"),
    ("ip", "nexthop", "add", "id", str(NEXTHOP_ID_MAX + 1), "blackhole"),
    ("ip", "route", "add", "10.80.0.0/16", "nhid", "11", "proto", "static"),
)


def _add_foreign_state(ns: str) -> None:
    add_cni_device(ns, "192.168.50.1", name="fgn0")
    for cmd in FOREIGN_COMMANDS:
        run(ns, *cmd)
    nft_script(ns, CNI_NFT)


def _without_operstate(link: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in link.items() if k != "operstate"}


def _foreign(ns: str) -> dict[str, Any]:
    """Everything foreign, read back with iproute2, bridge and nft (nothing of ours can appear here)."""
    routes = [
        r
        for r in ip_json(ns, "route", "show", "table", "all")
        if r.get("protocol") not in ("kernel", str(RTPROT_MAGW)) and r.get("table") != "local"
    ]
    return {
        "routes": routes,
        "rules": [r for r in ip_json(ns, "rule", "show") if r["priority"] != 100],
        "nexthops": [n for n in ip_json(ns, "nexthop", "show") if not NEXTHOP_ID_MIN <= n["id"] <= NEXTHOP_ID_MAX],
        "link": [
            {k: v for k, v in link.items() if k != "operstate"}
            for link in ip_json(ns, "-d", "link", "show", "vx-foreign")
        ],
        "addr": ip_json(ns, "-4", "addr", "show", "dev", "vx-foreign"),
        "neigh": ip_json(ns, "neigh", "show", "dev", "vx-foreign"),
        "fdb": bridge_json(ns, "fdb", "show", "dev", "vx-foreign"),
        "nft": nft_json(ns, "list", "table", "ip", "cni")["nftables"],
    }


def _expected_foreign_counts(state: dict[str, Any]) -> dict[str, int]:
    return {key: len(value) for key, value in state.items()}


@pytest.mark.parametrize("node", ["e-gw1", "e-w1"])
def test_foreign_state_survives_sync_and_cleanup(ns: str, node: str) -> None:
    """A sync installs our plan next to the foreign state; a cleanup removes ours; the foreign state never changes."""
    snapshot = seed_east(Strategy.RESILIENT)
    add_cni_device(ns, snapshot.node(node).cni_ip)
    _add_foreign_state(ns)
    before = _foreign(ns)
    assert _expected_foreign_counts(before) == {
        "routes": 5,
        "rules": 5,  # local, 200, 300, main, default
        "nexthops": 4,
        "link": 1,
        "addr": 1,
        "neigh": 1,
        "fdb": 1,
        "nft": 4,  # metainfo, table, chain, rule
    }
    desired = plan(snapshot, node)
    with real_node_driver(ns) as driver:
        applied = sync_once(driver, desired)
        assert applied.result.failed == ()
        assert driver.observe() == desired
        assert _foreign(ns) == before
        ours = [r for r in ip_json(ns, "route", "show", "table", "all") if r.get("protocol") == str(RTPROT_MAGW)]
        assert len(ours) == len(desired.routes)

        cleaned = sync_once(driver, DesiredState())
        assert cleaned.result.failed == ()
        assert driver.observe() == DesiredState()
    assert _foreign(ns) == before
    assert [r for r in ip_json(ns, "route", "show", "table", "all") if r.get("protocol") == str(RTPROT_MAGW)] == []
    assert [n["id"] for n in ip_json(ns, "nexthop", "show") if NEXTHOP_ID_MIN <= n["id"] <= NEXTHOP_ID_MAX] == []
    assert [r for r in ip_json(ns, "rule", "show") if r["priority"] == 100] == []
    assert {link["ifname"] for link in ip_json(ns, "link", "show")} == {
        "lo",
        "cni0",
        "cni0p",
        "fgn0",
        "fgn0p",
        "vx-foreign",
    }
    tables = [t["table"]["name"] for t in nft_json(ns, "list", "tables")["nftables"] if "table" in t]
    assert tables == ["cni"]


def test_cleanup_of_an_untouched_namespace_changes_nothing(ns: str) -> None:
    """Cleanup where nothing of ours exists finds no change and leaves the foreign state as it was."""
    _add_foreign_state(ns)
    before = _foreign(ns)
    with real_node_driver(ns) as driver:
        cleaned = sync_once(driver, DesiredState())
    assert (cleaned.changes.ops, cleaned.changes.nft, cleaned.result.failed) == ((), (), ())
    assert _foreign(ns) == before


@pytest.mark.parametrize("node", ["e-gw1", "e-w1"])
def test_foreign_rules_at_the_client_ip_priorities_are_left_alone(ns: str, node: str) -> None:
    """keep_client_ip's rules sit at 85..99, where other software puts rules too (Calico's WireGuard rule at 99):
    there a rule is ours only by its protocol. Foreign rules at the very priorities of ours survive a sync beside
    ours and a cleanup; ours are written and removed (read with ``ip -json rule``)."""
    snapshot = load_snapshot(EXAMPLES / "client-ip.yaml")
    add_cni_device(ns, snapshot.node(node).cni_ip)
    desired = plan(snapshot, node)
    prios = sorted(r.priority for r in desired.rules if r.priority < 100)
    assert prios  # e-gw1: a return rule and the steer rule (99); e-w1: a return rule per gateway
    for prio in (*prios, 97):
        run(ns, "ip", "rule", "add", "priority", str(prio), "not", "fwmark", "0x100000/0x100000", "lookup", "1")

    def foreign() -> list[dict[str, Any]]:
        return [r for r in ip_json(ns, "rule", "show") if r.get("protocol") != str(RTPROT_MAGW)]

    def ours() -> list[int]:
        return sorted(r["priority"] for r in ip_json(ns, "rule", "show") if r.get("protocol") == str(RTPROT_MAGW))

    before = foreign()
    assert len(before) == 3 + len(prios) + 1  # local, main, default and the ones added
    with real_node_driver(ns) as driver:
        assert sync_once(driver, desired).result.failed == ()
        assert driver.observe() == desired
        assert foreign() == before
        assert ours() == sorted(r.priority for r in desired.rules)
        assert sync_once(driver, DesiredState()).result.failed == ()
    assert foreign() == before
    assert ours() == []
