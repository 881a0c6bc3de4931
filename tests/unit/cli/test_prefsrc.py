"""Which routes of a plan the kernel would refuse for their ``src`` (magw/cli/prefsrc.py), without a kernel."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

from magw.cli.prefsrc import prefsrc_line, sourceless_routes
from magw.desired.state import Address, DesiredState, Route
from tests.support.paths import REPO


def _route(dst: str, src: str | None) -> Route:
    return Route(table=254, dst=IPv4Network(dst), metric=100, src=None if src is None else IPv4Address(src), nhid=7)


def test_a_src_that_is_neither_local_nor_planned_is_named() -> None:
    """A src the namespace has, or that the plan itself adds as an address, is fine; a route without src too;
    any other src is named, each route once, in plan order."""
    desired = DesiredState(
        addresses=(Address(dev="vx-submariner", address=IPv4Interface("240.18.0.3/8")),),
        routes=(
            _route("10.2.0.0/16", "10.1.3.1"),
            _route("10.3.0.0/16", "172.18.0.3"),
            _route("10.4.0.0/16", "240.18.0.3"),
            _route("10.5.0.0/16", None),
            _route("100.2.0.0/16", "10.1.3.1"),
        ),
    )
    found = sourceless_routes(desired, [IPv4Address("127.0.0.1"), IPv4Address("172.18.0.3")])
    assert [str(r.dst) for r in found] == ["10.2.0.0/16", "100.2.0.0/16"]


def test_the_line_names_the_route_the_address_and_the_fix() -> None:
    """One ``dry run: would fail:`` line with the route as ``magw apply`` prints it, the kernel's reason and cni0."""
    assert prefsrc_line(_route("10.2.0.0/16", "10.1.3.1")) == (
        "dry run: would fail: route 10.2.0.0/16 table main nhid 7 src 10.1.3.1 metric 100: 10.1.3.1 is not an"
        " address in this namespace (kernel: Invalid prefsrc address; it is the node's cni_ip, which belongs on"
        " its CNI bridge, cni0)"
    )


def test_docs_commands_quotes_the_line_as_printed() -> None:
    """docs/commands.md, "Dry run", shows the line for e-w1's route to 10.2.0.0/16 exactly as the dry run prints it."""
    route = Route(
        table=254, dst=IPv4Network("10.2.0.0/16"), metric=100, src=IPv4Address("10.1.3.1"), nhid=1677721597
    )
    assert f"`{prefsrc_line(route)}`" in (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
