"""One contract for the OVN driver and its fake: the same tests against FakeOvnNb and against the real driver
on a real NB ovsdb-server (tests/support/ovn_fixture.py, no northd: nothing else writes the NB).

The oracle never reads through our driver: foreign rows are made and our rows drifted with ``ovn-nbctl`` (the
fake's nbctl-like helpers on the fake side), "nothing written" and "only nexthops changed" compare the whole NB
(``ovsdb-client dump``) and the number of transactions in the database file, and the rows we own are counted
with ``ovn-nbctl find``. Only "observe equals the plan" reads through ``observe``, which is what it is about.
"""

from __future__ import annotations

import threading
from pathlib import Path

import attrs
import pytest

from magw.desired.ovn.planner import OvnInputs, OvnPlan, plan_ovn
from magw.desired.ovn.rows import OvnRow, OvnState, Policy, Router, RouterPort, StaticRoute
from magw.drivers.ovn import OvnInputError
from magw.drivers.ovn.nbrows import NbWriter
from magw.model import Snapshot
from magw.reconcile.ovndiff import OvnChangeSet, ovn_diff
from tests.support import ovn_contract_worlds
from tests.support.ovn_contract_worlds import NB_TABLES, RealWorld, Rows, World
from tests.support.ovn_snapshots import east_snapshot

world = ovn_contract_worlds.world


def plan_for(world: World, snapshot: Snapshot, **inputs: object) -> OvnPlan:
    observed = world.driver.observe()
    prev = {r.gateway: r.slot for r in observed.routers if r.gateway is not None and r.slot is not None}
    args: dict[str, object] = {"chassis": world.driver.chassis_by_hostname(), "previous_slots": prev, **inputs}
    return plan_ovn(snapshot, OvnInputs(**args))  # type: ignore[arg-type]


def sync(world: World, snapshot: Snapshot) -> OvnPlan:
    plan = plan_for(world, snapshot)
    world.driver.apply(ovn_diff(plan.state, world.driver.observe()), plan)
    return plan


def assert_converged(world: World, plan: OvnPlan) -> None:
    assert world.driver.observe() == plan.state
    assert ovn_diff(plan.state, world.driver.observe()).empty
    for kind, table in (("routers", "Logical_Router"), ("router_ports", "Logical_Router_Port"),
                        ("switch_ports", "Logical_Switch_Port"), ("routes", "Logical_Router_Static_Route"),
                        ("policies", "Logical_Router_Policy"), ("address_sets", "Address_Set"),
                        ("switches", "Logical_Switch")):  # fmt: skip
        assert world.count_ours(table) == len(plan.state.of_kind(kind)), table


def assert_foreign_kept(before: Rows, after: Rows) -> None:
    """Every row of ``before`` is in ``after`` unchanged, but for our children added to a router's ports and
    policies (ovn_cluster_router's)."""
    for table, rows in before.items():
        for uuid, cols in rows.items():
            assert uuid in after[table], f"{table} {uuid} {cols} was deleted"
            for col, value in cols.items():
                now = after[table][uuid][col]
                if table == "Logical_Router" and col in ("ports", "policies"):
                    assert set(_items(value)) <= set(_items(now)), (table, col)
                else:
                    assert now == value, (table, uuid, col)


def _items(value: object) -> tuple[object, ...]:
    return value if isinstance(value, tuple) else (value,)


def test_sync_writes_exactly_the_plan_and_a_second_diff_is_empty(world: World) -> None:
    world.seed()
    before = world.rows()
    plan = sync(world, east_snapshot(north=True))
    assert_converged(world, plan)
    assert_foreign_kept(before, world.rows())
    commits = world.commits()
    assert world.driver.apply(OvnChangeSet(), plan) == 0
    assert world.commits() == commits  # converged: no transaction at all


def test_foreign_rows_survive_sync_and_cleanup_and_cleanup_leaves_none_of_ours(world: World) -> None:
    world.seed()
    world.nb("lr-add", "their_router")
    world.nb("lr-policy-add", "ovn_cluster_router", "20000", "ip4.dst == 192.0.2.0/24", "reroute", "100.64.0.9")
    world.nb("lsp-add", "join", "their_port")
    world.nb("ls-add", "their_switch")
    before = world.rows()
    plan = sync(world, east_snapshot())
    assert_converged(world, plan)
    assert_foreign_kept(before, world.rows())
    assert world.driver.cleanup() == plan.state.count()
    assert world.rows() == before  # every row of ours gone, our references from ovn_cluster_router too
    assert all(world.count_ours(t) == 0 for t in NB_TABLES)
    commits = world.commits()
    assert world.driver.cleanup() == 0
    assert world.commits() == commits


