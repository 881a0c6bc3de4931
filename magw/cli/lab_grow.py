"""``magw lab add-gateway --cluster C`` and ``magw lab remove-gateway NODE``: a gateway node joins a running lab,
and leaves it (``magw.lab.build.grow``; docs/lab.md, "Adding a gateway")."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from magw.lab.build import grow


def add_verbs(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    name: Callable[..., None],
    seconds: Callable[[str], float],
) -> None:
    add = verbs.add_parser(
        "add-gateway",
        help="add a new gateway node to a cluster of a running lab (after the workers, no pods) and wait until it "
        "carries traffic",
    )
    add.add_argument("--cluster", required=True, metavar="ID", help="the cluster that gets the gateway (east)")
    name(add)
    add.add_argument("--timeout", type=seconds, default=60.0,
                     help="seconds to wait until it is published, allocated and probed as up (default 60)")  # fmt: skip
    add.set_defaults(lab_run=_add)
    remove = verbs.add_parser(
        "remove-gateway", help="remove an added gateway (the last one added to its cluster) from a running lab"
    )
    remove.add_argument("node", metavar="NODE", help="the added gateway (east-gw3)")
    name(remove)
    remove.set_defaults(lab_run=_remove)


def _out(line: str) -> None:
    print(line, flush=True)


def _add(args: argparse.Namespace) -> int:
    node = grow.add_gateway(args.name, args.cluster, timeout=args.timeout, progress=_out)
    _out(f"remove it: magw lab remove-gateway {node.name} --name {args.name}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    grow.remove_gateway(args.name, args.node, progress=_out)
    return 0
