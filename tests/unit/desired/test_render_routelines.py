"""magw.desired.render.RouteLines: the change lines of many routes, the same text as object_line route by route."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from hypothesis import given, settings
from hypothesis import strategies as st

from magw.cli.sync import change_lines, change_text
from magw.desired.render import RouteLines, object_line
from magw.desired.state import MAIN_TABLE, Route, RouteEncap, RouteNexthop
from magw.reconcile.changeset import Op

_addresses = st.integers(0, (1 << 32) - 1).map(IPv4Address)
_networks = st.builds(
    lambda n, length: IPv4Network((n, length), strict=False), st.integers(0, (1 << 32) - 1), st.integers(0, 32)
)
# A few shared source objects, as a plan shares its CNI IP, and some equal but distinct ones.
_SOURCES = [IPv4Address("10.0.0.1"), IPv4Address("10.0.0.1"), IPv4Address("10.1.1.1"), None]

_routes = st.builds(
    Route,
    table=st.sampled_from([MAIN_TABLE, 100, 149, 150]),
    dst=_networks,
    metric=st.integers(0, (1 << 32) - 1),
    src=st.one_of(st.sampled_from(_SOURCES), _addresses),
    type=st.sampled_from(["unicast", "unicast", "unreachable"]),
    nhid=st.one_of(st.none(), st.integers(1, (1 << 32) - 1)),
    nexthops=st.lists(
        st.builds(RouteNexthop, via=_addresses, dev=st.just("vx-x"), weight=st.integers(1, 9)), max_size=2
    ).map(tuple),
    encap=st.one_of(st.none(), st.builds(RouteEncap, id=st.integers(0, 1 << 20), dst=_addresses)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_routes, max_size=30))
def test_route_lines_are_object_lines(routes: list[Route]) -> None:
    lines = RouteLines()
    assert [lines(r) for r in routes] == [object_line("routes", r) for r in routes]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["create", "replace", "delete"]), _routes), max_size=20))
def test_change_lines_are_change_texts(changes: list[tuple[str, Route]]) -> None:
    ops = [Op(verb=verb, kind="routes", obj=route) for verb, route in changes]  # type: ignore[arg-type]
    assert list(change_lines(ops)) == [change_text(op) for op in ops]


def test_the_common_route_line() -> None:
    route = Route(table=100, dst=IPv4Network("11.0.1.0/24"), metric=0, src=IPv4Address("10.0.0.1"), nhid=7)
    assert RouteLines()(route) == "route 11.0.1.0/24 table 100 nhid 7 src 10.0.0.1 metric 0"
