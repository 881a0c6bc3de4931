"""FakeOvnNb: an in-memory OVN NB and SB with the OVN driver's interface and semantics, in pure Python.

It runs the driver's own reader and writer (``nbrows``) over ``fake_idl``, the fake's model of ovsdb-server
(all-or-nothing transactions, garbage-collected children, referential integrity, unique names), so reconciler
tests get the real driver's behaviour without a database. tests/unit/drivers/test_ovn_contract.py runs one suite against
this fake and the real driver on a real ovsdb-server.

Foreign rows are seeded with the ``lr_add``/``lsp_add``/... helpers (each one transaction, named after the
``ovn-nbctl`` command it stands for), or all at once with ``seed_ovnk``; ``drift_delete``/``drift_set`` change
one of our rows behind the driver's back. ``transactions`` counts committed NB transactions; ``rows()`` is
the whole NB as plain values, for before/after comparisons.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from magw.desired.ovn.planner import OvnPlan
from magw.desired.ovn.rows import KEY_KEY, OWNER, OWNER_KEY, OvnState
from magw.drivers.ovn.fake_idl import FakeDb, FakeRow
from magw.drivers.ovn.nbrows import PARENT, NbWriter, observe_rows, refuse
from magw.reconcile.ovndiff import OvnChangeSet, ovn_diff


class FakeOvnNb:
    """The NB (``db``) and the SB's chassis (name -> hostname)."""

    def __init__(self) -> None:
        self.db = FakeDb()
        self.chassis: dict[str, str] = {}
        self.transactions = 0

    # -- the driver's interface -----------------------------------------------------------------------

    def _transact(self, fn: Callable[[FakeDb], Any]) -> Any:
        work = self.db.copy()
        result = fn(work)
        work.commit_checks()
        self.db = work
        self.transactions += 1
        return result

    def observe(self) -> OvnState:
        return observe_rows(self.db.tables)

    def chassis_by_hostname(self) -> dict[str, str]:
        return {host: name for name, host in self.chassis.items() if host}

    def _chassis_problems(self, plan: OvnPlan | None) -> list[str]:
        known = set(self.chassis)
        return [f"no SB Chassis {c!r}" for c in (plan.needs_chassis if plan else ()) if c not in known]

    def check(self, plan: OvnPlan, changes: OvnChangeSet | None = None) -> None:
        todo = changes if changes is not None else ovn_diff(plan.state, self.observe())
        refuse(self._chassis_problems(plan) + NbWriter(self.db.tables, None).problems(todo, plan))

    def apply(self, changes: OvnChangeSet, plan: OvnPlan | None) -> int:
        chassis = self._chassis_problems(plan)
        if changes.empty:
            refuse(chassis)
            return 0
        self._transact(lambda db: NbWriter(db.tables, db).apply(changes, plan, chassis))
        return len(changes)

    def cleanup(self) -> int:
        return self.apply(ovn_diff(OvnState(), self.observe()), None)

    def close(self) -> None:
        """Nothing to release (the real driver stops its connection threads)."""

    # -- seeding foreign rows (each one transaction, like one ovn-nbctl command) ----------------------

    def _add(self, table: str, parent: tuple[str, str] | None, columns: dict[str, Any]) -> str:
        def insert(db: FakeDb) -> str:
            row = db.insert(table)
            for column, value in columns.items():
                setattr(row, column, value)
            if parent is not None:
                parent_table, column = PARENT[table]
                _named(db, parent_table, parent[1]).addvalue(column, row.uuid)
            uuid: str = row.uuid
            return uuid

        uuid: str = self._transact(insert)
        return uuid

    def lr_add(self, name: str, **columns: Any) -> str:
        return self._add("Logical_Router", None, {"name": name, **columns})

    def ls_add(self, name: str, **columns: Any) -> str:
        return self._add("Logical_Switch", None, {"name": name, **columns})

    def lrp_add(self, router: str, name: str, mac: str, networks: Sequence[str], **columns: Any) -> str:
        cols = {"name": name, "mac": mac, "networks": list(networks), **columns}
        return self._add("Logical_Router_Port", ("Logical_Router", router), cols)

    def lsp_add(self, switch: str, name: str, **columns: Any) -> str:
        return self._add("Logical_Switch_Port", ("Logical_Switch", switch), {"name": name, **columns})

    def lr_route_add(self, router: str, prefix: str, nexthop: str, **columns: Any) -> str:
        cols = {"ip_prefix": prefix, "nexthop": nexthop, **columns}
        return self._add("Logical_Router_Static_Route", ("Logical_Router", router), cols)

    def lr_policy_add(
        self, router: str, priority: int, match: str, action: str, nexthops: Sequence[str] = (), **columns: Any
    ) -> str:
        cols = {"priority": priority, "match": match, "action": action, "nexthops": list(nexthops), **columns}
        return self._add("Logical_Router_Policy", ("Logical_Router", router), cols)

    def lr_del(self, name: str) -> None:
        """Delete the router ``name`` (its ports, routes and policies go with it)."""
        self._transact(lambda db: _named(db, "Logical_Router", name).delete())

    def lb_group_add(self, name: str) -> str:
        return self._add("Load_Balancer_Group", None, {"name": name})

    def address_set_add(self, name: str, addresses: Sequence[str] = (), **columns: Any) -> str:
        return self._add("Address_Set", None, {"name": name, "addresses": list(addresses), **columns})

    def chassis_add(self, name: str, hostname: str) -> None:
        self.chassis[name] = hostname

    def seed_ovnk(self, nodes: Iterable[str] = ("node1", "node2", "gw1", "gw2", "gw3")) -> None:
        """OVN-Kubernetes' rows as tests/ovn_fixture.build_ovnk makes them (the parts magw meets)."""
        group = self.lb_group_add("clusterLBGroup")
        self.lr_add("ovn_cluster_router")
        self.ls_add("join")
        self.lrp_add("ovn_cluster_router", "rtoj-ovn_cluster_router", "0a:58:64:40:00:01", ["100.64.0.1/16"])
        self.lsp_add("join", "jtor-ovn_cluster_router", type="router", addresses=["router"])
        for i, node in enumerate(nodes, start=1):
            self.ls_add(node, other_config={"subnet": f"10.128.{i - 1}.0/24"})
            self.lrp_add("ovn_cluster_router", f"rtos-{node}", f"0a:58:0a:80:{i - 1:02x}:01", [f"10.128.{i - 1}.1/24"])
            self.lsp_add(node, f"stor-{node}", type="router", addresses=["router"])
            self.lsp_add(node, f"default_pod-{node}", addresses=[f"0a:58:0a:80:{i - 1:02x}:05 10.128.{i - 1}.5"])
            self.lr_add(f"GR_{node}", options={"chassis": f"chassis-{node}"}, load_balancer_group=[group])
            self.lr_route_add("ovn_cluster_router", f"10.128.{i - 1}.0/24", f"100.64.0.{i + 1}", policy=["src-ip"])
            self.chassis_add(f"chassis-{node}", node)
        self.lr_policy_add("ovn_cluster_router", 102, "ip4.src == 10.128.0.0/14 && ip4.dst == 10.128.0.0/14", "allow")

    # -- drift: one of our rows changed behind the driver's back -------------------------------------

    def _ours(self, db: FakeDb, table: str, key: str) -> FakeRow:
        for row in db.tables[table].rows.values():
            ids = row.external_ids
            if ids.get(OWNER_KEY) == OWNER and ids.get(KEY_KEY) == key:
                return row
        raise KeyError(f"no {table} of ours with key {key!r}")

    def drift_delete(self, table: str, key: str) -> None:
        """Delete our row ``key`` (``magw-key``) of ``table``, and its parent's reference to it."""

        def delete(db: FakeDb) -> None:
            row = self._ours(db, table, key)
            if table in PARENT:
                parent_table, column = PARENT[table]
                for parent in db.tables[parent_table].rows.values():
                    parent.delvalue(column, row.uuid)
            row.delete()

        self._transact(delete)

    def drift_set(self, table: str, key: str, **columns: Any) -> None:
        """Overwrite columns of our row ``key`` (``magw-key``) of ``table``."""

        def change(db: FakeDb) -> None:
            row = self._ours(db, table, key)
            for column, value in columns.items():
                setattr(row, column, value)

        self._transact(change)

    # -- the whole NB, for comparisons ----------------------------------------------------------------

    def rows(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Every row of every table: table -> uuid -> column -> value (a deep copy)."""
        return json.loads(json.dumps(self.db.data))  # type: ignore[no-any-return]

    def dump(self) -> str:
        """The NB and the SB chassis as sorted text."""
        return json.dumps({"nb": self.db.data, "chassis": self.chassis}, sort_keys=True, indent=1)


def _named(db: FakeDb, table: str, name: str) -> FakeRow:
    for row in db.tables[table].rows.values():
        if row.name == name:
            return row
    raise KeyError(f"no {table} named {name!r}")