DRIFTS = {
    "route deleted": lambda s: ("delete", s.routes[0], {}),
    "policy nexthops changed": lambda s: ("set", s.policies[0], {"nexthops": ["169.254.254.5"]}),
    "policy action changed": lambda s: ("set", s.policies[0], {"action": "allow"}),
    "our LRP removed": lambda s: ("delete", _named(s.router_ports, "ovn_cluster_subm_lrp"), {}),
    "router chassis changed": lambda s: ("set", s.routers[0], {"options": {"chassis": "chassis-node1"}}),
    "switch port addresses changed": lambda s: ("set", s.switch_ports[0], {"addresses": ["00:00:00:00:00:09"]}),
    "address set emptied": lambda s: ("set", s.address_sets[0], {"addresses": []}),
}


def _named(rows: tuple[RouterPort, ...], name: str) -> RouterPort:
    return next(r for r in rows if r.name == name)


@pytest.mark.parametrize("drift", list(DRIFTS))
def test_drift_is_seen_and_repaired_in_one_transaction(world: World, drift: str) -> None:
    world.seed()
    plan = sync(world, east_snapshot())
    how, row, columns = DRIFTS[drift](plan.state)
    if how == "delete":
        world.drift_delete(row)
    else:
        world.drift_set(row, **columns)
    assert world.driver.observe() != plan.state
    changes = ovn_diff(plan.state, world.driver.observe())
    assert len(changes) == 1 and not changes.deletes
    commits = world.commits()
    world.driver.apply(changes, plan)
    assert world.commits() == commits + 1
    assert_converged(world, plan)


def _local_routes(s: OvnState) -> list[StaticRoute]:
    """The routes of the first router back into the cluster (same router, next hop and port; two prefixes)."""
    first = s.routes[0].router
    return [r for r in s.routes if r.router == first and r.nexthop == "169.254.254.2"]


# Drift in a column of a row's key: the row no longer reads as its magw-key (Submariner 1984's wrong routes).
KEY_DRIFTS = {
    "route prefix changed": lambda s: [(_local_routes(s)[0], {"ip_prefix": "242.0.0.0/16"})],
    "two routes drifted into one key": lambda s: [(r, {"ip_prefix": "242.0.0.0/16"}) for r in _local_routes(s)],
    "a route drifted into another's key": lambda s: [(_local_routes(s)[1], {"ip_prefix": _local_routes(s)[0].prefix})],
    "policy match changed": lambda s: [(s.policies[0], {"match": "ip4.dst == 192.0.2.0/24"})],
}


@pytest.mark.parametrize("drift", list(KEY_DRIFTS))
def test_drift_in_a_key_column_is_repaired_in_one_transaction(world: World, drift: str) -> None:
    """The drifted rows read as keys we do not plan: they are deleted and the planned rows created, in one
    transaction. (The writer used to look the drifted row up by its stale magw-key, and every sync after the
    drift failed with "went away during the sync".)"""
    world.seed()
    plan = sync(world, east_snapshot())
    drifted = KEY_DRIFTS[drift](plan.state)
    assert drifted and all(r.nexthop == "169.254.254.2" for r, _ in drifted if isinstance(r, StaticRoute))
    for row, columns in drifted:
        world.drift_set(row, **columns)
    changes = ovn_diff(plan.state, world.driver.observe())
    assert len(changes.creates) == len(drifted) == len(changes.deletes) and not changes.updates
    commits = world.commits()
    world.driver.apply(changes, plan)
    assert world.commits() == commits + 1
    assert_converged(world, plan)
    # The rows that stayed are the ones whose magw-key names their columns (a drifted one went first).
    routes = world.rows()["Logical_Router_Static_Route"].values()
    keys = [(dict(r["external_ids"]).get("magw-key", ""), r["ip_prefix"]) for r in routes]
    assert all(f":{prefix}>" in key for key, prefix in keys if key)


BAD = {
    "missing chassis": ("chassis-gw9", None),
    "missing ovn_cluster_router": ("'ovn_cluster_router'", ("lr-del", "ovn_cluster_router")),
    "foreign switch with our name": ("'submariner_join'", ("ls-add", "submariner_join")),
    "foreign router with our name": ("'submariner_router'", ("lr-add", "submariner_router")),
    "foreign LSP with our name": ("'submariner_j_lsp'", ("lsp-add", "join", "submariner_j_lsp")),
    "foreign LRP with our name": (
        "'ovn_cluster_subm_lrp'",
        ("lrp-add", "GR_node1", "ovn_cluster_subm_lrp", "00:00:00:00:00:01", "192.0.2.1/24"),
    ),
    "foreign address set with our name": (
        "'submariner_remote_west'",
        ("create", "Address_Set", "name=submariner_remote_west"),
    ),
}


