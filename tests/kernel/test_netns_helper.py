"""One namespace helper (``magw.drivers.netns``) for every driver and command, and one LinkTable.

Kernel tests put real non-namespaces under ``/var/run/netns`` (a plain file, a UTS
namespace bound there) and check that every way in (the netlink session, the raw socket,
libnftables, sysctl threads, the CLI) refuses them up front with the one ``NoSuchNetns``,
so ``magw apply/diagnose/cleanup --netns`` exit 2 with one line instead of crashing later.
The LinkTable tests play the kernel on a socketpair: a failure to read the table is raised
as itself, never reported as "no device".
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
import uuid
from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest

from magw.desired.state import Nexthop
from magw.drivers.netlink import nlattr
from magw.drivers.netlink.capabilities import detect
from magw.drivers.netlink.driver import NetlinkDriver
from magw.drivers.netlink.fastpath import RouteNexthopIO
from magw.drivers.netlink.linktable import IFINFOMSG, IFLA_IFNAME, RTM_NEWLINK, LinkTable, NoDevice
from magw.drivers.netlink.rawsock import NetlinkError, RawNetlink
from magw.drivers.netlink.session import open_iproute
from magw.drivers.netlink.sysctl import read_sysctl
from magw.drivers.netns import NETNS_DIR, NoSuchNetns, check_netns, in_netns, run_in_netns
from magw.drivers.nft import Nft, NftDriver
from magw.reconcile.changeset import Op
from tests.support.cli import MagwCli
from tests.support.paths import REPO

SEED = str(REPO / "examples" / "seed-east.yaml")
NH = 0x61000002


def _unique(kind: str) -> str:
    return f"magwt-{kind}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def plain_file() -> Iterator[str]:
    """A regular file under /var/run/netns (what a stray ``touch`` leaves), removed afterwards."""
    os.makedirs(NETNS_DIR, exist_ok=True)
    name = _unique("plain")
    path = os.path.join(NETNS_DIR, name)
    with open(path, "x"):
        pass
    try:
        yield name
    finally:
        os.unlink(path)


@pytest.fixture
def uts_namespace() -> Iterator[str]:
    """Our UTS namespace bind-mounted under /var/run/netns: a namespace, but not a network one."""
    name = _unique("uts")
    path = os.path.join(NETNS_DIR, name)
    os.makedirs(NETNS_DIR, exist_ok=True)
    with open(path, "x"):
        pass
    try:
        subprocess.run(["mount", "--bind", "/proc/self/ns/uts", path], check=True, timeout=30)
        try:
            yield name
        finally:
            subprocess.run(["umount", path], check=True, timeout=30)
    finally:
        os.unlink(path)


def plain_message(name: str) -> str:
    return f"not a network namespace: {name} ({NETNS_DIR}/{name}: Inappropriate ioctl for device)"


ENTRY_POINTS = {
    "check_netns": check_netns,
    "open_iproute": lambda name: open_iproute(name).close(),
    "RawNetlink": lambda name: RawNetlink(name).close(),
    "NetlinkDriver": lambda name: NetlinkDriver(name).close(),
    "Nft": lambda name: Nft(name).close(),
    "NftDriver": lambda name: NftDriver(name).close(),
    "run_in_netns": lambda name: run_in_netns(name, lambda: None),
    "in_netns": lambda name: in_netns(name).__enter__(),
    "read_sysctl": lambda name: read_sysctl(name, "net.ipv4.ip_forward"),
    "detect": detect,
}


@pytest.mark.kernel
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_plain_file_under_run_netns_is_refused_everywhere(entry: str, plain_file: str) -> None:
    """A regular file named like a namespace is not one: every way in raises the one NoSuchNetns, saying so."""
    with pytest.raises(NoSuchNetns) as refused:
        ENTRY_POINTS[entry](plain_file)
    assert (str(refused.value), refused.value.name) == (plain_message(plain_file), plain_file)


@pytest.mark.kernel
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_missing_namespace_is_the_same_error_everywhere_and_never_created(entry: str) -> None:
    """Every way in raises the same NoSuchNetns class and text for a missing name, and nothing is created."""
    name = _unique("missing")
    with pytest.raises(NoSuchNetns) as refused:
        ENTRY_POINTS[entry](name)
    assert str(refused.value) == f"no such network namespace: {name}"
    assert os.path.lexists(os.path.join(NETNS_DIR, name)) is False


@pytest.mark.kernel
def test_another_kind_of_namespace_is_not_a_network_namespace(uts_namespace: str) -> None:
    """A UTS namespace bound under /var/run/netns is refused by its type (NS_GET_NSTYPE), before any setns."""
    with pytest.raises(NoSuchNetns) as refused:
        RawNetlink(uts_namespace)
    assert str(refused.value) == (
        f"not a network namespace: {uts_namespace} ({NETNS_DIR}/{uts_namespace} is a namespace of type "
        "0x4000000, not CLONE_NEWNET)"
    )


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../../proc/1/ns/net"])
def test_names_that_cannot_be_under_run_netns_are_refused(name: str) -> None:
    """A name with '/', an empty name, '.' and '..' never reach the file system."""
    with pytest.raises(NoSuchNetns) as refused:
        check_netns(name)
    assert str(refused.value) == (
        f"not a network namespace: {name} (a name under /var/run/netns has no '/' and is not '', '.' or '..')"
    )


@pytest.mark.kernel
def test_a_fifo_under_run_netns_is_refused_without_hanging(magw_cli: MagwCli) -> None:
    """A FIFO named like a namespace: opening it must not wait for a writer; it is refused like a plain file."""
    name = _unique("fifo")
    path = os.path.join(NETNS_DIR, name)
    os.mkfifo(path)
    try:
        done = magw_cli("diagnose", "kernel", "--netns", name)  # in a subprocess: a hang ends at the timeout
    finally:
        os.unlink(path)
    assert (done.returncode, done.stderr) == (2, f"magw: error: --netns: {plain_message(name)}\n")


@pytest.mark.kernel
@pytest.mark.parametrize(
    "command",
    [("apply", "--snapshot", SEED, "--node", "e-w1"), ("diagnose", "kernel"), ("cleanup",)],
    ids=["apply", "diagnose", "cleanup"],
)
def test_cli_exits_2_with_one_line_for_a_plain_file(
    command: tuple[str, ...], plain_file: str, magw_cli: MagwCli
) -> None:
    """magw apply/diagnose kernel/cleanup --netns PLAIN_FILE: a usage error (exit 2, one line), not a crash."""
    done = magw_cli(*command, "--netns", plain_file)
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"magw: error: --netns: {plain_message(plain_file)}\n",
    )


# -- one LinkTable: read errors are not "no device" ---------------------------------------------


def link_message(seq: int, index: int, name: str) -> bytes:
    body = IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, 0, 0) + nlattr.attr(IFLA_IFNAME, name.encode() + b"\0")
    return nlattr.message(RTM_NEWLINK, nlattr.NLM_F_MULTI, body, seq)


def done(seq: int) -> bytes:
    return nlattr.message(nlattr.NLMSG_DONE, nlattr.NLM_F_MULTI, struct.pack("=i", 0), seq)


def refusal(seq: int, err: int) -> bytes:
    request = nlattr.NLMSGHDR.pack(16, 18, 0, seq, 0)
    return nlattr.message(nlattr.NLMSG_ERROR, nlattr.NLM_F_CAPPED, struct.pack("=i", -err) + request, seq)


@pytest.fixture
def pair() -> Iterator[tuple[RawNetlink, socket.socket]]:
    """A RawNetlink whose kernel is the other end of a socketpair (replies are queued before each call)."""
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    nl = RawNetlink.from_socket(ours, timeout=0.5)
    try:
        yield nl, kernel
    finally:
        nl.close()
        kernel.close()


def dumps_sent(kernel: socket.socket) -> int:
    count = 0
    while True:
        try:
            kernel.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return count
        count += 1


def test_link_table_reads_once_until_invalidated(pair: tuple[RawNetlink, socket.socket]) -> None:
    """Lookups answer from one dump; invalidate() makes the next lookup read again; an unknown name is NoDevice
    (ENODEV) and an unknown index prints as ``if<N>`` like iproute2."""
    nl, kernel = pair
    table = LinkTable(nl)
    kernel.send(link_message(1, 1, "lo") + link_message(1, 7, "vx-submariner") + done(1))
    assert (table.index("vx-submariner"), table.name(1), table.name(9), table.has("eth0")) == (7, "lo", "if9", False)
    with pytest.raises(NoDevice) as missing:
        table.index("eth0")
    assert (str(missing.value), missing.value.code) == ("ENODEV: no device eth0", errno.ENODEV)
    assert dumps_sent(kernel) == 1
    table.invalidate()
    kernel.send(link_message(2, 8, "vx-submariner") + done(2))
    assert table.index("vx-submariner") == 8
    assert dumps_sent(kernel) == 1


def test_fast_path_reports_an_unknown_device_as_enodev(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A nexthop on a device the table does not hold fails that op with ENODEV, unsent."""
    nl, kernel = pair
    kernel.send(link_message(1, 1, "lo") + done(1))
    op = Op(verb="create", kind="nexthops", obj=Nexthop(id=NH, via=IPv4Address("10.0.0.2"), dev="va"))
    (failure,) = RouteNexthopIO(nl).apply([op])
    assert failure.error == "ENODEV: no device va: nexthop id 1627389954 via 10.0.0.2 dev va"
    assert dumps_sent(kernel) == 1  # the link dump only: the op was never sent


def test_fast_path_raises_a_failure_to_read_the_link_table_as_itself(pair: tuple[RawNetlink, socket.socket]) -> None:
    """The kernel refusing the link dump (EACCES) is raised as that error, not turned into "no device va"."""
    nl, kernel = pair
    kernel.send(refusal(1, errno.EACCES))
    op = Op(verb="create", kind="nexthops", obj=Nexthop(id=NH, via=IPv4Address("10.0.0.2"), dev="va"))
    with pytest.raises(NetlinkError) as raised:
        RouteNexthopIO(nl).apply([op])
    assert raised.value.errno == errno.EACCES
