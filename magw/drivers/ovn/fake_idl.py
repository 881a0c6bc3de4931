"""An in-memory OVSDB holding the part of the OVN Northbound schema magw uses, seen through IDL-like rows.

``FakeOvnNb`` (``fake``) runs the driver's own reader and writer (``nbrows``) on it, so the fake differs from
the real driver only where the database does: this module models what ovsdb-server does at commit, as checked
against the real server by tests/unit/drivers/test_ovn_contract.py:

- a transaction works on a copy and replaces the database only when every check passes (all or nothing);
- rows of non-root tables (router and switch ports, static routes, policies) that no row references any more
  are deleted ("garbage collected"), so an inserted child that was never linked simply vanishes;
- a reference to a row that does not exist is an error (referential integrity, e.g. a deleted port still in a
  router's ``ports``), as are two rows with one name in an indexed table (``Logical_Router_Port``,
  ``Logical_Switch_Port``, ``Address_Set``, ``Load_Balancer_Group``).

Not modelled: the columns magw never reads or writes, weak references, every other table, and values out of
a column's range (the real Python IDL silently writes the column's default instead, e.g. priority 0 for
40000, ``[""]`` for an empty ``networks``: the writer refuses such rows before it writes, ``nbrows``).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

# Every modelled column of every modelled table, with its default value.
SCHEMA: dict[str, dict[str, Any]] = {
    "Logical_Router": {
        "name": "", "ports": [], "static_routes": [], "policies": [], "load_balancer_group": [], "options": {},
        "external_ids": {},
    },
    "Logical_Router_Port": {"name": "", "mac": "", "networks": [], "options": {}, "external_ids": {}},
    "Logical_Router_Static_Route": {
        "ip_prefix": "", "nexthop": "", "output_port": [], "policy": [], "external_ids": {},
    },
    "Logical_Router_Policy": {
        "priority": 0, "match": "", "action": "", "nexthops": [], "options": {}, "external_ids": {},
    },
    "Logical_Switch": {"name": "", "ports": [], "load_balancer_group": [], "other_config": {}, "external_ids": {}},
    "Logical_Switch_Port": {"name": "", "type": "", "addresses": [], "options": {}, "external_ids": {}},
    "Address_Set": {"name": "", "addresses": [], "external_ids": {}},
    "Load_Balancer_Group": {"name": "", "load_balancer": []},  # no external_ids in the NB schema
}  # fmt: skip
# Reference columns: (table, column) -> the referenced table (all strong, as in the NB schema).
REFS: dict[tuple[str, str], str] = {
    ("Logical_Router", "ports"): "Logical_Router_Port",
    ("Logical_Router", "static_routes"): "Logical_Router_Static_Route",
    ("Logical_Router", "policies"): "Logical_Router_Policy",
    ("Logical_Router", "load_balancer_group"): "Load_Balancer_Group",
    ("Logical_Switch", "ports"): "Logical_Switch_Port",
    ("Logical_Switch", "load_balancer_group"): "Load_Balancer_Group",
}
NON_ROOT = ("Logical_Router_Port", "Logical_Router_Static_Route", "Logical_Router_Policy", "Logical_Switch_Port")
INDEXED = ("Logical_Router_Port", "Logical_Switch_Port", "Address_Set", "Load_Balancer_Group")

Data = dict[str, dict[str, dict[str, Any]]]  # table -> uuid -> column -> value (references as uuids)


class FakeOvsdbError(RuntimeError):
    """What ovsdb-server would answer to the transaction: it was not committed."""


class FakeRow:
    """One row as the IDL shows it: columns as attributes (references as rows), ``addvalue``/``delvalue``."""

    def __init__(self, db: FakeDb, table: str, uuid: str) -> None:
        object.__setattr__(self, "_db", db)
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "uuid", uuid)

    def _columns(self) -> dict[str, Any]:
        try:
            cols: dict[str, Any] = self._db.data[self._table][self.uuid]
        except KeyError:
            raise FakeOvsdbError(f"{self._table} row {self.uuid} was deleted") from None
        return cols

    def __getattr__(self, column: str) -> Any:
        if column not in SCHEMA[self._table]:
            raise AttributeError(f"{self._table} has no column {column!r}")
        value = copy.deepcopy(self._columns()[column])
        ref = REFS.get((self._table, column))
        return [FakeRow(self._db, ref, u) for u in value] if ref else value

    def __setattr__(self, column: str, value: Any) -> None:
        if column not in SCHEMA[self._table]:
            raise AttributeError(f"{self._table} has no column {column!r}")
        if (self._table, column) in REFS:
            value = [v.uuid if isinstance(v, FakeRow) else v for v in value]
        self._columns()[column] = copy.deepcopy(value)

    def addvalue(self, column: str, value: Any) -> None:
        values = self._columns()[column]
        value = value.uuid if isinstance(value, FakeRow) else value
        if value not in values:
            values.append(value)

    def delvalue(self, column: str, value: Any) -> None:
        value = value.uuid if isinstance(value, FakeRow) else value
        values = self._columns()[column]
        if value in values:
            values.remove(value)

    def delete(self) -> None:
        del self._db.data[self._table][self.uuid]


class FakeTable:
    def __init__(self, db: FakeDb, name: str) -> None:
        self._db, self.name = db, name

    @property
    def rows(self) -> dict[str, FakeRow]:
        return {u: FakeRow(self._db, self.name, u) for u in self._db.data[self.name]}


class FakeDb:
    """The database's content and its IDL view (``tables``); ``insert`` is the transaction's insert."""

    def __init__(self, data: Data | None = None, uuids: itertools.count[int] | None = None) -> None:
        self.data: Data = data if data is not None else {t: {} for t in SCHEMA}
        self._uuids = uuids if uuids is not None else itertools.count(1)
        self.tables = {t: FakeTable(self, t) for t in SCHEMA}

    def copy(self) -> FakeDb:
        return FakeDb(copy.deepcopy(self.data), self._uuids)

    def insert(self, table: FakeTable | str) -> FakeRow:
        name = table if isinstance(table, str) else table.name
        uuid = f"{next(self._uuids):08x}-0000-4000-8000-00000000f4ce"
        self.data[name][uuid] = copy.deepcopy(SCHEMA[name])
        return FakeRow(self, name, uuid)

    def commit_checks(self) -> None:
        """What ovsdb-server does and checks at commit (module docstring); FakeOvsdbError when it refuses."""
        self._collect_garbage()
        for (table, column), ref in REFS.items():
            for uuid, cols in self.data[table].items():
                dangling = [u for u in cols[column] if u not in self.data[ref]]
                if dangling:
                    raise FakeOvsdbError(
                        f"referential integrity violation: {table} {uuid} {column} refers to missing {ref} rows"
                    )
        for table in INDEXED:
            names = [cols["name"] for cols in self.data[table].values()]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise FakeOvsdbError(f"constraint violation: {table} has several rows named {', '.join(dup)}")

    def _collect_garbage(self) -> None:
        while True:
            referenced = {u for (table, column) in REFS for cols in self.data[table].values() for u in cols[column]}
            orphans = [(t, u) for t in NON_ROOT for u in self.data[t] if u not in referenced]
            if not orphans:
                return
            for table, uuid in orphans:
                del self.data[table][uuid]
