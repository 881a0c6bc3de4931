"""keepalived.conf rendering (magw.drivers.keepalived.config): golden text, the choices it encodes, and
keepalived's own config check (``keepalived -t``) on what we render.

To accept a deliberate change: ``MAGW_REGEN_GOLDEN=1 .venv/bin/pytest tests/unit/drivers/test_keepalived_config.py``.
"""

from __future__ import annotations

import difflib
import itertools
import os
import shutil
import subprocess
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from magw.drivers.keepalived.config import (
    AgentCheck,
    KeepalivedConfigError,
    KeepalivedNode,
    priorities,
    render,
)
from magw.model.egressgw import EgressBinding, EgressConfig, EgressVIP
from tests.support.paths import GOLDEN as GOLDEN_DIR

GOLDEN = GOLDEN_DIR / "keepalived-n1.conf"
REGEN = os.environ.get("MAGW_REGEN_GOLDEN") == "1"
A = IPv4Address
IPS = {"n1": A("172.31.0.1"), "n2": A("172.31.0.2"), "n3": A("172.31.0.3")}
VIPS = (
    EgressVIP(name="web", vip=A("172.31.0.100"), vrid=7, candidates=("n1", "n2", "n3"),
              bindings=[EgressBinding(namespace="shop", service="web")]),
    EgressVIP(name="db", vip=A("172.31.0.101"), vrid=8, candidates=("n2", "n1", "gone")),
    EgressVIP(name="other", vip=A("172.31.0.102"), vrid=9, candidates=("n2", "n3")),
)  # fmt: skip
NODE = KeepalivedNode(
    name="n1", interface="eth0", ip=A("172.31.0.1"), fifo="/run/magw/notify.fifo",
    check=AgentCheck(lock_file="/run/magw/agent.lock"),
)  # fmt: skip


def _render(**kw: object) -> str:
    return render(NODE, VIPS, IPS, EgressConfig(advert_int=0.1, **kw))  # type: ignore[arg-type]


def _instance(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"vrrp_instance {name} {{")
    return lines[start : lines.index("}", start) + 1]


def test_golden() -> None:
    text = _render()
    if REGEN:
        GOLDEN.write_text(text)
    expected = GOLDEN.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "rendered"))
    assert text == expected, f"{GOLDEN.name} differs (MAGW_REGEN_GOLDEN=1 to accept):\n{diff}"


def test_deterministic_whatever_the_input_order() -> None:
    again = render(NODE, tuple(reversed(VIPS)), dict(reversed(list(IPS.items()))), EgressConfig(advert_int=0.1))
    assert again == _render()


def test_one_instance_per_vip_the_node_is_a_candidate_of() -> None:
    text = _render()
    names = [line.split()[1] for line in text.splitlines() if line.startswith("vrrp_instance ")]
    assert names == ["db", "web"]  # not "other": n1 is no candidate of it


def test_instance_settings() -> None:
    web = _instance(_render(), "web")
    assert "  virtual_router_id 7" in web
    assert "  priority 250" in web  # first candidate
    assert "  advert_int 0.1" in web
    assert "  nopreempt" in web and "  state BACKUP" in web
    assert "  unicast_src_ip 172.31.0.1" in web
    peers = web[web.index("  unicast_peer {") + 1 : web.index("  }")]
    assert peers == ["    172.31.0.2", "    172.31.0.3"]
    assert "    172.31.0.100/32 dev eth0" in web
    assert "    magw_agent" in web


def test_second_candidate_priority_and_unknown_peer_is_left_out_visibly() -> None:
    db = _instance(_render(), "db")
    assert "  priority 230" in db  # second of three: 250, 230, 210
    peers = db[db.index("  unicast_peer {") + 1 : db.index("  }")]
    assert peers == ["    172.31.0.2"]
    assert "  # candidate gone: no underlay IP known, left out" in db
    # gone's adverts (it may know our IP) must still count, or both would hold the VIP
    assert "  check_unicast_src" not in db


def test_adverts_count_only_from_the_unicast_peers_when_all_are_known() -> None:
    assert "  check_unicast_src" in _instance(_render(), "web")


def test_global_defs_vrrpv3_fifo_and_the_agent_check() -> None:
    text = _render()
    assert "  vrrp_version 3" in text
    assert "  vrrp_notify_fifo /run/magw/notify.fifo" in text
    assert '  script "/usr/bin/flock -n -E 0 /run/magw/agent.lock /bin/false"' in text
    # script_user must come before the FIFO line (a reload parses in order; see config.py)
    assert text.index("script_user root") < text.index("vrrp_notify_fifo")


def test_without_a_check_no_script_is_tracked() -> None:
    bare = KeepalivedNode(name="n1", interface="eth0", ip=A("172.31.0.1"), fifo="/f")
    text = render(bare, VIPS, IPS, EgressConfig(advert_int=1.0))
    assert "vrrp_script" not in text and "track_script" not in text
    assert "  advert_int 1" in text


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (1, (250,)),
        (2, (250, 230)),
        (3, (250, 230, 210)),
        (13, tuple(range(250, 9, -20))),
        (14, tuple(range(250, 0, -19))),
    ],
)
def test_priorities_spread(count: int, expected: tuple[int, ...]) -> None:
    assert priorities(count) == expected


def test_priorities_strictly_decreasing_and_in_range() -> None:
    for n in range(1, 251):
        p = priorities(n)
        assert len(p) == n and all(1 <= x <= 254 for x in p)
        assert all(a > b for a, b in itertools.pairwise(p))
    with pytest.raises(KeepalivedConfigError):
        priorities(251)


def test_refusals() -> None:
    with pytest.raises(KeepalivedConfigError, match="virtual_router_id 7"):
        render(NODE, (*VIPS, EgressVIP(name="dup", vip=A("172.31.0.103"), vrid=7, candidates=("n1",))), IPS,
               EgressConfig())  # fmt: skip
    with pytest.raises(KeepalivedConfigError, match="advert_int"):
        render(NODE, VIPS, IPS, EgressConfig(advert_int=0.001))
    with pytest.raises(KeepalivedConfigError, match="FIFO path"):
        render(KeepalivedNode(name="n1", interface="eth0", ip=A("1.1.1.1"), fifo="/a b"), VIPS, IPS, EgressConfig())
    with pytest.raises(KeepalivedConfigError, match="interval"):
        render(KeepalivedNode(name="n1", interface="eth0", ip=A("1.1.1.1"), fifo="/f",
                              check=AgentCheck(lock_file="/l", interval=0)), VIPS, IPS, EgressConfig())  # fmt: skip


@pytest.mark.skipif(shutil.which("keepalived") is None, reason="keepalived (Debian) not installed")
def test_keepalived_accepts_what_we_render(tmp_path: Path) -> None:
    """keepalived's own parser (``-t``) finds no error in the golden config (it would reject e.g. interval 0.5)."""
    conf = tmp_path / "keepalived.conf"
    conf.write_text(_render())
    done = subprocess.run(["keepalived", "-t", "-f", str(conf)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
