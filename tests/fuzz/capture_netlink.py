"""Capture real netlink dump replies as seeds of the netlink fuzz targets (run as root, once; the files are
committed under tests/data/fuzz/netlink_*/):

    .venv/bin/python -m tests.fuzz.capture_netlink

Everything happens in a throwaway network namespace of a unique name, deleted at the end: a veth pair,
nexthops (gateway, blackhole, fdb), an mpath and a resilient group, magw's routes (proto 157) in tables 100 and
254 (via a gateway, via a group, multipath, unreachable, with a src), neighbours and FDB entries of a VXLAN (one
with a destination port of its own, NDA_PORT).
Each reply message of the nexthop, route and neighbour dumps is written as one file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fuzz.targets import CORPORA

SETUP = """
link set lo up
link add d0 type veth peer name d1
link set d0 up
link set d1 up
addr add 192.0.2.1/24 dev d0
link add vx0 type vxlan id 7 dstport 4800 local 192.0.2.1 nolearning
link set vx0 up
nexthop add id 1610612737 via 192.0.2.10 dev d0 proto 157
nexthop add id 1610612739 via 192.0.2.11 dev d0 proto 157
nexthop add id 1610612738 blackhole proto 157
nexthop add id 1610612740 group 1610612737/1610612739,5 proto 157
nexthop add id 1610612741 group 1610612737/1610612739 type resilient buckets 32 idle_timer 120 unbalanced_timer 60 \\
  proto 157
nexthop add id 1610612742 via 192.0.2.12 fdb
nexthop add id 1610612743 group 1610612742 fdb
route add 10.2.0.0/16 table 100 nhid 1610612740 proto 157
route add 10.3.0.0/16 table 100 nhid 1610612741 proto 157 src 192.0.2.1
route add 10.4.0.0/16 via 192.0.2.10 dev d0 proto 157 metric 5
route add 10.5.0.0/16 proto 157 nexthop via 192.0.2.10 dev d0 weight 2 nexthop via 192.0.2.11 dev d0
route add unreachable 10.6.0.0/16 table 100 proto 157
route add 10.7.0.0/16 dev vx0 proto 157 encap ip id 100 dst 192.0.2.50
neigh add 192.0.2.10 lladdr 02:00:00:00:00:0a dev d0 nud permanent
neigh add 240.1.0.6 lladdr 02:00:00:00:01:06 dev vx0 nud permanent
"""

# `bridge -n NS` lines, after SETUP.
FDB_SETUP = """
fdb append 02:00:00:00:01:06 dev vx0 dst 192.0.2.60 self permanent
fdb append 02:00:00:00:01:07 dev vx0 dst 192.0.2.61 port 5001 self permanent
"""

DUMP = r"""
import socket, struct, sys
from magw.drivers.netlink.neighdump import AF_BRIDGE, pack_neigh_dump
from magw.drivers.netlink.nexthop import encode_dump
from magw.drivers.netlink.routes import pack_route_dump
out = sys.argv[1]
idx = socket.if_nametoindex
requests = [
    ("netlink_nexthop", "nh", encode_dump()),
    ("netlink_dump", "route", pack_route_dump()),
    ("netlink_dump", "neigh", pack_neigh_dump(socket.AF_INET, idx("d0"))),
    ("netlink_dump", "fdb", pack_neigh_dump(AF_BRIDGE, idx("vx0"))),
]
for target, stem, req in requests:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.setsockopt(270, 12, 1)  # NETLINK_GET_STRICT_CHK
    s.bind((0, 0))
    s.send(req)
    n, done = 0, False
    while not done and n < 200:
        buf = s.recv(1 << 16)
        pos = 0
        while pos + 16 <= len(buf):
            length, kind = struct.unpack_from("=IH", buf, pos)
            if kind in (2, 3) or length < 16:  # NLMSG_ERROR, NLMSG_DONE
                done = True
                if kind == 2:
                    open(f"{out}/{target}/{stem}-error.bin", "wb").write(buf[pos : pos + length])
                break
            open(f"{out}/{target}/{stem}-{n:02d}.bin", "wb").write(buf[pos : pos + length])
            n += 1
            pos += (length + 3) & ~3
    s.close()
"""


def main() -> int:
    ns = f"magw-fzcap-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        # one ip call per line: a batch raced the links coming up
        for line in SETUP.replace("\\\n", " ").strip().splitlines():
            subprocess.run(["ip", "-n", ns, *line.split()], check=True)
        for line in FDB_SETUP.strip().splitlines():
            subprocess.run(["bridge", "-n", ns, *line.split()], check=True)
        root = Path(__file__).resolve().parents[2]
        subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-c", DUMP, str(CORPORA)],
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    for target in ("netlink_nexthop", "netlink_dump"):
        print(target, len(list((CORPORA / target).iterdir())), "files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
