"""magw.drivers.ovs.announce on a real device: the ARP request sent from one namespace teaches the namespace that
holds the target address the sender's MAC, as an OVN router learns it (``put_arp``). Oracle: the receiver's
neighbour table, read with ``ip -json neigh`` by the test."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support.netns import NsFactory, ip_json, run, veth_between

pytestmark = pytest.mark.kernel

SEND = "from ipaddress import IPv4Address as A; from magw.drivers.ovs.announce import send_arp_request as s; "


def neighbours(ns: str, dev: str) -> dict[str, str]:
    return {n["dst"]: n.get("lladdr", "") for n in ip_json(ns, "neigh", "show", "dev", dev)}


def test_the_request_teaches_the_target_our_mac_and_the_sender_keeps_its_table(ns_factory: NsFactory) -> None:
    pair = veth_between(ns_factory("magwt-arp"), ns_factory("magwt-arp"))
    run(pair.a, "ip", "addr", "add", "169.254.254.10/29", "dev", pair.a_dev)
    run(pair.b, "ip", "addr", "add", "169.254.254.9/29", "dev", pair.b_dev)
    mac = ip_json(pair.a, "link", "show", pair.a_dev)[0]["address"]
    assert "169.254.254.10" not in neighbours(pair.b, pair.b_dev)
    subprocess.run(["ip", "netns", "exec", pair.a, sys.executable, "-c",
                    SEND + f"s({pair.a_dev!r}, A('169.254.254.10'), A('169.254.254.9'))"],
                   check=True, timeout=30)  # fmt: skip
    deadline = time.monotonic() + 5
    while neighbours(pair.b, pair.b_dev).get("169.254.254.10") != mac and time.monotonic() < deadline:
        time.sleep(0.05)
    assert neighbours(pair.b, pair.b_dev).get("169.254.254.10") == mac
    time.sleep(0.2)  # the target's reply has come back by now
    assert "169.254.254.9" not in neighbours(pair.a, pair.a_dev)  # the request bypasses the sender's own table


def test_a_missing_device_is_an_oserror(ns_factory: NsFactory) -> None:
    ns = ns_factory("magwt-arp")
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c",
                          SEND + "s('ovn-k8s-sub0', A('169.254.254.10'), A('169.254.254.9'))"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode != 0 and "OSError" in out.stderr
