"""``python -m magw.ops.verify.nodetrace``: the hop table of ``magw verify --kubeconfig``, on one node.

``magw verify --kubeconfig`` runs this in a privileged ``hostNetwork`` pod on every node of the clusters
(``nodeName`` set), while its traced UDP streams run (``magw.ops.verify.kubetrace``). It loads the hop table
(``magw.ops.verify.hops``: two sets of client ports, requests and replies, filled at prerouting; it accepts every
packet, it only counts) under a name of the run's own into the node's namespace, prints one JSON line
``{"event": "tracing", "table": NAME}``, then every ``--every`` seconds the client ports it has seen, when they
changed (``{"event": "seen", "at": WALL_CLOCK, "req": [...], "rep": [...]}``; a port leaves a set ``--keep``
seconds after its last packet). At ``--seconds`` (a bound, whatever happens to the caller) or on SIGTERM/SIGINT
(the pod deleted) it removes the table, prints ``{"event": "done"}`` and exits 0.

It changes the namespace it runs in: like ``magw apply`` it refuses (exit 2, one line on stderr) when that is, or
may be, the host's initial namespace, unless ``--allow-init-netns``. A hostNetwork pod on a real node runs in the
host's namespace on purpose; verify passes the flag there (the lab kubelet runs it in the lab node's namespace).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from magw.drivers.netns import ALLOW_FLAG, current_netns_refusal
from magw.ops.verify import hops

TABLE_RE = re.compile(r"^magw_verify[a-z0-9_]{0,40}$")
NFT_TIMEOUT = 10.0


class Stop(Exception):
    """SIGTERM or SIGINT: remove the table and exit."""


def raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop


def nft(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["nft", *args], input=stdin, capture_output=True, text=True, timeout=NFT_TIMEOUT,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"nft {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def seen(table: str) -> tuple[list[int], list[int]]:
    """The client ports whose requests and replies entered this namespace."""
    sets = [sorted(hops.elements(json.loads(nft("-j", "list", "set", "ip", table, s)))) for s in ("req", "rep")]
    return sets[0], sets[1]


def remove_table(table: str) -> None:
    """Delete ``ip`` table ``table``; one never loaded is no error."""
    try:
        nft("delete", "table", "ip", table)
    except RuntimeError as exc:
        if "No such file" not in str(exc):
            raise


def say(doc: dict[str, object]) -> None:
    print(json.dumps(doc), flush=True)


@contextlib.contextmanager
def table_held(table: str, text: str, then: Callable[[], None]) -> Iterator[None]:
    """Table ``table`` loaded from ``text`` (nft) for the block, removed afterwards whatever ends it, then
    ``then()``. SIGTERM or SIGINT (``Stop``) ends the block quietly; a second one does not cut the removal short.
    ``nodefail`` too."""
    try:
        nft("-f", "-", stdin=text)
        yield
    except Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        remove_table(table)
        then()


def trace(table: str, seconds: float, every: float, keep: float = hops.KEEP_SECONDS) -> None:
    """Load the table, report what it sees until ``seconds`` pass or a signal comes, and remove it (always)."""
    with table_held(table, hops.table_text(table=table, keep=keep), lambda: say({"event": "done"})):
        say({"event": "tracing", "table": table})
        last: tuple[list[int], list[int]] | None = None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            now = seen(table)
            if now != last:
                say({"event": "seen", "at": time.time(), "req": now[0], "rep": now[1]})
                last = now
            time.sleep(min(every, max(0.0, deadline - time.monotonic())))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magw.ops.verify.nodetrace", description=__doc__.split("\n")[0])
    parser.add_argument("--table", default=hops.TABLE, help=f"the table's name, magw_verify... (default {hops.TABLE})")
    parser.add_argument("--seconds", type=float, default=300.0, help="remove the table and exit after this long")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between looks at the sets (default 0.5)")
    parser.add_argument("--keep", type=float, default=float(hops.KEEP_SECONDS),
                        help="seconds a port stays in a set after its last packet (default 120; the failover "
                        "measurement's tracers: 0.4, to see where flows are now)")  # fmt: skip
    parser.add_argument(ALLOW_FLAG, action="store_true", dest="allow_init",
                        help="allow the host's initial namespace (a hostNetwork pod on a real node)")  # fmt: skip
    args = parser.parse_args(argv)
    if not TABLE_RE.match(args.table):
        parser.error(f"--table: {args.table!r} is not magw_verify followed by up to 40 of [a-z0-9_]")
    if not 0 < args.seconds <= 3600 or not 0.05 <= args.every <= 10 or not 0.1 <= args.keep <= 3600:
        parser.error("--seconds: 0..3600; --every: 0.05..10; --keep: 0.1..3600")
    refused = current_netns_refusal("add a trace table to", allow=args.allow_init, instead="run it in a node's pod")
    if refused is not None:
        print(f"nodetrace: {refused}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, raise_stop)
    signal.signal(signal.SIGINT, raise_stop)
    try:
        trace(args.table, args.seconds, args.every, args.keep)
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"nodetrace: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
