"""Kernel test: ``python -m magw.ops.verify.nodefail`` (what ``magw verify --kubeconfig --failover`` runs on the
victim gateway) in fresh namespaces: while it holds, nothing crosses a device named like magw's datapath
(``vx-submariner`` here, a veth) either way, while another device still carries traffic; afterwards both carry
traffic again and its table is gone, at the end of ``--hold`` and on SIGTERM. A namespace without magw's devices
is refused and left untouched."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from magw.drivers.netns import run_in_netns
from magw.lab.build import netns
from tests.support.netns import NsFactory, veth_between
from tests.support.subproc import finish

pytestmark = pytest.mark.kernel
TABLE = "magw_verify_fail_t1"


def _udp_gets_through(src: str, dst: str, dst_ip: str) -> bool:
    """One datagram from ``src`` to ``dst_ip`` in ``dst`` arrives (0.3 s at most); a send the sender's kernel
    refused did not."""
    rx = run_in_netns(dst, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    try:
        rx.bind((dst_ip, 0))
        rx.settimeout(0.3)
        port = rx.getsockname()[1]

        def send() -> bool:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
                try:
                    tx.sendto(b"x", (dst_ip, port))
                except PermissionError:  # dropped on its way out (EPERM from a local packet's drop)
                    return False
                return True

        if not run_in_netns(src, send):
            return False
        try:
            rx.recv(16)
            return True
        except TimeoutError:
            return False
    finally:
        rx.close()


def _pair(ns_factory: NsFactory) -> tuple[str, str]:
    """Gateway ``gw`` joined to ``peer`` by ``vx-submariner`` (10.9.0.0/30) and by ``eth9`` (10.9.1.0/30)."""
    gw, peer = ns_factory(), ns_factory()
    veth_between(gw, peer, "vx-submariner", "vxs-peer")
    veth_between(gw, peer, "eth9", "eth9-peer")
    for ns, dev, ip in ((gw, "vx-submariner", "10.9.0.1/30"), (peer, "vxs-peer", "10.9.0.2/30"),
                        (gw, "eth9", "10.9.1.1/30"), (peer, "eth9-peer", "10.9.1.2/30")):  # fmt: skip
        netns.ns_exec(ns, "ip", "addr", "add", ip, "dev", dev)
    return gw, peer


def _start(ns: str, hold: str) -> subprocess.Popen[str]:
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "magw.ops.verify.nodefail", "--table", TABLE, "--hold",
            hold]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_failed(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no output"
    return dict(json.loads(line))


@pytest.mark.parametrize("end", ["hold", "sigterm"])
def test_it_cuts_only_magws_devices_and_restores_them(ns_factory: NsFactory, end: str) -> None:
    gw, peer = _pair(ns_factory)
    assert _udp_gets_through(peer, gw, "10.9.0.1") and _udp_gets_through(gw, peer, "10.9.0.2")
    proc = _start(gw, "3" if end == "hold" else "60")
    try:
        failed = _wait_failed(proc)
        assert failed["event"] == "failed" and failed["devices"] == ["vx-submariner"]
        assert not _udp_gets_through(peer, gw, "10.9.0.1"), "a datagram entered through vx-submariner"
        assert not _udp_gets_through(gw, peer, "10.9.0.2"), "a datagram left through vx-submariner"
        assert _udp_gets_through(peer, gw, "10.9.1.1"), "the node's other device was cut too"
        if end == "sigterm":
            proc.send_signal(signal.SIGTERM)
        out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["event"] == "recovered"
    assert TABLE not in netns.ns_exec(gw, "nft", "list", "tables")
    deadline = time.monotonic() + 2
    while not _udp_gets_through(peer, gw, "10.9.0.1"):
        assert time.monotonic() < deadline, "vx-submariner still cut after the recovery"
    assert _udp_gets_through(gw, peer, "10.9.0.2")


def test_a_namespace_without_magws_devices_is_refused(ns: str) -> None:
    proc = _start(ns, "1")
    out, err = finish(proc)
    assert proc.returncode == 1 and out == ""
    assert err.startswith("nodefail: none of magw's datapath devices (vx-submariner, vxlan-tunnel, magw-wg)"), err
    assert TABLE not in netns.ns_exec(ns, "nft", "list", "tables")
