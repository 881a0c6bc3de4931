"""Our rows as the OVSDB IDL holds them: reading them into ``OvnState`` and writing a change set.

Both run inside an ovsdbapp command (``nbdriver``), in the IDL's thread. ``tables`` is the IDL's
``{name: Table}``; a row's columns are attributes (``row.name``, ``row.ports``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from magw.desired.ovn.planner import OvnPlan
from magw.desired.ovn.rows import (
    GATEWAY_KEY,
    KEY_KEY,
    LB_SNAT_OPTION,
    LB_SNAT_VALUE,
    OWNER,
    OWNER_KEY,
    SLOT_KEY,
    AddressSet,
    OvnRow,
    OvnState,
    Policy,
    Router,
    RouterPort,
    StaticRoute,
    Switch,
    SwitchPort,
    external_ids,
    key_text,
    router_options,
)
from magw.reconcile.ovndiff import OvnChangeSet

# Where a child row is referenced from: (parent table, parent column).
PARENT = {
    "Logical_Router_Port": ("Logical_Router", "ports"),
    "Logical_Switch_Port": ("Logical_Switch", "ports"),
    "Logical_Router_Static_Route": ("Logical_Router", "static_routes"),
    "Logical_Router_Policy": ("Logical_Router", "policies"),
}
_NAMED = ("Logical_Router", "Logical_Switch", "Logical_Router_Port", "Logical_Switch_Port", "Address_Set")


class OvnInputError(ValueError):
    """The NB lacks what the plan relies on, or holds a foreign row with one of our names: nothing written."""


def refuse(problems: list[str]) -> None:
    """OvnInputError listing every problem on one line (nothing when there is none)."""
    if problems:
        raise OvnInputError("ovn: refusing to write the NB: " + "; ".join(problems))


def _ours(row: Any) -> bool:
    return bool(_col(row, "external_ids").get(OWNER_KEY) == OWNER)


def _parents(tables: Any, child_table: str) -> dict[Any, str]:
    """Child row uuid -> the name of the row referencing it."""
    parent_table, column = PARENT[child_table]
    return {child.uuid: p.name for p in tables[parent_table].rows.values() for child in getattr(p, column)}


def _col(row: Any, column: str) -> Any:
    """A column of a row that holds no references (strings, integers, maps of strings), as Python values.

    Shaped for speed (profiled: python-ovs' ``Row.__getattr__``, which re-checks pending changes and
    mutations on every read, was 0.7 of 0.8 s of observing 3,130 rows): a committed row's Datum is converted
    directly. Rows with pending changes, and the fake's rows, are read the ordinary way.
    """
    data = row.__dict__.get("_data")
    if data is None or row.__dict__.get("_changes") or row.__dict__.get("_mutations"):
        return getattr(row, column)
    datum = data.get(column)
    return getattr(row, column) if datum is None else datum.to_python(_no_refs)


def _no_refs(atom: Any, base: Any) -> Any:
    return atom  # only called for UUID atoms, which the columns _col reads do not hold


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _policy(r: Any, parent: str) -> Policy:
    """One of our policies as read back; an action we never write (changed behind our back) is read as a marker
    nexthop of a reroute, so the diff sees it differ from the plan and the update rewrites the action too."""
    hops = list(r.nexthops)
    if r.action in ("reroute", "allow"):
        return Policy(router=parent, priority=r.priority, match=r.match, nexthops=hops, action=r.action)
    return Policy(router=parent, priority=r.priority, match=r.match, nexthops=[*hops, f"<action {r.action}>"])


def _router(r: Any, _parent: str) -> Router:
    return Router(
        name=r.name,
        chassis=r.options.get("chassis"),
        lb_snat=r.options.get(LB_SNAT_OPTION) == LB_SNAT_VALUE,
        lb_group=r.load_balancer_group[0].name if r.load_balancer_group else None,
        gateway=r.external_ids.get(GATEWAY_KEY),
        slot=_int(r.external_ids.get(SLOT_KEY)),
    )


def _route(r: Any, parent: str) -> StaticRoute:
    return StaticRoute(
        router=parent,
        prefix=_col(r, "ip_prefix"),
        nexthop=_col(r, "nexthop"),
        output_port=(_col(r, "output_port") or [""])[0],
    )


# Table -> our value of one of its IDL rows, read from the row's real columns (and its parent's name).
_READ: dict[str, Callable[[Any, str], OvnRow]] = {
    "Address_Set": lambda r, _p: AddressSet(name=r.name, addresses=r.addresses),
    "Logical_Router": _router,
    "Logical_Switch": lambda r, _p: Switch(name=r.name),
    "Logical_Router_Port": lambda r, p: RouterPort(name=r.name, router=p, mac=r.mac, networks=r.networks),
    "Logical_Switch_Port": lambda r, p: SwitchPort(
        name=r.name, switch=p, type=r.type, addresses=r.addresses, options=r.options
    ),
    "Logical_Router_Static_Route": _route,
    "Logical_Router_Policy": _policy,
}


def read_ours(tables: Any, table: str) -> list[tuple[OvnRow, Any]]:
    """Every row of ours in ``table``: (its value, read from its real columns; the IDL row)."""
    parents = _parents(tables, table) if table in PARENT else {}
    read = _READ[table]
    return [(read(r, parents.get(r.uuid, "")), r) for r in tables[table].rows.values() if _ours(r)]


def observe_rows(tables: Any) -> OvnState:
    """Every row of ours, with its parent and its real columns (drift shows as a difference)."""

    def values(table: str) -> list[Any]:
        return [value for value, _row in read_ours(tables, table)]

    return OvnState(
        address_sets=values("Address_Set"),
        routers=values("Logical_Router"),
        switches=values("Logical_Switch"),
        router_ports=values("Logical_Router_Port"),
        switch_ports=values("Logical_Switch_Port"),
        routes=values("Logical_Router_Static_Route"),
        policies=values("Logical_Router_Policy"),
    )


def _invalid(row: OvnRow) -> str | None:
    """Why the NB cannot hold ``row`` as it is. The Python IDL does not refuse such values: it silently writes
    the column's default (priority 0, networks ``[""]``), so we refuse them here."""
    if isinstance(row, Policy) and not 0 <= row.priority <= 32767:
        return f"policy {key_text(row)!r} has priority {row.priority}, outside 0..32767"
    if isinstance(row, RouterPort) and not (row.networks and row.mac):
        return f"router port {row.name!r} needs a MAC and networks"
    return None


