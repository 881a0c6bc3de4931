"""``diff_wireguard``: the plan against what ``wg show`` reports, as the changes one ``wg set`` makes."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network

import attrs

from magw.desired.cable.values import WgChanges, WgDevice, WgObserved, WgObservedPeer, WgPeer
from magw.reconcile.cable import diff_wireguard
from tests.unit.cable.data import E_GW1_PUB, OTHER_PUB, S_GW1_PUB, W_GW1_PUB, W_GW2_PUB

N = IPv4Network

P1 = WgPeer(
    public_key=W_GW1_PUB,
    owner="west/w-gw1",
    endpoint=IPv4Address("203.0.113.4"),
    port=51820,
    allowed_ips=(N("242.19.0.4/32"),),
)
P2 = WgPeer(
    public_key=S_GW1_PUB,
    owner="south/s-gw1",
    endpoint=IPv4Address("192.0.2.9"),
    port=51820,
    allowed_ips=(N("242.20.3.9/32"),),
)
PLAN = WgDevice(name="magw-wg", listen_port=51820, mtu=1440, address=IPv4Interface("242.18.0.6/8"), peers=(P1, P2))


def seen(key: str, endpoint: str | None, *allowed: str, handshake: int = 1700000000) -> WgObservedPeer:
    return WgObservedPeer(
        public_key=key,
        endpoint=endpoint,
        allowed_ips=tuple(N(a) for a in allowed),
        latest_handshake=handshake,
        rx_bytes=1234,
        tx_bytes=5678,
    )


O1 = seen(W_GW1_PUB, "203.0.113.4:51820", "242.19.0.4/32")
O2 = seen(S_GW1_PUB, "192.0.2.9:51820", "242.20.3.9/32")
IN_SYNC = WgObserved(public_key=E_GW1_PUB, listen_port=51820, peers=(O1, O2))


def diff(observed: WgObserved) -> WgChanges:
    return diff_wireguard(PLAN, observed, E_GW1_PUB)


def test_nothing_to_do_when_the_device_holds_the_plan() -> None:
    changes = diff(IN_SYNC)
    assert changes == WgChanges(private_key=False, listen_port=None, upsert=(), remove=())
    assert changes.empty


def test_counters_and_handshakes_are_not_differences() -> None:
    quiet = attrs.evolve(IN_SYNC, peers=(seen(W_GW1_PUB, "203.0.113.4:51820", "242.19.0.4/32", handshake=0), O2))
    assert diff(quiet).empty


def test_peer_order_on_the_device_does_not_matter() -> None:
    assert diff(attrs.evolve(IN_SYNC, peers=(O2, O1))).empty


def test_a_device_with_another_key_gets_the_private_key() -> None:
    changes = diff(attrs.evolve(IN_SYNC, public_key=OTHER_PUB))
    assert changes.private_key is True
    assert (changes.listen_port, changes.upsert, changes.remove) == (None, (), ())
    assert not changes.empty


def test_a_device_without_a_key_gets_the_private_key() -> None:
    assert diff(attrs.evolve(IN_SYNC, public_key=None)).private_key is True


def test_the_listen_port_is_set_when_it_differs() -> None:
    changes = diff(attrs.evolve(IN_SYNC, listen_port=40000))
    assert changes.listen_port == 51820
    assert not changes.private_key and not changes.upsert and not changes.remove


def test_a_missing_peer_is_added() -> None:
    changes = diff(attrs.evolve(IN_SYNC, peers=(O2,)))
    assert changes.upsert == (P1,)
    assert changes.remove == ()


def test_a_fresh_device_gets_everything() -> None:
    changes = diff(WgObserved(public_key=None, listen_port=0, peers=()))
    assert changes == WgChanges(private_key=True, listen_port=51820, upsert=(P2, P1), remove=())


def test_a_peer_at_another_endpoint_is_corrected() -> None:
    roamed = seen(W_GW1_PUB, "198.51.100.77:40001", "242.19.0.4/32")
    assert diff(attrs.evolve(IN_SYNC, peers=(roamed, O2))).upsert == (P1,)


NOW = 1700000100.0  # 100 s after the handshake of ``seen``
ROAMED = seen(W_GW1_PUB, "198.51.100.77:40001", "242.19.0.4/32")  # P1's packets came from a NAT's address
PLACED = {W_GW1_PUB: "203.0.113.4:51820", S_GW1_PUB: "192.0.2.9:51820"}


def roam_diff(observed: WgObserved, placed: dict[str, str], now: float = NOW) -> WgChanges:
    return diff_wireguard(PLAN, observed, E_GW1_PUB, placed=placed, now=now)


def test_a_peer_that_roamed_from_the_endpoint_we_set_is_left_alone() -> None:
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(ROAMED, O2)), PLACED).empty


def test_a_roamed_peer_whose_session_went_stale_is_set_back_to_the_plan() -> None:
    stale = attrs.evolve(ROAMED, latest_handshake=1700000000)
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(stale, O2)), PLACED, now=1700000000 + 181).upsert == (P1,)
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(stale, O2)), PLACED, now=1700000000 + 180).empty
    never = attrs.evolve(ROAMED, latest_handshake=0)
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(never, O2)), PLACED).upsert == (P1,)


def test_a_roamed_peer_is_corrected_when_the_plan_moved_it() -> None:
    """We had set another endpoint (the remote gateway's published address changed since): the plan wins."""
    before = {**PLACED, W_GW1_PUB: "203.0.113.99:51820"}
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(ROAMED, O2)), before).upsert == (P1,)


