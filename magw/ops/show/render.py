"""Rows as text tables for people (``magw show`` without ``--json``). Pure: ``now`` is given.

Each topic's table has one header line in capitals and one line per row, columns as wide as their widest cell;
a missing value is ``-``. RTTs are milliseconds, shares percentages, times UTC with their age.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

Row = Mapping[str, Any]
Cell = Callable[[Row], str]


def table(columns: Sequence[tuple[str, Cell]], rows: Sequence[Row]) -> list[str]:
    """The lines of a table: header, then rows; "(none)" under the header when there are no rows."""
    cells = [[fn(r) for _h, fn in columns] for r in rows]
    heads = [h for h, _fn in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(heads)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return [line(heads), *(line(c) for c in cells)] if cells else [line(heads), "(none)"]


def dash(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}"


def rtt_text(rtt: Mapping[str, float] | None) -> str:
    """``last/avg/max`` in milliseconds."""
    if not rtt:
        return "-"
    return f"{ms(rtt.get('last'))}/{ms(rtt.get('average'))}/{ms(rtt.get('max'))}"


def share_text(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def since_text(iso: Any, now: datetime) -> str:
    """``HH:MM:SS (age ago)``; the ISO text itself when it does not parse, ``-`` when absent."""
    if not iso:
        return "-"
    try:
        at = datetime.fromisoformat(str(iso))
    except ValueError:
        return str(iso)
    return f"{at.strftime('%H:%M:%S')} ({age((now - at).total_seconds())} ago)"


def connections_text(rows: Sequence[Row], now: datetime) -> list[str]:
    return table(
        [
            ("NODE", lambda r: dash(r["node"])),
            ("CLUSTER", lambda r: dash(r["cluster"])),
            ("REMOTE", lambda r: dash(r["remote"])),
            ("REMOTE CLUSTER", lambda r: dash(r["remote_cluster"])),
            ("CABLE", lambda r: dash(r["cable"])),
            ("VIA", lambda r: dash(r.get("via"))),
            ("STATE", lambda r: dash(r["state"])),
            ("RTT LAST/AVG/MAX ms", lambda r: rtt_text(r["rtt"])),
            ("SINCE", lambda r: since_text(r["since"], now)),
            ("SHARE", lambda r: share_text(r["share"])),
            ("FLOWS", lambda r: dash(r.get("flows"))),
        ],
        rows,
    )


def public_text(r: Row) -> str:
    """An Endpoint's public IP, with its port when a load balancer gives it one (``ip:port``)."""
    if not r["public_ip"]:
        return "-"
    return str(r["public_ip"]) + (f":{r['public_port']}" if r.get("public_port") else "")


def endpoints_text(rows: Sequence[Row]) -> list[str]:
    return table(
        [
            ("CLUSTER", lambda r: dash(r["cluster"])),
            ("HOSTNAME", lambda r: dash(r["hostname"])),
            ("PRIVATE IP", lambda r: dash(r["private_ip"])),
            ("PUBLIC IP", public_text),
            ("CABLE", lambda r: dash(r["cable"])),
            ("PUBLIC KEY", lambda r: dash(r["public_key"] and f"{r['public_key'][:10]}...")),
            ("GLOBAL IPS", lambda r: str(len(r["global_ips"])) if r["global_ips"] else "-"),
        ],
        rows,
    )


def gateways_text(rows: Sequence[Row]) -> list[str]:
    def paths(r: Row) -> str:
        return "-" if r["paths"] is None else f"{r['paths_up']}/{r['paths']} up"

    def health(r: Row) -> str:
        text = f"{r['health']} (by {', '.join(r['down_by'])})" if r["down_by"] else str(r["health"])
        lost = r.get("no_reach") or []
        return f"{text}, no reach to {', '.join(lost)}" if lost else text

    return table(
        [
            ("CLUSTER", lambda r: dash(r["cluster"])),
            ("NODE", lambda r: dash(r["node"])),
            ("PRIVATE IP", lambda r: dash(r["private_ip"])),
            ("PUBLISHED", lambda r: dash(r["published"])),
            ("HA STATUS", lambda r: dash(r["ha_status"])),
            ("HEALTH", health),
            ("PATHS", paths),
        ],
        rows,
    )


def networks_text(rows: Sequence[Row]) -> list[str]:
    return table(
        [
            ("CLUSTER", lambda r: dash(r["cluster"])),
            ("POD CIDRS", lambda r: dash(r["pod_cidrs"])),
            ("SERVICE CIDRS", lambda r: dash(r["service_cidrs"])),
            ("GLOBAL CIDRS", lambda r: dash(r["global_cidrs"])),
            ("CNI", lambda r: dash(r["cni"])),
            ("CABLE", lambda r: dash(r["cable"])),
            ("STRATEGY", lambda r: dash(r["strategy"])),
            ("MULTI-ACTIVE", lambda r: dash(r["multi_active"])),
        ],
        rows,
    )


def globalnet_text(rows: Sequence[Row]) -> list[str]:
    if not rows:
        return ["(no cluster with a global CIDR)"]
    lines: list[str] = []
    for r in rows:
        lines.append(
            f"cluster {r['cluster']}: global CIDRs {dash(r['global_cidrs'])}, "
            f"pool {r['pool_used']}/{r['pool_size']} addresses held"
        )
        objs = [{**o, "ref": f"{o['namespace']}/{o['name']}" if o["namespace"] else o["name"]} for o in r["objects"]]
        lines += [
            "  " + line
            for line in table(
                [
                    ("KIND", lambda o: str(o["kind"])),
                    ("NAME", lambda o: str(o["ref"])),
                    ("ADDRESSES", lambda o: dash(o["addresses"])),
                    ("GATEWAYS", lambda o: "; ".join(f"{n} {len(ips)}" for n, ips in o["gateways"].items()) or "-"),
                    ("ALLOCATED", lambda o: dash(o["allocated"])),
                ],
                objs,
            )
        ]
    return lines


def egressgw_text(rows: Sequence[Row], now: datetime) -> list[str]:
    return table(
        [
            ("CLUSTER", lambda r: dash(r["cluster"])),
            ("VIP", lambda r: f"{r['name']} {r['vip']}"),
            ("VRID", lambda r: dash(r["vrid"])),
            ("CANDIDATES", lambda r: dash(r["candidates"])),
            ("HOLDER", lambda r: dash(r["holder"])),
            ("SINCE", lambda r: since_text(r["since"], now)),
            ("BINDINGS", lambda r: "; ".join(r["bindings"]) or "-"),
        ],
        rows,
    )


def versions_text(rows: Sequence[Row]) -> list[str]:
    return table(
        [
            ("COMPONENT", lambda r: dash(r.get("component"))),
            ("WHERE", lambda r: dash(r.get("where"))),
            ("VERSION", lambda r: dash(r.get("version"))),
        ],
        rows,
    )
