"""The ``wg`` tool's wrapper: ``wg show DEV dump`` parsed with the private key dropped, one ``wg set`` line with
the private key by path, and failures as one-line ``WgError``s (a stand-in ``wg`` given through ``prefix``)."""

from __future__ import annotations

import sys
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from magw.desired.cable.values import WgChanges, WgObserved, WgObservedPeer, WgPeer
from magw.drivers.wireguard.tool import WgError, WgTool, parse_dump, set_args
from tests.unit.cable.data import E_GW1_PRIV, E_GW1_PUB, OTHER_PUB, S_GW1_PUB, W_GW1_PUB, W_GW2_PUB

N = IPv4Network

# What `wg show magw-wg dump` prints: the interface (private key, public key, listen port, fwmark), then per
# peer: public key, preshared key, endpoint, allowed IPs, latest handshake, rx, tx, persistent keepalive.
DUMP = (
    f"{E_GW1_PRIV}\t{E_GW1_PUB}\t51820\toff\n"
    f"{W_GW1_PUB}\t(none)\t203.0.113.4:51820\t242.19.0.4/32\t1700000123\t10240\t20480\toff\n"
    f"{S_GW1_PUB}\t(none)\t(none)\t242.20.3.9/32,fd00:242::9/128\t0\t0\t0\t25\n"
    f"{W_GW2_PUB}\t(none)\t(none)\t(none)\t0\t0\t0\toff\n"
)


def test_parse_dump_reads_the_interface_and_every_peer() -> None:
    assert parse_dump(DUMP) == WgObserved(
        public_key=E_GW1_PUB,
        listen_port=51820,
        peers=(
            WgObservedPeer(
                public_key=W_GW1_PUB,
                endpoint="203.0.113.4:51820",
                allowed_ips=(N("242.19.0.4/32"),),
                latest_handshake=1700000123,
                rx_bytes=10240,
                tx_bytes=20480,
            ),
            WgObservedPeer(
                public_key=S_GW1_PUB,
                endpoint=None,
                allowed_ips=(N("242.20.3.9/32"),),  # the IPv6 prefix is not ours: ignored
                latest_handshake=0,
                rx_bytes=0,
                tx_bytes=0,
            ),
            WgObservedPeer(
                public_key=W_GW2_PUB,
                endpoint=None,
                allowed_ips=(),
                latest_handshake=0,
                rx_bytes=0,
                tx_bytes=0,
            ),
        ),
    )


def test_the_private_key_is_dropped() -> None:
    observed = parse_dump(DUMP)
    assert E_GW1_PRIV not in repr(observed)
    assert E_GW1_PRIV not in str(observed)


def test_a_device_without_a_key_or_peers() -> None:
    assert parse_dump("(none)\t(none)\t0\toff\n") == WgObserved(public_key=None, listen_port=0, peers=())