class NbWriter:
    """Writes one change set into one IDL transaction (after checking everything it relies on)."""

    def __init__(self, tables: Any, txn: Any) -> None:
        self.tables = tables
        self.txn = txn
        # By name; where a foreign row has the name of one of ours, ours (written last) wins.
        self.by_name: dict[str, dict[str, Any]] = {
            t: {r.name: r for r in sorted(tables[t].rows.values(), key=_ours)} for t in _NAMED
        }
        self.by_name["Load_Balancer_Group"] = {r.name: r for r in tables["Load_Balancer_Group"].rows.values()}
        self.ours_by_key: dict[str, dict[str, Any]] = {
            t: {r.external_ids.get(KEY_KEY): r for r in tables[t].rows.values() if _ours(r)}
            for t in (*_NAMED, "Logical_Router_Static_Route", "Logical_Router_Policy")
        }
        # Our rows by the key their real columns give them (what observe_rows reads), per table, made on first
        # need: a row changed behind our back in a column of its key no longer reads as its ``magw-key``.
        self._as_read: dict[str, dict[str, list[Any]]] = {}
        self._claimed: set[Any] = set()  # rows an update or delete of this transaction already took

    # -- checks ------------------------------------------------------------------------------------------

    def problems(self, changes: OvnChangeSet | None, plan: OvnPlan | None) -> list[str]:
        """What the NB lacks for ``plan``, and every foreign row holding a name we would create."""
        problems: list[str] = []
        if plan is not None:
            routers = self.by_name["Logical_Router"]
            problems += [f"no Logical_Router {n!r}" for n in plan.needs_routers if n not in routers]
            groups = self.by_name["Load_Balancer_Group"]
            problems += [f"no Load_Balancer_Group {n!r}" for n in plan.needs_lb_groups if n not in groups]
        creates = changes.creates if changes is not None else ()
        written = [*creates, *(u.new for u in changes.updates)] if changes is not None else []
        problems += [p for row in written if (p := _invalid(row))]
        for row in creates:
            if row.table in _NAMED and any(
                r.name == key_text(row) and not _ours(r) for r in self.tables[row.table].rows.values()
            ):
                problems.append(f"a {row.table} named {row.key!r} exists and is not magw's")
        return problems

    # -- writing -----------------------------------------------------------------------------------------

    def apply(self, changes: OvnChangeSet, plan: OvnPlan | None, problems: list[str] | None = None) -> None:
        """Check (``problems``: found elsewhere, e.g. in the SB), then write; OvnInputError before any write."""
        refuse(self.problems(changes, plan) + list(problems or ()))
        for row in changes.deletes:
            self._delete(row)
        for row in changes.creates:
            self._create(row)
        for update in changes.updates:
            self._update(update.old, update.new)

    def _parent(self, table: str, name: str) -> Any:
        row = self.by_name[table].get(name)
        if row is None:
            raise OvnInputError(f"ovn: no {table} {name!r} to attach to")
        return row

    def _find(self, row: OvnRow, *, stale_first: bool = False) -> Any:
        """The row of ours that reads as ``row`` (an observed value the diff names), each row taken once.

        Usually the row whose ``magw-key`` is ``row``'s key; but a row drifted in a column of its key (a route's
        prefix, a policy's match) reads as another key, so its ``magw-key`` is stale and only its columns tell.
        ``stale_first`` (deletes): among rows reading as the same key, take one with a stale ``magw-key``
        first, so the row that is exactly ours is the one that stays."""
        key = key_text(row)
        found = self.ours_by_key[row.table].get(key)
        if not stale_first and found is not None and found.uuid not in self._claimed and self._reads_as(found, row):
            self._claimed.add(found.uuid)
            return found
        candidates = [r for r in self._read_index(row.table).get(key, ()) if r.uuid not in self._claimed]
        if stale_first:
            candidates.sort(key=lambda r: r.external_ids.get(KEY_KEY) == key)
        if not candidates:
            raise OvnInputError(f"ovn: our {row.table} {key!r} went away during the sync")
        self._claimed.add(candidates[0].uuid)
        return candidates[0]

    def _reads_as(self, found: Any, row: OvnRow) -> bool:
        """Whether IDL row ``found`` reads as ``row``'s key (its parent taken as ``row``'s)."""
        return bool(_READ[row.table](found, self._parent_name(row)).key == row.key)

    def _read_index(self, table: str) -> dict[str, list[Any]]:
        index = self._as_read.get(table)
        if index is None:
            index = {}
            for value, idl_row in read_ours(self.tables, table):
                index.setdefault(key_text(value), []).append(idl_row)
            self._as_read[table] = index
        return index

    def _create(self, row: OvnRow) -> None:
        new = self.txn.insert(self.tables[row.table])
        new.external_ids = external_ids(row)
        self._columns(new, row)
        if row.table in _NAMED:
            self.by_name[row.table][key_text(row)] = new
        self.ours_by_key[row.table][key_text(row)] = new
        if row.table in PARENT:
            parent_table, column = PARENT[row.table]
            self._parent(parent_table, self._parent_name(row)).addvalue(column, new.uuid)

    def _update(self, old: OvnRow, new: OvnRow) -> None:
        row = self._find(old)
        row.external_ids = external_ids(new)
        self._columns(row, new)
        if new.table in PARENT and self._parent_name(old) != self._parent_name(new):  # moved to another parent
            parent_table, column = PARENT[new.table]
            previous = self.by_name[parent_table].get(self._parent_name(old))
            if previous is not None:
                previous.delvalue(column, row.uuid)
            self._parent(parent_table, self._parent_name(new)).addvalue(column, row.uuid)

    def _delete(self, row: OvnRow) -> None:
        found = self._find(row, stale_first=True)
        if row.table in PARENT:
            parent_table, column = PARENT[row.table]
            parent = self.by_name[parent_table].get(self._parent_name(row))
            if parent is not None:
                parent.delvalue(column, found.uuid)
        found.delete()

    @staticmethod
    def _parent_name(row: OvnRow) -> str:
        if isinstance(row, RouterPort | StaticRoute | Policy):
            return row.router
        if isinstance(row, SwitchPort):
            return row.switch
        return ""

    def _columns(self, target: Any, row: OvnRow) -> None:
        if isinstance(row, AddressSet):
            target.name, target.addresses = row.name, list(row.addresses)
        elif isinstance(row, Router):
            target.name = row.name
            target.options = router_options(row)
            group = self.by_name["Load_Balancer_Group"].get(row.lb_group) if row.lb_group else None
            target.load_balancer_group = [group.uuid] if group is not None else []
        elif isinstance(row, Switch):
            target.name = row.name
        elif isinstance(row, RouterPort):
            target.name, target.mac, target.networks = row.name, row.mac, list(row.networks)
        elif isinstance(row, SwitchPort):
            target.name, target.type = row.name, row.type
            target.addresses, target.options = list(row.addresses), dict(row.options)
        elif isinstance(row, StaticRoute):
            target.ip_prefix, target.nexthop = row.prefix, row.nexthop
            target.output_port = [row.output_port] if row.output_port else []
        elif isinstance(row, Policy):
            target.priority, target.match, target.action = row.priority, row.match, row.action
            target.nexthops = list(row.nexthops)
