"""The raw neighbor and FDB dumps (``neighdump``) against an independent reading: ``ip -json neigh`` and
``bridge -json fdb``. Only permanent entries with a MAC (and for the FDB an IPv4 destination) on our links
count; entries of other devices, and other states are left out; the all-zero
flooding entry with an IPv4 destination is read like any other."""

from __future__ import annotations

import json
import subprocess
from ipaddress import IPv4Address

import pytest

from magw.desired.state import Fdb, Neighbor
from magw.drivers.netlink.addrs import FdbIO, NeighborIO
from magw.drivers.netlink.linktable import LinkTable
from magw.drivers.netlink.rawsock import RawNetlink
from magw.drivers.netlink.session import open_iproute


def ip(ns: str, *args: str, batch: list[str] | None = None, tool: str = "ip") -> str:
    cmd = ["ip", "netns", "exec", ns, tool, *args] if tool == "bridge" else ["ip", "-n", ns, *args]
    return subprocess.run(
        cmd,
        input="\n".join(batch or []) + "\n" if batch else None,
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


def setup(ns: str, n: int) -> None:
    ip(ns, "link", "add", "vx-submariner", "type", "vxlan", "id", "100", "dstport", "4800", "nolearning")
    ip(ns, "link", "add", "vx-other", "type", "vxlan", "id", "7", "dstport", "4801", "nolearning")
    ip(ns, "link", "set", "vx-submariner", "up")
    ip(ns, "link", "set", "vx-other", "up")
    ip(ns, "address", "add", "240.0.0.1/8", "dev", "vx-submariner")
    macs = [f"02:00:00:00:{i // 250:02x}:{i % 250:02x}" for i in range(n)]
    batch = [
        f"neigh add 240.0.{i // 250}.{i % 250 + 2} lladdr {mac} dev vx-submariner nud permanent"
        for i, mac in enumerate(macs)
    ]
    batch += [
        "neigh add 240.9.9.9 lladdr 02:aa:aa:aa:aa:aa dev vx-submariner nud reachable",  # not permanent
        "neigh add 240.9.9.7 lladdr 02:bb:bb:bb:bb:bb dev vx-other nud permanent",  # not our device
    ]
    ip(ns, "-batch", "-", batch=batch)
    fdb = [
        f"fdb add {mac} dev vx-submariner dst 172.18.{i // 250}.{i % 250 + 2} self permanent"
        for i, mac in enumerate(macs)
    ]
    fdb += [
        "fdb append 00:00:00:00:00:00 dev vx-submariner dst 172.18.9.1 self permanent",  # flooding entry
        "fdb add 02:cc:cc:cc:cc:cc dev vx-other dst 172.18.9.2 self permanent",  # not our device
    ]
    ip(ns, "-batch", "-", batch=fdb, tool="bridge")


def independent_neighbors(ns: str) -> set[Neighbor]:
    out = set()
    for e in json.loads(ip(ns, "-json", "neigh", "show", "dev", "vx-submariner")):
        if "PERMANENT" in e.get("state", []) and e.get("lladdr"):
            out.add(Neighbor(dev="vx-submariner", ip=IPv4Address(e["dst"]), mac=e["lladdr"]))
    return out


def independent_fdb(ns: str) -> set[Fdb]:
    out = set()
    for e in json.loads(ip(ns, "-json", "fdb", "show", "dev", "vx-submariner", tool="bridge")):
        dst = e.get("dst", "")
        if e.get("state") == "permanent" and dst and ":" not in dst:
            out.add(Fdb(dev="vx-submariner", mac=e["mac"], dst=IPv4Address(dst)))
    return out


@pytest.mark.kernel
def test_raw_dumps_match_iproute2(ns: str) -> None:
    setup(ns, 600)
    ipr = open_iproute(ns)
    try:
        with RawNetlink(ns) as sock:
            table = LinkTable(sock)
            neighbors = NeighborIO(ipr, table, sock).observe()
            fdb = FdbIO(ipr, table, sock).observe()
    finally:
        ipr.close()
    want_neigh = independent_neighbors(ns)
    assert len(want_neigh) == 600
    assert set(neighbors) == want_neigh and len(neighbors) == 600
    want_fdb = independent_fdb(ns)
    assert len(want_fdb) == 601, "600 unicast entries and the flooding entry"
    assert set(fdb) == want_fdb and len(fdb) == 601
    assert Fdb(dev="vx-submariner", mac="00:00:00:00:00:00", dst=IPv4Address("172.18.9.1")) in fdb


@pytest.mark.kernel
def test_batched_apply_installs_replaces_and_deletes(ns: str) -> None:
    """NeighFdbIO through the driver: 300 neighbors and FDB entries in one apply, read back by iproute2; a
    replace moves an FDB destination; a delete naming a stale destination removes the whole entry; a
    device that is not ours is refused without being sent."""
    from magw.drivers.netlink.driver import NetlinkDriver
    from magw.reconcile.changeset import ChangeSet, Op

    ip(ns, "link", "add", "vx-submariner", "type", "vxlan", "id", "100", "dstport", "4800", "nolearning")
    ip(ns, "link", "set", "vx-submariner", "up")
    neighs = [
        Neighbor(dev="vx-submariner", ip=IPv4Address(f"240.0.1.{i + 2}"), mac=f"02:00:00:00:01:{i:02x}")
        for i in range(150)
    ]
    fdbs = [Fdb(dev="vx-submariner", mac=n.mac, dst=IPv4Address(f"172.18.1.{i + 2}")) for i, n in enumerate(neighs)]
    ops = [Op(verb="create", kind="neighbors", obj=n) for n in neighs] + [
        Op(verb="create", kind="fdb", obj=f) for f in fdbs
    ]
    foreign = Neighbor(dev="eth9", ip=IPv4Address("10.0.0.1"), mac="02:00:00:00:00:01")
    with NetlinkDriver(ns) as driver:
        result = driver.apply(ChangeSet(ops=(*ops, Op(verb="create", kind="neighbors", obj=foreign))))
        assert len(result.failed) == 1 and result.failed[0].error.startswith("EPERM")
        assert independent_neighbors(ns) == set(neighs)
        assert independent_fdb(ns) == set(fdbs)
        moved = Fdb(dev="vx-submariner", mac=fdbs[0].mac, dst=IPv4Address("172.18.9.9"))
        driver.apply(ChangeSet(ops=(Op(verb="replace", kind="fdb", obj=moved),)))
        assert moved in independent_fdb(ns) and fdbs[0] not in independent_fdb(ns)
        result = driver.apply(
            ChangeSet(
                ops=(Op(verb="delete", kind="fdb", obj=fdbs[0]), Op(verb="delete", kind="neighbors", obj=neighs[0]))
            )
        )
        assert not result.failed
        assert independent_fdb(ns) == set(fdbs[1:]), "the stale-dst delete removed the moved entry"
        assert independent_neighbors(ns) == set(neighs[1:])
        again = driver.apply(ChangeSet(ops=(Op(verb="delete", kind="neighbors", obj=neighs[0]),)))
        assert not again.failed, "deleting a missing neighbor is success"
