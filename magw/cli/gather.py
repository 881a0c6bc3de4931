"""``magw gather``: one tarball of what a bug report needs, never a private key or a token (docs/gather.md).

    magw gather (--lab NAME | [--netns NS | --node] [--kubeconfig FILE]) [-o FILE] [--state-dir DIR]
                [--file FILE]... [--namespace NS] [--no-diagnose] [--timeout SECONDS] [--list]

Reads only; writes the tarball (``MANIFEST.json`` inside lists each file and the command or file it came from,
and what failed). Exit 0 when the tarball was written, even if some collections failed (they are in the MANIFEST
and on stderr); 2 for bad input (no such lab, namespace or kubeconfig).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from magw.cli import UsageError
from magw.cli.nodeargs import require_netns


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lab", metavar="NAME", help="a lab made by magw lab up: its files, statuses, control plane, "
                        "OVN rows and every node")  # fmt: skip
    parser.add_argument("--netns", metavar="NS", help="one node: its network namespace (ip netns)")
    parser.add_argument("--node", action="store_true", help="one node: the current network namespace (on a node, "
                        "or in a gateway pod)")  # fmt: skip
    parser.add_argument("--kubeconfig", metavar="FILE", help="a cluster: magw's objects with their statuses, as far "
                        "as this kubeconfig may read them (no Secret, no Pod)")  # fmt: skip
    parser.add_argument("--namespace", default="submariner-operator",
                        help="--kubeconfig: magw's namespace (default %(default)s)")  # fmt: skip
    parser.add_argument("--state-dir", metavar="DIR", type=Path,
                        help="--netns/--node: the node's daemons' --state-dir (wireguard-go's pid and log; the key "
                        "file there is never read)")  # fmt: skip
    parser.add_argument("--file", metavar="FILE", type=Path, action="append", default=[],
                        help="--netns/--node: one more file to include, redacted (a daemon's log or status file; "
                        "repeatable)")  # fmt: skip
    parser.add_argument("-o", "--output", metavar="FILE", type=Path,
                        help="the tarball to write (default magw-gather-<UTC time>.tar.gz here)")  # fmt: skip
    parser.add_argument("--no-diagnose", action="store_true", help="do not run magw diagnose")
    parser.add_argument("--timeout", type=float, default=20.0, metavar="SECONDS",
                        help="bound of each collection command (default %(default)g; diagnose gets 180)")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="print every file written with its source")


def _check(args: argparse.Namespace) -> None:
    if args.lab is not None and (args.netns or args.node or args.kubeconfig):
        raise UsageError("gather: --lab gathers the whole lab; it goes without --netns, --node and --kubeconfig")
    if args.lab is None and not (args.netns or args.node or args.kubeconfig):
        raise UsageError("gather: say what to gather: --lab NAME, --netns NS (or --node), --kubeconfig FILE")
    if args.netns and args.node:
        raise UsageError("gather: --netns NS and --node (the current namespace) name two nodes: give one")
    if (args.state_dir or args.file) and not (args.netns or args.node):
        raise UsageError("gather: --state-dir and --file go with --netns or --node")
    if args.timeout <= 0:
        raise UsageError(f"--timeout: {args.timeout:g} is not a positive number of seconds")
    if args.kubeconfig is not None and not Path(args.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {args.kubeconfig}: no such file")
    for path in args.file:
        if not path.is_file():
            raise UsageError(f"--file {path}: no such file")
    if args.output is not None and not args.output.parent.resolve().is_dir():
        raise UsageError(f"-o {args.output}: no directory {args.output.parent}")


def run(args: argparse.Namespace) -> int:
    _check(args)
    from magw.ops.gather.lab import NoLab
    from magw.ops.gather.run import Options, default_output, gather, member_listing, summary_lines

    netns = require_netns(args.netns, guard=False) if args.netns else None  # it only reads
    output = args.output or default_output()
    opts = Options(output=output, lab=args.lab, node=bool(args.netns or args.node), netns=netns,
                   state_dir=args.state_dir, files=tuple(args.file), kubeconfig=args.kubeconfig,
                   namespace=args.namespace, diagnose=not args.no_diagnose, timeout=args.timeout,
                   argv=("magw", *sys.argv[1:]) if sys.argv[1:2] == ["gather"] else ("magw", "gather"))  # fmt: skip
    try:
        manifest = gather(opts)
    except NoLab as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # KubeConfigError: a kubeconfig that cannot be used
        if type(exc).__name__ != "KubeConfigError":
            raise
        raise UsageError(f"--kubeconfig: {exc}") from None
    if args.list:
        sys.stdout.write("".join(line + "\n" for line in member_listing(manifest)))
    lines = summary_lines(manifest, output)
    print(lines[0])
    for line in lines[1:]:
        print(line, file=sys.stderr)
    return 0
