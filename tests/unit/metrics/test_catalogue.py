"""The metrics catalogue is docs/metrics.md's table, each daemon registers exactly its rows, and the Grafana
dashboard asks only for metrics of the catalogue."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from magw.controllers.egressgw.controller import EgressController
from magw.daemons.gateway.app import Gateway
from magw.metrics.catalogue import CATALOGUE, of
from magw.metrics.egress import EgressMetrics
from magw.metrics.globalnet import GlobalnetMetrics
from magw.sources.file.egressgw_store import EgressStore
from tests.support.paths import REPO
from tests.unit.daemons.test_agent_registries import agent, broker

ROW = re.compile(r"^\| `(\w+)` \| (\w+) \| (.+?) \| ([\w-]+) \| (.+) \|$")
DASHBOARD = REPO / "deploy" / "grafana" / "magw.json"


def _doc_rows() -> list[tuple[str, str, tuple[str, ...], str, str]]:
    rows = []
    for line in (REPO / "docs" / "metrics.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            labels = () if m[3] == "-" else tuple(x.strip(" `") for x in m[3].split(","))
            rows.append((m[1], m[2], labels, m[4], m[5]))
    return rows


def test_the_docs_table_is_the_catalogue() -> None:
    assert _doc_rows() == [(m.name, m.kind, m.labels, m.daemon, m.help) for m in CATALOGUE]


def _families(registry: CollectorRegistry) -> set[tuple[str, str]]:
    """(name as exposed, type) of every family in ``registry``: a counter ``x`` is exposed as ``x_total``."""
    return {(f.name + ("_total" if f.type == "counter" else ""), f.type) for f in registry.collect()}


def _rows(daemon: str) -> set[tuple[str, str]]:
    return {(m.name, m.kind) for m in of(daemon)}


def test_the_route_agent_registers_its_rows(tmp_path: Path) -> None:
    a = agent(tmp_path, "e-gw1")
    assert a.registry is not None
    assert _families(a.registry) == _rows("route-agent")


def test_the_gateway_registers_its_rows(tmp_path: Path) -> None:
    g = Gateway(source=broker(tmp_path), node="e-gw1", resync_period=60)
    assert g.registry is not None
    assert _families(g.registry) == _rows("gateway")


def test_the_controllers_register_their_rows(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    GlobalnetMetrics(registry)
    assert _families(registry) == _rows("globalnet")
    registry = CollectorRegistry()
    EgressMetrics(registry, EgressController(source=broker(tmp_path), store=EgressStore(tmp_path, "east")))
    assert _families(registry) == _rows("egress")


# PromQL words that are not metric names: functions, aggregations, keywords, and label names in by/without.
_NOT_METRICS = {"sum", "max", "min", "avg", "count", "rate", "increase", "irate", "histogram_quantile", "by",
                "without", "time", "clamp_min", "topk", "on", "ignoring", "le", "delta", "changes", "label_replace",
                "vector", "scalar", "abs", "max_over_time", "resets", "bool", "and", "or", "unless", "group_left",
                "offset"}  # fmt: skip
_HISTOGRAM = re.compile(r"_(bucket|sum|count)$")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads: identifiers outside braces and by(...)/without(...) lists, that are
    not PromQL's own words nor numbers and durations."""
    bare = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # range durations
    bare = re.sub(r'"[^"]*"', "", bare)  # string arguments (label_replace)
    bare = re.sub(r"\b\d+(\.\d+)?(ms|[smhdwy])?\b", "", bare)  # numbers and durations (offset 1m)
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare))
    return {w for w in words if w not in _NOT_METRICS and not w.startswith("$")}


def _targets(panel: dict[str, Any]) -> list[str]:
    out = [str(t["expr"]) for t in panel.get("targets", []) if "expr" in t]
    for sub in panel.get("panels", []):
        out += _targets(sub)
    return out


def test_every_dashboard_query_names_a_metric_we_export() -> None:
    board = json.loads(DASHBOARD.read_text())
    exported = {m.name for m in CATALOGUE}
    queries = [q for p in board["panels"] for q in _targets(p)]
    assert len(queries) >= 10
    asked = set()
    for q in queries:
        names = metric_names(q)
        assert names, f"a query that reads no metric: {q}"
        for name in names:
            base = _HISTOGRAM.sub("", name)
            assert name in exported or (base in exported and base != name and _is_histogram(base)), (q, name)
        asked |= {_HISTOGRAM.sub("", n) for n in names}
    for var in board["templating"]["list"]:  # label_values(METRIC, LABEL): the variables read metrics too
        used = re.match(r"label_values\((\w+), (\w+)\)", str(var.get("query", "")))
        if var["type"] == "query":
            assert used and _HISTOGRAM.sub("", used[1]) in exported, var
    # the dashboard covers what the issue asks: gateways and connections, RTT, traffic, failovers, pool, VIPs
    for needed in ("submariner_connections", "magw_probe_rtt_seconds", "magw_gateway_flows", "magw_failovers_total",
                   "submariner_global_IP_availability", "magw_egress_vip_holder_changes_total"):  # fmt: skip
        assert needed in asked, needed


def _is_histogram(name: str) -> bool:
    return any(m.name == name and m.kind == "histogram" for m in CATALOGUE)


def test_the_query_reader_finds_names_and_only_names() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, peer) (rate(magw_probe_rtt_seconds_bucket{peer_cluster="$c"}[5m])))'
            ' / on (peer) group_left max(submariner_connections{status="connected"}) offset 1m')  # fmt: skip
    assert metric_names(expr) == {"magw_probe_rtt_seconds_bucket", "submariner_connections"}
