"""``magw egress bind|unbind|show`` on a broker directory: the operations' rules, one-line refusals (exit 2)
that write nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from magw.cli.main import main
from tests.support.broker_docs import BrokerDocuments, egress_vip, files


@pytest.fixture(autouse=True)
def _keep_log_config() -> Iterator[None]:
    """``main()`` configures logging (level warning): later tests' ``capture_logs`` must still see info."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def broker(tmp_path: Path, broker_documents: BrokerDocuments) -> Path:
    (tmp_path / "base.yaml").write_text(broker_documents("egress-east.yaml"))
    (tmp_path / "vip-a.yaml").write_text(egress_vip("a", 10))
    return tmp_path


def test_bind_show_unbind(broker: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = ["--broker-dir", str(broker), "--cluster", "east"]
    assert main(["egress", "bind", *src, "192.0.2.10", "shop"]) == 0
    assert capsys.readouterr().out == "a (192.0.2.10): services shop/db, shop/web\n"
    assert main(["egress", "show", *src, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["vips"][0]["bindings"] == ["namespace shop"] and shown["vips"][0]["services"] == [
        "shop/db",
        "shop/web",
    ]
    assert main(["egress", "show", *src]) == 0
    assert "  services: shop/db, shop/web\n" in capsys.readouterr().out
    assert main(["egress", "unbind", *src, "a", "shop"]) == 0
    assert capsys.readouterr().out == "a (192.0.2.10): services none\n"


def test_a_refusal_is_one_line_exit_2_and_writes_nothing(broker: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = files(broker)
    assert main(["egress", "bind", "--broker-dir", str(broker), "--cluster", "east", "a", "shop", "nope"]) == 2
    assert capsys.readouterr().err == "magw: error: egress bind: service shop/nope does not exist\n"
    assert files(broker) == before