def test_a_roamed_peer_is_corrected_without_memory_of_what_we_set() -> None:
    """After a restart the driver knows nothing it set: the planned endpoint is set again."""
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(ROAMED, O2)), {}).upsert == (P1,)


def test_a_roamed_peer_with_other_allowed_ips_is_corrected() -> None:
    wrong = attrs.evolve(ROAMED, allowed_ips=(N("242.19.0.5/32"),))
    assert roam_diff(attrs.evolve(IN_SYNC, peers=(wrong, O2)), PLACED).upsert == (P1,)


def test_a_peer_without_an_endpoint_is_corrected() -> None:
    silent = seen(W_GW1_PUB, None, "242.19.0.4/32")
    assert diff(attrs.evolve(IN_SYNC, peers=(silent, O2))).upsert == (P1,)


def test_a_peer_on_another_port_is_corrected() -> None:
    other_port = seen(S_GW1_PUB, "192.0.2.9:51821", "242.20.3.9/32")
    assert diff(attrs.evolve(IN_SYNC, peers=(O1, other_port))).upsert == (P2,)


def test_a_peer_with_other_allowed_ips_is_corrected() -> None:
    for allowed in [(), ("242.19.0.5/32",), ("242.19.0.4/32", "10.2.0.0/16"), ("242.0.0.0/8",)]:
        wrong = seen(W_GW1_PUB, "203.0.113.4:51820", *allowed)
        assert diff(attrs.evolve(IN_SYNC, peers=(wrong, O2))).upsert == (P1,), allowed


def test_unplanned_peers_are_removed_sorted() -> None:
    extra = (seen(W_GW2_PUB, None), seen(OTHER_PUB, "10.0.0.1:1"))
    changes = diff(attrs.evolve(IN_SYNC, peers=(O1, *extra, O2)))
    assert changes.remove == (W_GW2_PUB, OTHER_PUB)  # by hand: "TAT1..." < "wyAx..."
    assert changes.upsert == () and not changes.private_key


def test_an_empty_plan_removes_every_peer() -> None:
    empty = attrs.evolve(PLAN, peers=())
    changes = diff_wireguard(empty, IN_SYNC, E_GW1_PUB)
    assert changes.upsert == () and set(changes.remove) == {W_GW1_PUB, S_GW1_PUB}
