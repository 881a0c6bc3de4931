"""The two sides of the OVN contract suite (tests/unit/drivers/test_ovn_contract.py): FakeOvnNb, and the real driver
on a
real NB/SB ovsdb-server pair. Each side is seeded and drifted by its own means, never through the driver under
test: ``ovn-nbctl`` on the real side, the fake's nbctl-like helpers on the fake side (``nb`` takes the same
``ovn-nbctl`` words on both). ``rows`` is the whole NB (``ovsdb-client dump`` on the real side) as
table -> uuid -> column -> plain value; ``commits`` counts the NB's committed transactions (records in the
database file on the real side: nothing but the test writes it, there is no northd).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest

from magw.desired.ovn.rows import OWNER, OWNER_KEY, OvnRow, Policy, RouterPort, StaticRoute, SwitchPort, key_text
from magw.drivers.ovn.fake import FakeOvnNb
from tests.support.ovn_fixture import CMD_TIMEOUT, OvnDbs, build_ovnk, nbctl, ovn_databases, ovn_missing

NODES = ("node1", "node2", "gw1", "gw2", "gw3")
NB_TABLES = (
    "Logical_Router",
    "Logical_Router_Port",
    "Logical_Router_Static_Route",
    "Logical_Router_Policy",
    "Logical_Switch",
    "Logical_Switch_Port",
    "Address_Set",
)
Rows = dict[str, dict[str, dict[str, Any]]]


class World(Protocol):
    driver: Any

    def seed(self) -> None: ...
    def nb(self, *args: str) -> None: ...
    def rows(self) -> Rows: ...
    def commits(self) -> int: ...
    def count_ours(self, table: str) -> int: ...
    def drift_delete(self, row: OvnRow) -> None: ...
    def drift_set(self, row: OvnRow, **columns: Any) -> None: ...


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), str(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(sorted(value, key=str))
    return value


class FakeWorld:
    def __init__(self) -> None:
        self.driver = FakeOvnNb()

    def seed(self) -> None:
        self.driver.seed_ovnk(NODES)

    def nb(self, *args: str) -> None:
        f, (cmd, *rest) = self.driver, args
        if cmd == "lr-add":
            f.lr_add(rest[0])
        elif cmd == "lr-del":
            f.lr_del(rest[0])
        elif cmd == "ls-add":
            f.ls_add(rest[0])
        elif cmd == "lsp-add":
            f.lsp_add(rest[0], rest[1])
        elif cmd == "lrp-add":
            f.lrp_add(rest[0], rest[1], rest[2], rest[3:])
        elif cmd == "lr-policy-add":
            f.lr_policy_add(rest[0], int(rest[1]), rest[2], rest[3], rest[4].split(",") if len(rest) > 4 else ())
        elif cmd == "create" and rest[0] == "Address_Set":
            f.address_set_add(rest[1].removeprefix("name="))
        else:
            raise NotImplementedError(args)

    def rows(self) -> Rows:
        return {
            t: {u: {c: _plain(v) for c, v in cols.items()} for u, cols in rows.items()}
            for t, rows in self.driver.rows().items()
        }

    def commits(self) -> int:
        return self.driver.transactions

    def count_ours(self, table: str) -> int:
        return sum(1 for cols in self.driver.rows()[table].values() if cols["external_ids"].get(OWNER_KEY) == OWNER)

    def drift_delete(self, row: OvnRow) -> None:
        self.driver.drift_delete(row.table, key_text(row))

    def drift_set(self, row: OvnRow, **columns: Any) -> None:
        self.driver.drift_set(row.table, key_text(row), **columns)


def _ovsdb(value: Any) -> Any:
    """OVSDB JSON notation (RFC 7047) as plain values: a uuid as its text, a set as a sorted tuple (a set of
    one may be written as its element), a map as sorted pairs."""
    if isinstance(value, list) and value and value[0] == "uuid":
        return value[1]
    if isinstance(value, list) and value and value[0] == "set":
        return tuple(sorted((_ovsdb(v) for v in value[1]), key=str))
    if isinstance(value, list) and value and value[0] == "map":
        return tuple(sorted((str(_ovsdb(k)), str(_ovsdb(v))) for k, v in value[1]))
    return value


def _atom(value: Any) -> str:
    """A value in ovn-nbctl's database-command syntax (quoted strings, [] sets, {} maps)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}={json.dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