@pytest.mark.parametrize("bad", list(BAD))
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(world: World, bad: str) -> None:
    world.seed()
    needle, command = BAD[bad]
    if command is not None:
        world.nb(*command)
    snapshot = east_snapshot(gateways=("gw1", "gw9") if bad == "missing chassis" else ("gw1", "gw2"))
    plan = plan_for(world, snapshot, chassis={**world.driver.chassis_by_hostname(), "gw9": "chassis-gw9"})
    before, commits = world.rows(), world.commits()
    changes = ovn_diff(plan.state, world.driver.observe())
    for attempt in (lambda: world.driver.check(plan), lambda: world.driver.apply(changes, plan)):
        with pytest.raises(OvnInputError) as refused:
            attempt()
        assert needle in str(refused.value) and "\n" not in str(refused.value)
    assert world.rows() == before
    assert world.commits() == commits


def test_every_missing_thing_is_listed_at_once(world: World) -> None:
    world.seed()
    world.nb("lr-del", "ovn_cluster_router")
    world.nb("ls-add", "submariner_join")
    plan = plan_for(world, east_snapshot(gateways=("gw1", "gw9")), chassis={"gw1": "chassis-gw1", "gw9": "chassis-gw9"})
    with pytest.raises(OvnInputError) as refused:
        world.driver.apply(ovn_diff(plan.state, world.driver.observe()), plan)
    for needle in ("chassis-gw9", "'ovn_cluster_router'", "'submariner_join'"):
        assert needle in str(refused.value)


def test_failover_is_one_transaction_that_changes_only_policy_nexthops(world: World) -> None:
    world.seed()
    sync(world, east_snapshot(north=True))
    before, commits = world.rows(), world.commits()
    plan = plan_for(world, east_snapshot(north=True, down=("gw2",)))
    changes = ovn_diff(plan.state, world.driver.observe())
    assert {u.new.table for u in changes.updates} == {"Logical_Router_Policy"} and len(changes) == 2
    world.driver.apply(changes, plan)
    assert world.commits() == commits + 1
    after = world.rows()
    changed = {
        (table, col)
        for table, rows in after.items()
        for uuid, cols in rows.items()
        for col, value in cols.items()
        if before[table].get(uuid, {}).get(col) != value
    }
    assert changed == {("Logical_Router_Policy", "nexthops")}
    assert_converged(world, plan)


def test_rows_of_ours_are_updated_in_place_and_a_port_moves_between_our_routers(world: World) -> None:
    world.seed()
    first = OvnState(
        routers=[Router(name="mg_a", chassis="chassis-gw1", lb_group="clusterLBGroup", lb_snat=True, gateway="gw1",
                        slot=1),
                 Router(name="mg_b")],
        router_ports=[RouterPort(name="mg_p", router="mg_a", mac="00:00:00:00:00:01", networks=["192.0.2.1/24"])],
        routes=[StaticRoute(router="mg_a", prefix="198.51.100.0/24", nexthop="192.0.2.9", output_port="mg_p")],
        policies=[Policy(router="ovn_cluster_router", priority=20000, match="ip4.dst == 198.51.100.0/24",
                         nexthops=["192.0.2.1"])],
    )  # fmt: skip
    world.driver.apply(ovn_diff(first, world.driver.observe()), None)
    assert world.driver.observe() == first
    second = OvnState(
        routers=[Router(name="mg_a", chassis="chassis-gw2", lb_group=None, gateway="gw2", slot=2),
                 Router(name="mg_b")],
        router_ports=[RouterPort(name="mg_p", router="mg_b", mac="00:00:00:00:00:02", networks=["192.0.2.2/24"])],
        routes=[StaticRoute(router="mg_a", prefix="198.51.100.0/24", nexthop="192.0.2.9", output_port="mg_p")],
        policies=[Policy(router="ovn_cluster_router", priority=20000, match="ip4.dst == 198.51.100.0/24",
                         nexthops=["192.0.2.1", "192.0.2.2"])],
    )  # fmt: skip
    changes = ovn_diff(second, world.driver.observe())
    assert len(changes.updates) == 3 and not changes.creates and not changes.deletes
    before = world.rows()
    world.driver.apply(changes, None)
    assert world.driver.observe() == second
    for table in ("Logical_Router", "Logical_Router_Port", "Logical_Router_Policy"):
        assert set(world.rows()[table]) == set(before[table])  # the same rows (uuids), changed in place


