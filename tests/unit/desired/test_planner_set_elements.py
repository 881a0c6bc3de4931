"""The nft interval-set elements the planner writes: covered prefixes dropped, in one sweep."""

from __future__ import annotations

from ipaddress import IPv4Network

from hypothesis import given
from hypothesis import strategies as st

from magw.desired.nft.plan import set_elements

nets = st.builds(
    lambda addr, plen: IPv4Network((addr, plen), strict=False),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.integers(min_value=4, max_value=32),
)


def _naive(given_nets: list[IPv4Network]) -> tuple[str, ...]:
    unique = sorted(set(given_nets))
    kept = [n for n in unique if not any(n != o and n.subnet_of(o) for o in unique)]
    return tuple(str(n.network_address) if n.prefixlen == 32 else str(n) for n in kept)


@given(st.lists(nets, max_size=30))
def test_sweep_keeps_exactly_the_prefixes_no_other_prefix_holds(given_nets: list[IPv4Network]) -> None:
    """The linear sweep gives the same elements as the pairwise definition (no prefix inside another)."""
    assert set_elements(given_nets) == _naive(given_nets)


def test_covered_prefix_dropped_and_host_route_printed_as_address() -> None:
    """10.1.2.0/24 inside 10.1.0.0/16 goes; a /32 is written as nft lists it back, as a plain address."""
    got = set_elements([IPv4Network("10.1.2.0/24"), IPv4Network("10.1.0.0/16"), IPv4Network("10.9.9.9/32")])
    assert got == ("10.1.0.0/16", "10.9.9.9")