def test_several_allowed_ips_are_all_kept() -> None:
    text = f"(none)\t(none)\t1\toff\n{OTHER_PUB}\t(none)\t(none)\t242.1.2.3/32,10.9.0.0/16\t0\t0\t0\toff\n"
    (peer,) = parse_dump(text).peers
    assert peer.allowed_ips == (N("242.1.2.3/32"), N("10.9.0.0/16"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "wg show dump: no interface line"),
        ("\n\n", "wg show dump: no interface line"),
        ("Unable to access interface: No such device\n", "wg show dump: no interface line"),
        (f"{E_GW1_PRIV}\t{E_GW1_PUB}\n", "wg show dump: no interface line"),
        (f"{E_GW1_PRIV}\t{E_GW1_PUB}\t51820\toff\n{W_GW1_PUB}\t(none)\t1.2.3.4:5\n", "a peer line of 3 fields"),
    ],
    ids=["empty", "blank-lines", "an-error-text", "short-interface-line", "short-peer-line"],
)
def test_malformed_dumps_raise_one_line_wg_errors(text: str, message: str) -> None:
    with pytest.raises(WgError) as info:
        parse_dump(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert E_GW1_PRIV not in str(info.value)


def test_an_unparsable_allowed_ips_field_is_a_wg_error() -> None:
    text = f"{E_GW1_PRIV}\t{E_GW1_PUB}\t51820\toff\n{W_GW1_PUB}\t(none)\t(none)\tgarbage\t0\t0\t0\toff\n"
    with pytest.raises(WgError):
        parse_dump(text)


# ----- wg set --------------------------------------------------------------------------------------------------

P1 = WgPeer(
    public_key=W_GW1_PUB,
    owner="west/w-gw1",
    endpoint=IPv4Address("203.0.113.4"),
    port=51999,
    allowed_ips=(N("242.19.0.4/32"),),
)


def test_set_args_in_wg_words() -> None:
    changes = WgChanges(private_key=True, listen_port=51999, upsert=(P1,), remove=(OTHER_PUB,))
    assert set_args("magw-wg", changes, "/var/lib/magw/wireguard/private.key") == [
        "set",
        "magw-wg",
        "listen-port",
        "51999",
        "private-key",
        "/var/lib/magw/wireguard/private.key",
        "peer",
        W_GW1_PUB,
        "endpoint",
        "203.0.113.4:51999",
        "allowed-ips",
        "242.19.0.4/32",
        "peer",
        OTHER_PUB,
        "remove",
    ]


def test_set_args_pass_the_private_key_by_path_only(tmp_path: Path) -> None:
    key = tmp_path / "private.key"
    key.write_text(E_GW1_PRIV + "\n")
    args = set_args("magw-wg", WgChanges(private_key=True, listen_port=None, upsert=(), remove=()), str(key))
    assert args == ["set", "magw-wg", "private-key", str(key)]
    assert not any(E_GW1_PRIV in a for a in args)


def test_set_args_leave_out_what_is_right() -> None:
    changes = WgChanges(private_key=False, listen_port=None, upsert=(), remove=(W_GW2_PUB, OTHER_PUB))
    assert set_args("magw-wg", changes, "/k") == [
        "set",
        "magw-wg",
        "peer",
        W_GW2_PUB,
        "remove",
        "peer",
        OTHER_PUB,
        "remove",
    ]


def test_set_args_join_several_allowed_ips_with_commas() -> None:
    peer = WgPeer(
        public_key=W_GW1_PUB,
        owner="west/w-gw1",
        endpoint=IPv4Address("203.0.113.4"),
        port=1,
        allowed_ips=(N("242.19.0.4/32"), N("10.2.0.0/16")),
    )
    args = set_args("magw-wg", WgChanges(private_key=False, listen_port=None, upsert=(peer,), remove=()), "/k")
    assert args[-2:] == ["allowed-ips", "242.19.0.4/32,10.2.0.0/16"]


# ----- WgTool, with a stand-in wg ---------------------------------------------------------------------------

FAKE_WG = """\
import pathlib, sys
log = pathlib.Path(sys.argv[1])
assert sys.argv[3] == "wg"
args = sys.argv[4:]  # after the log path, the dump's path and "wg"
with log.open("a") as f:
    f.write(" ".join(args) + "\\n")
if args[0] == "show":
    sys.stdout.write(pathlib.Path(sys.argv[2]).read_text())
    sys.exit(0)
sys.stderr.write("Warning: something first\\nUnable to modify interface: Operation not permitted\\n")
sys.exit(1)
"""


def fake_tool(tmp_path: Path, dump: str) -> tuple[WgTool, Path]:
    script = tmp_path / "fake_wg.py"
    script.write_text(FAKE_WG)
    log = tmp_path / "calls.log"
    (tmp_path / "dump.txt").write_text(dump)
    # argv: python fake_wg.py LOG DUMP wg ARGS...
    return WgTool("magw-wg", (sys.executable, str(script), str(log), str(tmp_path / "dump.txt"))), log


def test_show_runs_wg_show_dump(tmp_path: Path) -> None:
    tool, log = fake_tool(tmp_path, DUMP)
    assert tool.show() == parse_dump(DUMP)
    assert log.read_text() == "show magw-wg dump\n"


def test_apply_of_no_changes_runs_nothing(tmp_path: Path) -> None:
    tool, log = fake_tool(tmp_path, DUMP)
    tool.apply(WgChanges(private_key=False, listen_port=None, upsert=(), remove=()), "/k")
    assert not log.exists()


def test_a_failing_wg_is_one_line_with_its_last_reason(tmp_path: Path) -> None:
    tool, log = fake_tool(tmp_path, DUMP)
    with pytest.raises(WgError) as info:
        tool.apply(WgChanges(private_key=True, listen_port=None, upsert=(), remove=()), "/k")
    assert str(info.value) == "wg set magw-wg: Unable to modify interface: Operation not permitted"
    assert log.read_text() == "set magw-wg private-key /k\n"


def test_a_missing_wg_is_one_line(tmp_path: Path) -> None:
    tool = WgTool("magw-wg", (str(tmp_path / "no-such-wg"),))
    with pytest.raises(WgError) as info:
        tool.show()
    assert "not found" in str(info.value) and "\n" not in str(info.value)
