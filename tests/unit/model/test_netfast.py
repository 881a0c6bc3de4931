"""magw.model.netfast builds the same IPv4Network objects as ipaddress, or lets ipaddress build them."""

from __future__ import annotations

from ipaddress import IPv4Network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magw.model import netfast

ALL_ONES = 0xFFFFFFFF


@st.composite
def valid_prefixes(draw: st.DrawFn) -> tuple[int, int]:
    prefixlen = draw(st.integers(0, 32))
    mask = (ALL_ONES << (32 - prefixlen)) & ALL_ONES
    return draw(st.integers(0, ALL_ONES)) & mask, prefixlen


def assert_same(ours: IPv4Network, theirs: IPv4Network) -> None:
    assert type(ours) is type(theirs)
    # /31 and /32 keep a ``hosts`` of their own (a new function per object): compared by what it returns below
    assert vars(ours).keys() == vars(theirs).keys()
    assert {k: v for k, v in vars(ours).items() if k != "hosts"} == {
        k: v for k, v in vars(theirs).items() if k != "hosts"
    }
    assert (ours, hash(ours), str(ours), repr(ours)) == (theirs, hash(theirs), str(theirs), repr(theirs))
    assert ours.broadcast_address == theirs.broadcast_address
    assert ours.hostmask == theirs.hostmask
    assert ours.num_addresses == theirs.num_addresses
    assert ours.overlaps(theirs) and ours.subnet_of(theirs) and theirs.supernet_of(ours)
    if ours.prefixlen >= 28:
        assert list(ours.hosts()) == list(theirs.hosts())
    if ours.prefixlen:
        assert ours.supernet() == theirs.supernet()


def test_this_python_takes_the_direct_way() -> None:
    # The CI's and this machine's Python 3.11: if this fails, network() still works but is not faster.
    assert netfast.SAME_AS_IPADDRESS


@given(valid_prefixes())
def test_same_objects_as_ipaddress(prefix: tuple[int, int]) -> None:
    assert_same(netfast.network(*prefix), IPv4Network(prefix))


@pytest.mark.parametrize("prefixlen", range(33))
def test_every_length_at_both_ends(prefixlen: int) -> None:
    mask = (ALL_ONES << (32 - prefixlen)) & ALL_ONES
    for ip in (0, ALL_ONES & mask):
        assert_same(netfast.network(ip, prefixlen), IPv4Network((ip, prefixlen)))


@pytest.mark.parametrize(
    ("ip", "prefixlen"),
    [(0x0A000001, 24), (0x0A000000, 33), (0x0A000000, -1), (-1, 24), (1 << 32, 8), (ALL_ONES, 31)],
)
def test_bad_input_gets_ipaddress_own_error(ip: int, prefixlen: int) -> None:
    with pytest.raises(ValueError) as theirs:
        IPv4Network((ip, prefixlen))
    with pytest.raises(ValueError) as ours:
        netfast.network(ip, prefixlen)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_the_ordinary_way_when_the_self_check_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ip: int, prefixlen: int) -> IPv4Network:
        raise AssertionError("the direct way must not be used")

    monkeypatch.setattr(netfast, "SAME_AS_IPADDRESS", False)
    monkeypatch.setattr(netfast, "_direct", broken)
    assert_same(netfast.network(0x0A000000, 8), IPv4Network("10.0.0.0/8"))


def test_self_check_notices_a_missing_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    direct = netfast._direct

    def without_netmask(ip: int, prefixlen: int) -> IPv4Network:
        net = direct(ip, prefixlen)
        del vars(net)["netmask"]
        return net

    assert netfast._self_check()
    monkeypatch.setattr(netfast, "_direct", without_netmask)
    assert not netfast._self_check()


def test_self_check_notices_an_attribute_ipaddress_sets_and_we_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    real_init = IPv4Network.__init__

    def init_with_more(self: IPv4Network, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]
        vars(self)["_extra"] = 1  # a later Python keeping one more attribute

    monkeypatch.setattr(IPv4Network, "__init__", init_with_more)
    assert not netfast._self_check()


def test_this_python_reads_keys_from_the_attributes() -> None:
    assert netfast.KEY_BY_ATTRIBUTES
    assert netfast.net_key is netfast._key_by_attributes


@given(valid_prefixes(), st.sampled_from(["ipaddress", "netfast", "text"]))
def test_net_key_is_the_network_as_int_and_its_length(prefix: tuple[int, int], built: str) -> None:
    ip, prefixlen = prefix
    if built == "ipaddress":
        net = IPv4Network(prefix)
    elif built == "netfast":
        net = netfast.network(ip, prefixlen)
    else:
        net = IPv4Network(f"{ip >> 24}.{ip >> 16 & 255}.{ip >> 8 & 255}.{ip & 255}/{prefixlen}")
    assert netfast.net_key(net) == netfast._key_by_value(net) == (ip, prefixlen)


@given(st.lists(valid_prefixes(), max_size=30))
def test_net_keys_sort_as_the_networks_do(prefixes: list[tuple[int, int]]) -> None:
    nets = [IPv4Network(p) for p in prefixes]
    assert sorted(nets, key=netfast.net_key) == sorted(nets)


def test_key_check_notices_an_attribute_that_is_not_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    assert netfast._key_check()
    monkeypatch.setattr(netfast, "_key_by_attributes", lambda net: (net.network_address._ip, net._prefixlen + 1))
    assert not netfast._key_check()
    monkeypatch.setattr(netfast, "_key_by_attributes", lambda net: net.not_there)
    assert not netfast._key_check()
