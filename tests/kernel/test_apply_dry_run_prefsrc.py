"""``magw apply --dry-run`` names the routes the kernel will refuse for their ``src`` (docs/commands.md, "Dry run").

A worker's routes to remote clusters carry its ``cni_ip`` as ``src``; without that address in the
namespace the real apply fails them with "Invalid prefsrc address". The dry run, run first, says so.
"""

from __future__ import annotations

import pytest

from tests.support.cli import MagwCli
from tests.support.kernel_node import add_cni_device
from tests.support.netns import ip_json
from tests.support.paths import EXAMPLES

pytestmark = pytest.mark.kernel

SEED = str(EXAMPLES / "seed-east.yaml")
ROUTES = ("10.2.0.0/16", "100.2.0.0/16")  # west's pod and service CIDRs, both with src 10.1.3.1


def _apply(magw_cli: MagwCli, ns: str, *extra: str) -> tuple[int, list[str]]:
    out = magw_cli("apply", "--snapshot", SEED, "--node", "e-w1", "--netns", ns, *extra)
    return out.returncode, out.stdout.splitlines()


def test_dry_run_names_the_routes_whose_src_the_namespace_lacks(ns: str, magw_cli: MagwCli) -> None:
    """No cni0 address: the dry run prints one ``dry run: would fail`` line per route the real apply then fails,
    and exits 1 as that apply does; nothing was applied by the dry run."""
    code, lines = _apply(magw_cli, ns, "--dry-run")
    doomed = [line for line in lines if line.startswith("dry run: would fail: ")]
    assert code == 1
    assert [line.split(" table ")[0].removeprefix("dry run: would fail: route ") for line in doomed] == list(ROUTES)
    assert all("10.1.3.1 is not an address in this namespace" in line and "cni0" in line for line in doomed)
    assert ip_json(ns, "route", "show", "table", "all", "proto", "157") == []

    real_code, real = _apply(magw_cli, ns)
    failed = [line.removeprefix("failed: create route ").split(" table ")[0] for line in real if "prefsrc" in line]
    assert (real_code, failed) == (1, list(ROUTES))


def test_dry_run_with_the_cni_address_predicts_no_failure(ns: str, magw_cli: MagwCli) -> None:
    """With the node's cni_ip on cni0 the dry run has no ``would fail`` line and exits 0, and the apply succeeds."""
    add_cni_device(ns, "10.1.3.1")
    code, lines = _apply(magw_cli, ns, "--dry-run")
    assert (code, [line for line in lines if "would fail" in line]) == (0, [])
    assert _apply(magw_cli, ns)[0] == 0