class RealWorld:
    def __init__(self, dbs: OvnDbs, driver: Any) -> None:
        self.dbs, self.driver = dbs, driver

    @classmethod
    @contextmanager
    def started(cls, tmp_path: Path) -> Iterator[RealWorld]:
        reason = ovn_missing()
        if reason:
            import pytest

            pytest.skip(reason)
        from magw.drivers.ovn import connect

        with ovn_databases(tmp_path / "ovn", northd=False) as dbs:
            world = cls(dbs, connect(dbs.nb, dbs.sb, timeout=10))
            try:
                yield world
            finally:
                world.driver.close()

    def _reconnect(self) -> None:
        """A driver whose replica holds what ovn-nbctl just committed. The running driver's IDL receives it
        too, but asynchronously: a new connection's first update is the whole database, after that commit."""
        from magw.drivers.ovn import connect

        self.driver.close()
        self.driver = connect(self.dbs.nb, self.dbs.sb, timeout=10)

    def seed(self) -> None:
        build_ovnk(self.dbs, nodes=NODES)
        self._reconnect()

    def nb(self, *args: str) -> None:
        nbctl(self.dbs, *args)
        self._reconnect()

    def rows(self) -> Rows:
        out = subprocess.run(
            ["ovsdb-client", "dump", "-f", "json", self.dbs.nb, "OVN_Northbound"],
            check=True, capture_output=True, text=True, timeout=CMD_TIMEOUT,
        ).stdout  # fmt: skip
        rows: Rows = {}
        for line in out.splitlines():
            table = json.loads(line)
            name = table["caption"].removesuffix(" table")
            rows[name] = {}
            for data in table["data"]:
                cols = {h: _ovsdb(v) for h, v in zip(table["headings"], data, strict=True)}
                rows[name][cols.pop("_uuid")] = cols
        return rows

    def commits(self) -> int:
        return (self.dbs.dir / "nb.db").read_bytes().count(b"OVSDB JSON ")

    def _uuids(self, table: str, *conditions: str) -> list[str]:
        return nbctl(self.dbs, "--bare", "--columns=_uuid", "find", table, *conditions).split()

    def count_ours(self, table: str) -> int:
        return len(self._uuids(table, f"external_ids:{json.dumps(OWNER_KEY)}={json.dumps(OWNER)}"))

    def _uuid(self, row: OvnRow) -> str:
        (uuid,) = self._uuids(row.table, f'external_ids:"magw-key"={json.dumps(key_text(row))}')
        return uuid

    def drift_delete(self, row: OvnRow) -> None:
        if isinstance(row, StaticRoute):  # (each self.nb reconnects)
            self.nb(
                "lr-route-del", row.router, row.prefix, row.nexthop, *([row.output_port] if row.output_port else [])
            )
        elif isinstance(row, RouterPort):
            self.nb("lrp-del", row.name)
        elif isinstance(row, SwitchPort):
            self.nb("lsp-del", row.name)
        elif isinstance(row, Policy):
            self.nb("lr-policy-del", row.router, self._uuid(row))
        else:
            self.nb("destroy", row.table, self._uuid(row))

    def drift_set(self, row: OvnRow, **columns: Any) -> None:
        self.nb("set", row.table, self._uuid(row), *(f"{c}={_atom(v)}" for c, v in columns.items()))


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.ovn)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """Each contract test runs twice: on FakeOvnNb, and on the real driver against a real NB/SB pair."""
    if request.param == "fake":
        yield FakeWorld()
        return
    with RealWorld.started(tmp_path) as real:
        yield real
