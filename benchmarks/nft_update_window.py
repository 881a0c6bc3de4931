"""Packets that miss a stateless rewrite while its table changes: a whole-table replace against the in-place change.

The path of tests/support/rewrite_path.py: a client sends ``--flows`` UDP flows at ``--rate`` datagrams/s each through
a router whose raw prerouting chain rewrites the destination (``ip saddr @clients ip daddr set ip daddr map @gn_in``, an
interval set, as Globalnet's ``gn_in``); a datagram that misses the rewrite is lost. During each run the router's
table changes between two versions (the rewrite rule's comment, a rule of another chain) as often as the driver
can, at most ``--changes`` times, each one transaction of our ``NftDriver``:

- ``replace``: ``add table; delete table; add table; chains; sets; rules`` (what the driver sent for any change
  but elements before the in-place change);
- ``update``: the in-place change (``magw.reconcile.nftupdate``): flush the changed chains and refill them, sets
  kept.

The two alternate, ``--repeat`` runs each, in one process. Printed per run: changes, sent, lost; then the totals
and the loss per 100 changes. Found with it (2026-12-02, kernel 6.18, docs/performance.md row 40): at 8,000
datagrams/s the replace lost 8.9-10.7 datagrams per 100 changes, the in-place change none (900 changes each).

Run as root: ``.venv/bin/python benchmarks/nft_update_window.py [--repeat 3] [--rate 1000] [--flows 8]``. The
namespaces are removed in ``finally``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from magw.drivers.nft import NftDriver
from magw.reconcile.changeset import NftChange
from magw.reconcile.diff import nft_changes
from magw.util.logsetup import configure_logging
from tests.support.rewrite_path import Outcome, changing_tables, rewrite_path, run_traffic


def one_run(mode: str, args: argparse.Namespace) -> Outcome:
    with rewrite_path() as path:
        driver = NftDriver(path.router)
        try:
            result = driver.apply([NftChange(family="ip", name="magw", table=changing_tables(0))])
            assert result.failed == (), result.failed

            def change(k: int) -> None:
                (c,) = nft_changes(changing_tables(k), changing_tables(k - 1))
                assert c.update is not None
                done = driver.apply([c if mode == "update" else NftChange(family="ip", name="magw", table=c.table)])
                assert done.failed == (), done.failed

            return run_traffic(path, change, flows=args.flows, rate=args.rate, seconds=args.seconds,
                               max_changes=args.changes)  # fmt: skip
        finally:
            driver.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode (default 3)")
    parser.add_argument("--flows", type=int, default=8, help="UDP flows (default 8)")
    parser.add_argument("--rate", type=int, default=1000, help="datagrams/s per flow (default 1000)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds of traffic per run (default 4)")
    parser.add_argument("--changes", type=int, default=300, help="at most this many table changes per run")
    args = parser.parse_args()
    configure_logging("console", "warning")
    if not 1 <= args.repeat <= 20 or not 1 <= args.flows <= 64 or not 1 <= args.rate <= 5000:
        parser.error("--repeat 1..20, --flows 1..64, --rate 1..5000")
    if not 1.0 <= args.seconds <= 30.0 or not 1 <= args.changes <= 2000:
        parser.error("--seconds 1..30, --changes 1..2000")
    print(f"{args.flows} flows x {args.rate}/s for {args.seconds:g} s per run; "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    totals: dict[str, list[Outcome]] = {"replace": [], "update": []}
    for i in range(args.repeat):
        for mode in ("replace", "update"):
            out = one_run(mode, args)
            totals[mode].append(out)
            print(f"run {i + 1} {mode:7}: {out.changes} changes, sent {out.sent}, lost {out.lost}")
    for mode, outs in totals.items():
        changes, lost = sum(o.changes for o in outs), sum(o.lost for o in outs)
        per = 100.0 * lost / changes if changes else 0.0
        print(f"{mode:7}: {changes} changes, {sum(o.sent for o in outs)} sent, {lost} lost ({per:.1f} per 100 changes)")
    print(f"load at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
