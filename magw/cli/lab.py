"""``magw lab up|down|status|exec|demo|fail|recover``: a whole clusterset in network namespaces (docs/lab.md)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable

from magw.cli import UsageError
from magw.lab import build, naming, state
from magw.lab.errors import LabError, LabInputError
from magw.lab.status import status_doc, status_text
from magw.lab.topology import Topology, default_topology, load_topology

EXIT_OK = 0
EXIT_FAILURE = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="lab_verb", metavar="VERB", required=True)

    up = verbs.add_parser("up", help="build a lab and start its daemons")
    _name(up)
    _topology(up)
    up.add_argument("--no-daemons", action="store_true", help="build the network, pods and services only")
    up.add_argument("--timeout", type=_seconds, default=60.0, help="seconds to wait for connectivity (default 60)")
    up.set_defaults(lab_run=_up)

    down = verbs.add_parser("down", help="remove every namespace, process and file of a lab")
    _name(down)
    down.set_defaults(lab_run=_down)

    status = verbs.add_parser("status", help="show a lab's nodes, pods, services and processes")
    _name(status)
    status.add_argument("--json", action="store_true", help="print the status document as JSON")
    status.set_defaults(lab_run=_status)

    ex = verbs.add_parser("exec", help="run a command inside a lab namespace (node, pod, wan or <cluster>-ul)")
    ex.add_argument("target", metavar="NODE", help="a node (east-gw1), a pod (east-w1-p1), 'wan' or '<cluster>-ul'")
    _name(ex)
    # REMAINDER keeps CMD's own options; "--name" may still come between NODE and "--" (see _split_exec).
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command and its arguments")
    ex.set_defaults(lab_run=_exec)

    demo = verbs.add_parser("demo", help="bring a lab up, show connectivity and gateway spread, tear it down")
    _name(demo)
    _topology(demo)
    demo.add_argument("--keep", action="store_true", help="leave the lab running afterwards")
    demo.add_argument("--flows", type=int, choices=range(1, 1025), default=64, metavar="N",
                      help="UDP flows for the spread measurement (1-1024, default 64)")  # fmt: skip
    demo.set_defaults(lab_run=_demo)

    fail = verbs.add_parser("fail", help="power loss of a node: its links down, its daemons SIGKILLed")
    fail.add_argument("node", metavar="NODE", help="a node of the lab (east-gw1)")
    _name(fail)
    fail.add_argument("--wan-only", action="store_true", help="only cut the gateway's WAN link; daemons keep running")
    fail.set_defaults(lab_run=_fail)

    recover = verbs.add_parser("recover", help="bring a failed node back: links up, daemons restarted")
    recover.add_argument("node", metavar="NODE", help="a node of the lab (east-gw1)")
    _name(recover)
    recover.set_defaults(lab_run=_recover)


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=naming.DEFAULT_LAB_NAME, help="the lab's name (default: magw)")


def _topology(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", metavar="FILE", help="topology YAML (default: two clusters, east and west)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 1 to 3600 seconds, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    action: Callable[[argparse.Namespace], int] = args.lab_run
    try:
        naming.check_lab_name(args.name)
        return action(args)
    except LabInputError as exc:
        raise UsageError(str(exc)) from None
    except LabError as exc:
        print(f"magw: error: lab {args.lab_verb}: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _out(line: str) -> None:
    print(line, flush=True)


def _load(args: argparse.Namespace) -> Topology:
    return load_topology(args.topology) if args.topology else default_topology()


def _up(args: argparse.Namespace) -> int:
    topo = _load(args)
    build.up(topo, name=args.name, daemons=not args.no_daemons, wait_timeout=args.timeout, progress=_out)
    _out(f"status: magw lab status --name {args.name}; remove: magw lab down --name {args.name}")
    return EXIT_OK


def _down(args: argparse.Namespace) -> int:
    report = build.down(args.name)
    if not report.namespaces and not report.processes and not report.state_removed:
        _out(f"lab {args.name}: nothing to remove")
    else:
        _out(f"lab {args.name}: removed {len(report.namespaces)} namespaces, {len(report.processes)} processes")
    return EXIT_OK


def _read(name: str) -> state.LabState:
    st = state.read(name)
    if st is None:
        labs = state.list_labs()
        known = f" (labs: {', '.join(labs)})" if labs else " (no labs)"
        raise LabError(f"no lab named {name!r}{known}")
    return st


def _status(args: argparse.Namespace) -> int:
    doc = status_doc(_read(args.name))
    _out(json.dumps(doc, indent=2, sort_keys=True) if args.json else status_text(doc))
    return EXIT_OK


def _split_exec(args: argparse.Namespace) -> tuple[str, list[str]]:
    """(lab name, command): options between NODE and "--" land in the remainder, so read them here."""
    rest = list(args.cmd)
    head, cmd = (rest[: rest.index("--")], rest[rest.index("--") + 1 :]) if "--" in rest else ([], rest)
    name = args.name
    if cmd and cmd[0].startswith("--name") and "--" not in rest:
        raise LabInputError("exec: CMD: put '--' before the command (usage: magw lab exec NODE [--name N] -- CMD)")
    while head:
        if head[0] == "--name" and len(head) >= 2:
            name, head = head[1], head[2:]
        elif head[0].startswith("--name="):
            name, head = head[0].split("=", 1)[1], head[1:]
        else:
            raise LabInputError(
                f"exec: {head[0]!r}: unexpected before '--' (usage: magw lab exec NODE [--name N] -- CMD)"
            )
    if not cmd:
        raise LabInputError("exec: CMD: missing (usage: magw lab exec NODE [--name N] -- CMD...)")
    return naming.check_lab_name(name), cmd


def _exec(args: argparse.Namespace) -> int:
    name, cmd = _split_exec(args)
    st = _read(name)
    ns = args.target if args.target in st.namespaces else f"{name}-{args.target}"
    if ns not in st.namespaces:
        raise LabInputError(f"exec: NODE: {args.target!r} is not a node, pod, 'wan' or '<cluster>-ul' of lab {name}")
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=False).returncode


def _fail(args: argparse.Namespace) -> int:
    from magw.lab.failure import fail

    done = fail(args.name, args.node, wan_only=args.wan_only)
    _out(f"{args.node}: {', '.join(done)}")
    return EXIT_OK


def _recover(args: argparse.Namespace) -> int:
    from magw.lab.failure import recover

    done = recover(args.name, args.node)
    _out(f"{args.node}: {', '.join(done) or 'nothing to do'}")
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from magw.lab.demo import run_demo

    return run_demo(_load(args), name=args.name, keep=args.keep, out=_out, flows=args.flows)
