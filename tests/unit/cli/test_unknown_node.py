"""An unknown ``--node`` reads the same in ``magw plan`` and ``magw apply``, and as docs/cli.md shows it."""

from __future__ import annotations

from tests.support.cli import MagwCli
from tests.support.paths import EXAMPLES, REPO

SEED = str(EXAMPLES / "seed-east.yaml")
LINE = "magw: error: --node: unknown node 'e-w9' (known nodes: e-gw1, e-gw2, e-w1)"


def test_plan_and_apply_name_the_known_nodes_in_one_wording(magw_cli: MagwCli) -> None:
    """Both commands exit 2 with the same one line (apply checks the node before it looks at any namespace, so
    this needs no root), and docs/cli.md quotes exactly that line."""
    results = [
        magw_cli(verb, "--snapshot", SEED, "--node", "e-w9", *extra)
        for verb, extra in (("plan", ()), ("apply", ("--dry-run",)))
    ]
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(2, "", LINE + "\n")] * 2
    assert LINE in (REPO / "docs" / "cli.md").read_text(encoding="utf-8").splitlines()
