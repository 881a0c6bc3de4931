"""An FDB entry's own destination port in the text and JSON renderings (``magw plan``, ``magw apply``'s change
lines) and in the fake's dump: printed only when set, as ``bridge fdb show`` does, so entries without one read as
before."""

from __future__ import annotations

from ipaddress import IPv4Address

from magw.desired.render import object_line, render_json, render_text
from magw.desired.state import DesiredState, Fdb, Link
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.drivers.netlink.fake.text import fdb_line
from magw.reconcile.changeset import ChangeSet, Op

PLAIN = Fdb(dev="vxlan-tunnel", mac="02:53:f1:12:00:04", dst=IPv4Address("198.51.100.4"))
PORTED = Fdb(dev="vxlan-tunnel", mac="02:53:f1:12:00:09", dst=IPv4Address("198.51.100.9"), port=30001)


def test_text_names_the_port_only_when_set() -> None:
    assert render_text(DesiredState(fdb=[PLAIN, PORTED])) == (
        "fdb 02:53:f1:12:00:04 dev vxlan-tunnel dst 198.51.100.4 self permanent\n"
        "fdb 02:53:f1:12:00:09 dev vxlan-tunnel dst 198.51.100.9 port 30001 self permanent\n"
    )
    line = "fdb 02:53:f1:12:00:09 dev vxlan-tunnel dst 198.51.100.9 port 30001 self permanent"
    assert object_line("fdb", PORTED) == line


def test_json_has_a_port_key_only_when_set() -> None:
    assert render_json(DesiredState(fdb=[PLAIN, PORTED]))["fdb"] == [
        {"mac": "02:53:f1:12:00:04", "dev": "vxlan-tunnel", "dst": "198.51.100.4"},
        {"mac": "02:53:f1:12:00:09", "dev": "vxlan-tunnel", "dst": "198.51.100.9", "port": 30001},
    ]


def test_the_fake_dump_prints_the_port_as_it_reads_back() -> None:
    """The fake keeps a port that differs from the device's; 0 or the device's own port reads back as None."""
    fake = FakeNetlink()
    link = Link(name="vxlan-tunnel", vni=1000, port=4500, mtu=1450, mac="02:53:f1:00:00:01")
    own = Fdb(dev="vxlan-tunnel", mac="02:53:f1:12:00:05", dst=IPv4Address("198.51.100.5"), port=4500)
    zero = Fdb(dev="vxlan-tunnel", mac="02:53:f1:12:00:06", dst=IPv4Address("198.51.100.6"), port=0)
    ops = (
        Op(verb="create", kind="links", obj=link),
        *(Op(verb="create", kind="fdb", obj=f) for f in (PLAIN, PORTED, own, zero)),
    )
    assert fake.apply(ChangeSet(ops=ops)).failed == ()
    assert [line for line in fake.dump().splitlines() if line.startswith("fdb ")] == [
        fdb_line(PLAIN),
        "fdb 02:53:f1:12:00:05 dev vxlan-tunnel dst 198.51.100.5 self permanent",
        "fdb 02:53:f1:12:00:06 dev vxlan-tunnel dst 198.51.100.6 self permanent",
        "fdb 02:53:f1:12:00:09 dev vxlan-tunnel dst 198.51.100.9 port 30001 self permanent",
    ]
    assert {f.mac: f.port for f in fake.observe().fdb} == {
        PLAIN.mac: None,
        PORTED.mac: 30001,
        own.mac: None,
        zero.mac: None,
    }