def test_an_allow_policy_is_written_read_back_and_changes_action_in_place(world: World) -> None:
    """The egress gateway's allow policy (no nexthops) and its reroute; an action flip is one update of the row."""
    world.seed()
    allow = Policy(router="ovn_cluster_router", priority=19001, match="ip4.src == 10.0.0.5", nexthops=[],
                   action="allow")  # fmt: skip
    first = OvnState(policies=[allow])
    world.driver.apply(ovn_diff(first, world.driver.observe()), None)
    assert world.driver.observe() == first
    (row,) = (r for r in world.rows()["Logical_Router_Policy"].values() if r["priority"] == 19001)
    assert row["action"] == "allow" and not row["nexthops"]
    second = OvnState(policies=[attrs.evolve(allow, action="reroute", nexthops=["10.0.1.254"])])
    changes = ovn_diff(second, world.driver.observe())
    assert len(changes.updates) == 1 and not changes.creates and not changes.deletes
    before = set(world.rows()["Logical_Router_Policy"])
    world.driver.apply(changes, None)
    assert world.driver.observe() == second
    assert set(world.rows()["Logical_Router_Policy"]) == before
    (row,) = (r for r in world.rows()["Logical_Router_Policy"].values() if r["priority"] == 19001)
    assert row["action"] == "reroute"  # its nexthops: observe() above


def test_a_switch_port_of_ours_changes_in_place(world: World) -> None:
    world.seed()
    plan = sync(world, east_snapshot())
    port = next(p for p in plan.state.switch_ports if p.type == "localnet")
    changed = attrs.evolve(port, addresses=["unknown", "00:00:00:00:00:07"], options={"network_name": "elsewhere"})
    wanted = attrs.evolve(plan.state, switch_ports=[changed if p == port else p for p in plan.state.switch_ports])
    before = world.rows()["Logical_Switch_Port"]
    changes = ovn_diff(wanted, world.driver.observe())
    assert [u.new for u in changes.updates] == [changed] and len(changes) == 1
    world.driver.apply(changes, None)
    assert world.driver.observe() == wanted
    assert set(world.rows()["Logical_Switch_Port"]) == set(before)


@pytest.mark.ovn
def test_connect_names_the_unreachable_database_in_one_line(tmp_path: Path) -> None:
    from magw.drivers.ovn import OvnConnectError, connect

    missing = f"unix:{tmp_path}/nowhere.sock"
    with pytest.raises(OvnConnectError) as failed:
        connect(missing, missing, timeout=2)
    assert missing in str(failed.value) and "OVN_Northbound" in str(failed.value)
    assert "\n" not in str(failed.value)


@pytest.mark.ovn
def test_close_stops_the_connection_threads(tmp_path: Path) -> None:
    threads = set(threading.enumerate())
    with RealWorld.started(tmp_path) as real:
        real.seed()
        assert real.driver.observe() == OvnState()
        real.driver.close()
        assert set(threading.enumerate()) <= threads
    assert sorted(t.name for t in set(threading.enumerate()) - threads) == []


def test_a_failure_halfway_through_the_writes_leaves_nothing_written(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.seed()
    plan = plan_for(world, east_snapshot())
    changes = ovn_diff(plan.state, world.driver.observe())
    before, commits = world.rows(), world.commits()
    create, done = NbWriter._create, []

    def failing_create(self: NbWriter, row: OvnRow) -> None:
        if len(done) == 10:
            raise RuntimeError("injected failure after 10 creates")
        create(self, row)
        done.append(row)

    monkeypatch.setattr(NbWriter, "_create", failing_create)
    with pytest.raises(RuntimeError, match="injected"):
        world.driver.apply(changes, plan)
    assert len(done) == 10
    assert world.rows() == before
    assert world.commits() == commits


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (Policy(router="ovn_cluster_router", priority=40000, match="ip4", nexthops=["192.0.2.1"]), "40000"),
        (RouterPort(name="mg_p", router="mg_a", mac="00:00:00:00:00:01", networks=[]), "'mg_p'"),
    ],
)
def test_a_value_the_nb_cannot_hold_is_refused_before_writing(world: World, row: OvnRow, needle: str) -> None:
    """The Python IDL would silently write the column's default instead (priority 0, networks [""])."""
    world.seed()
    before, commits = world.rows(), world.commits()
    bad = OvnState(routers=[Router(name="mg_a")], **{"policies" if isinstance(row, Policy) else "router_ports": [row]})
    with pytest.raises(OvnInputError, match=needle):
        world.driver.apply(ovn_diff(bad, world.driver.observe()), None)
    assert world.rows() == before
    assert world.commits() == commits
