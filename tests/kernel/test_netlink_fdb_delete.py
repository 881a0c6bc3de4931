"""FdbIO.delete on the real kernel: one message per entry, whatever the number of other entries."""

from __future__ import annotations

import subprocess
from ipaddress import IPv4Address
from typing import Any

import pytest

from magw.desired.state import Fdb
from magw.drivers.netlink.addrs import FdbIO
from magw.drivers.netlink.linktable import LinkTable
from magw.drivers.netlink.rawsock import RawNetlink
from magw.drivers.netlink.session import open_iproute

MAC = "02:53:ac:10:00:07"
OTHERS = 20


class CountingIpr:
    """Wraps an IPRoute and records the first argument of each ``fdb`` call (dump, del, ...)."""

    def __init__(self, ipr: Any) -> None:
        self.ipr = ipr
        self.calls: list[str] = []

    def fdb(self, command: str, **kwargs: Any) -> Any:
        self.calls.append(command)
        return self.ipr.fdb(command, **kwargs)


def _fdb_lines(ns: str) -> list[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "bridge", "fdb", "show", "dev", "vx-submariner"],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return [line for line in out.splitlines() if " dst " in line]


@pytest.mark.kernel
def test_delete_removes_every_destination_in_one_message_without_a_dump(ns: str) -> None:
    """A node leaving costs O(1): one del, no dump of the other entries; the entry goes even when the
    dst we were given is stale (the kernel holds .7, we name .9), and the others stay."""
    batch = [f"fdb add {MAC} dev vx-submariner dst 172.16.0.7 self permanent"]
    batch += [
        f"fdb add 02:53:ac:10:01:{i:02x} dev vx-submariner dst 172.16.1.{i} self permanent" for i in range(OTHERS)
    ]
    subprocess.run(
        [
            "ip",
            "-n",
            ns,
            "link",
            "add",
            "vx-submariner",
            "type",
            "vxlan",
            "id",
            "100",
            "dstport",
            "4800",
            "local",
            "172.16.0.2",
            "nolearning",
        ],
        check=True,
        timeout=30,
    )
    subprocess.run(
        ["ip", "netns", "exec", ns, "bridge", "-batch", "-"],
        input="\n".join(batch) + "\n",
        text=True,
        check=True,
        timeout=30,
    )
    assert len(_fdb_lines(ns)) == OTHERS + 1
    ipr = open_iproute(ns)
    try:
        with RawNetlink(ns) as sock:
            counting = CountingIpr(ipr)
            entry = Fdb(dev="vx-submariner", mac=MAC, dst=IPv4Address("172.16.0.9"))
            FdbIO(counting, LinkTable(sock), sock).delete(entry)
    finally:
        ipr.close()
    assert counting.calls == ["del"]
    left = _fdb_lines(ns)
    assert len(left) == OTHERS
    assert not any(MAC in line for line in left)
