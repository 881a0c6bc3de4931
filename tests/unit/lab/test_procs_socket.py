"""``procs.wait_for_socket``: a server's unix socket counts once the server listens, not when the file appears.

Found by the OVN soak in CI: ``ovsdb-server`` had bound ``db.sock`` (the file existed) but not yet listened, and
``ovs-vsctl --no-wait init`` exited on "Connection refused". These use real unix sockets in a temp directory.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from magw.drivers.unixsock import listens
from magw.lab.build import procs
from magw.lab.errors import LabError


def _record(pid: int, ticks: int) -> procs.ProcRecord:
    return procs.ProcRecord(kind="ovs-db", owner="gw1", namespace="-", pid=pid, start_ticks=ticks, argv=("x",),
                            log="/dev/null")  # fmt: skip


def _me() -> procs.ProcRecord:
    ticks = procs.start_ticks(os.getpid())
    assert ticks is not None
    return _record(os.getpid(), ticks)


def test_a_bound_socket_that_does_not_listen_yet_is_not_a_server(tmp_path: Path) -> None:
    path = tmp_path / "db.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        assert path.exists() and not listens(path)
        server.listen(1)
        assert listens(path)
    assert not listens(tmp_path / "missing.sock")


def test_wait_for_socket_returns_once_the_server_listens(tmp_path: Path) -> None:
    path = tmp_path / "db.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        timer = threading.Timer(0.3, server.listen, args=(1,))
        timer.start()
        try:
            procs.wait_for_socket(path, _me(), timeout=10.0, poll=0.02)
        finally:
            timer.join()
        assert listens(path)


def test_wait_for_socket_says_when_nothing_listens_or_the_server_exited(tmp_path: Path) -> None:
    path = tmp_path / "db.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        with pytest.raises(LabError, match=r"^ovs-db of gw1: nothing listens on .*db\.sock after 0\.2 s$"):
            procs.wait_for_socket(path, _me(), timeout=0.2, poll=0.02)
        gone = _record(os.getpid(), -1)  # another start time: not this process any more
        with pytest.raises(LabError, match=r"^ovs-db of gw1 exited \(see /dev/null\)$"):
            procs.wait_for_socket(path, gone, timeout=5.0, poll=0.02)
