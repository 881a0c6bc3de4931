"""The OVN driver: our NB rows through ovsdbapp's IDL, one transaction per sync; SB chassis read-only.

Reads and writes run as ovsdbapp commands, so they happen in the connection's own thread against the IDL's
replica (never a concurrent read of rows the IDL thread is updating). ``apply`` is ONE command in ONE
transaction: it checks the plan's foreign needs and our names first and raises ``OvnInputError`` before any
change, so a refused sync writes nothing; an error from the server aborts the whole transaction too.

Children are linked into their parents in the same transaction as they are created (the NB's ports, routes
and policies are not root rows: unreferenced, the server deletes them). We never use ``lr_route_add``
(ovsdbapp 3.0.0 mishandles several on one router in one transaction): every row is written column by column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from ovsdbapp.backend.ovs_idl import command, connection, idlutils
from ovsdbapp.schema.ovn_northbound import impl_idl as nb_impl
from ovsdbapp.schema.ovn_southbound import impl_idl as sb_impl

from magw.desired.ovn.planner import OvnPlan
from magw.desired.ovn.rows import OvnState
from magw.drivers.ovn.nbrows import NbWriter, observe_rows, refuse
from magw.reconcile.ovndiff import OvnChangeSet, ovn_diff

# Only the columns we read or write: the IDL parses every registered column of every row it receives,
# including the echo of our own inserts, and that parse was most of a large sync's time (profiled:
# 1,000 remote CIDRs, 3 gateways: python-ovs' update parsing was 1.6 of 2.3 s in the transaction).
NB_COLUMNS: dict[str, tuple[str, ...]] = {
    "Logical_Router": ("name", "options", "external_ids", "load_balancer_group", "ports", "static_routes", "policies"),
    "Logical_Router_Port": ("name", "mac", "networks", "external_ids"),
    "Logical_Router_Static_Route": ("ip_prefix", "nexthop", "output_port", "external_ids"),
    "Logical_Router_Policy": ("priority", "match", "action", "nexthops", "external_ids"),
    "Logical_Switch": ("name", "ports", "external_ids"),
    "Logical_Switch_Port": ("name", "type", "addresses", "options", "external_ids"),
    "Address_Set": ("name", "addresses", "external_ids"),
    "Load_Balancer_Group": ("name",),
}
SB_COLUMNS: dict[str, tuple[str, ...]] = {"Chassis": ("name", "hostname")}


class OvnConnectError(RuntimeError):
    """A database could not be reached or did not answer in time (one line: which, and why)."""


class _Run(command.BaseCommand):  # type: ignore[misc]  # ovsdbapp is untyped
    """Runs ``fn(tables, txn)`` in the connection thread, inside the transaction."""

    def __init__(self, api: Any, fn: Callable[[Any, Any], Any]) -> None:
        super().__init__(api)
        self.fn = fn

    def run_idl(self, txn: Any) -> None:
        self.result = self.fn(self.api.tables, txn)


def _open(remote: str, schema: str, columns: dict[str, tuple[str, ...]], timeout: float) -> connection.Connection:
    try:
        helper = idlutils.get_schema_helper(remote, schema)
    except Exception as exc:
        raise OvnConnectError(f"ovn: cannot reach {schema} at {remote}: {exc}") from None
    for table, names in columns.items():
        helper.register_columns(table, list(names))
    return connection.Connection(connection.OvsdbIdl(remote, helper), timeout=int(max(1, timeout)))


def _api(impl: type, conn: connection.Connection, remote: str, timeout: float) -> Any:
    """An ovsdbapp API object of its own over ``conn`` (started here).

    ovsdbapp keeps the connection in a CLASS attribute, set only once per process: a second driver (another
    database, or a reconnect) would silently reuse the first connection. A subclass per driver has its own.
    """
    own = type(f"Magw{impl.__name__}", (impl,), {"_ovsdb_connection": None})
    try:
        return own(conn)
    except Exception as exc:
        conn.stop()
        raise OvnConnectError(
            f"ovn: {getattr(impl, 'schema', impl.__name__)} at {remote} did not sync in {timeout:g} s: {exc}"
        ) from None


@attrs.define
class OvnNbDriver:
    """Our rows in one NB, and the chassis of its SB."""

    nb_api: Any
    sb_api: Any
    _conns: list[connection.Connection]

    def _run(self, api: Any, fn: Callable[[Any, Any], Any]) -> Any:
        cmd = _Run(api, fn)
        with api.transaction(check_error=True) as txn:
            txn.add(cmd)
        return cmd.result

    def observe(self) -> OvnState:
        state: OvnState = self._run(self.nb_api, lambda tables, _txn: observe_rows(tables))
        return state

    def chassis_by_hostname(self) -> dict[str, str]:
        def read(tables: Any, _txn: Any) -> dict[str, str]:
            return {r.hostname: r.name for r in tables["Chassis"].rows.values() if r.hostname}

        chassis: dict[str, str] = self._run(self.sb_api, read)
        return chassis

    def _chassis_problems(self, plan: OvnPlan | None) -> list[str]:
        if plan is None or not plan.needs_chassis:
            return []
        known = set(self.chassis_by_hostname().values())
        return [f"no SB Chassis {c!r}" for c in plan.needs_chassis if c not in known]

    def check(self, plan: OvnPlan, changes: OvnChangeSet | None = None) -> None:
        """OvnInputError (one line, every problem) when the plan's foreign router, LB group or SB chassis is
        missing, or a row ``changes`` (default: the diff from what we own now) would create by name exists and
        is not ours. Reads only."""

        def nb_problems(tables: Any, _txn: Any) -> list[str]:
            todo = changes if changes is not None else ovn_diff(plan.state, observe_rows(tables))
            return NbWriter(tables, None).problems(todo, plan)

        refuse(self._chassis_problems(plan) + self._run(self.nb_api, nb_problems))

    def apply(self, changes: OvnChangeSet, plan: OvnPlan | None) -> int:
        """Carry ``changes`` out in one transaction; the number of row operations. Nothing written on error.

        The NB checks run inside that transaction's command, against the replica the writes are made from."""
        chassis = self._chassis_problems(plan)
        if changes.empty:
            refuse(chassis)
            return 0
        self._run(self.nb_api, lambda tables, txn: NbWriter(tables, txn).apply(changes, plan, chassis))
        return len(changes)

    def cleanup(self) -> int:
        """Delete every row of ours, in one transaction (foreign parents keep everything but our references)."""
        return self.apply(ovn_diff(OvnState(), self.observe()), None)

    def close(self) -> None:
        for conn in self._conns:
            conn.stop()
        self._conns.clear()


def connect(nb_remote: str, sb_remote: str, timeout: float = 10.0) -> OvnNbDriver:
    """Connect to the NB and the SB; OvnConnectError (one line) when either cannot be reached."""
    nb = _open(nb_remote, "OVN_Northbound", NB_COLUMNS, timeout)
    nb_api = _api(nb_impl.OvnNbApiIdlImpl, nb, nb_remote, timeout)
    try:
        sb = _open(sb_remote, "OVN_Southbound", SB_COLUMNS, timeout)
        sb_api = _api(sb_impl.OvnSbApiIdlImpl, sb, sb_remote, timeout)
    except OvnConnectError:
        nb.stop()
        raise
    return OvnNbDriver(nb_api, sb_api, [nb, sb])
