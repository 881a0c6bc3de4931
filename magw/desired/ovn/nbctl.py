"""An OVN plan as ``ovn-nbctl`` commands (pure text).

For people (``magw ovn plan --nbctl`` shows what a sync would create, in the tool operators know) and for the
benchmark, which times ``ovn-nbctl`` doing the same creates in one batch against our driver
(benchmarks/ovn_sync.py). Only creates: the commands build our rows into an NB that has none of them. A router's
Load_Balancer_Group is named by a UUID or, for a line to paste, by a reference that ``lb_group_lookups`` binds
to the group found by name in the same batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from magw.desired.ovn.rows import (
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
    router_options,
)


def _q(value: str) -> str:
    """An OVSDB string in ovn-nbctl's syntax (JSON string quoting is what it parses)."""
    return json.dumps(value)


def _set(values: tuple[str, ...]) -> str:
    return "[" + ",".join(_q(v) for v in values) + "]"


def _ids(row: OvnRow) -> list[str]:
    return [f"external_ids:{_q(k)}={_q(v)}" for k, v in sorted(external_ids(row).items())]


def row_commands(row: OvnRow, lb_group_uuids: Mapping[str, str], ident: int = 0) -> list[list[str]]:
    """The ovn-nbctl commands (each an argv tail) that create ``row``; ``ident`` names its new-row reference
    (``--id=@rN``), unique within one batch."""
    if isinstance(row, AddressSet):
        return [["create", "Address_Set", f"name={_q(row.name)}", f"addresses={_set(row.addresses)}", *_ids(row)]]
    if isinstance(row, Router):
        cols = _ids(row)
        cols += [f"options:{_q(k)}={_q(v)}" for k, v in router_options(row).items()]
        if row.lb_group:
            cols.append(f"load_balancer_group={lb_group_uuids[row.lb_group]}")
        return [["lr-add", row.name], ["set", "Logical_Router", row.name, *cols]]
    if isinstance(row, Switch):
        return [["ls-add", row.name], ["set", "Logical_Switch", row.name, *_ids(row)]]
    if isinstance(row, RouterPort):
        return [
            ["lrp-add", row.router, row.name, row.mac, *row.networks],
            ["set", "Logical_Router_Port", row.name, *_ids(row)],
        ]
    if isinstance(row, SwitchPort):
        cols = [f"type={_q(row.type)}", f"addresses={_set(row.addresses)}", *_ids(row)]
        cols += [f"options:{_q(k)}={_q(v)}" for k, v in row.options]
        return [["lsp-add", row.switch, row.name], ["set", "Logical_Switch_Port", row.name, *cols]]
    if isinstance(row, StaticRoute):
        rid = f"@r{ident}"
        return [
            [
                f"--id={rid}", "create", "Logical_Router_Static_Route", f"ip_prefix={_q(row.prefix)}",
                f"nexthop={_q(row.nexthop)}", f"output_port={_q(row.output_port)}", *_ids(row),
            ],
            ["add", "Logical_Router", row.router, "static_routes", rid],
        ]  # fmt: skip
    if isinstance(row, Policy):
        pid = f"@p{ident}"
        return [
            [
                f"--id={pid}", "create", "Logical_Router_Policy", f"priority={row.priority}", f"match={_q(row.match)}",
                f"action={row.action}", f"nexthops={_set(row.nexthops)}", *_ids(row),
            ],
            ["add", "Logical_Router", row.router, "policies", pid],
        ]  # fmt: skip
    raise TypeError(f"not an OVN row of ours: {row!r}")


def lb_group_lookups(groups: Iterable[str]) -> tuple[list[list[str]], dict[str, str]]:
    """Commands that look each Load_Balancer_Group up by name inside the batch (``--id=@gN get``: ovn-nbctl
    fails the whole batch when one is missing), and the reference to pass for each to ``state_commands``."""
    refs = {group: f"@g{i}" for i, group in enumerate(sorted(set(groups)))}
    return [[f"--id={ref}", "get", "Load_Balancer_Group", group] for group, ref in refs.items()], refs


def state_commands(state: OvnState, lb_group_uuids: Mapping[str, str]) -> list[list[str]]:
    """Every command creating ``state``, in dependency order (routers before their ports and routes)."""
    return [cmd for i, row in enumerate(state.rows()) for cmd in row_commands(row, lb_group_uuids, i)]


def batch_argv(commands: list[list[str]]) -> list[str]:
    """One ``ovn-nbctl`` argument list running ``commands`` in one transaction (joined with ``--``)."""
    argv: list[str] = []
    for cmd in commands:
        if argv:
            argv.append("--")
        argv += cmd
    return argv
