"""``magw lab kubectl CLUSTER [--name N] -- ARGS``: the real kubectl against a kube lab's API server.

kubectl runs inside the namespace where that emulator listens on 127.0.0.1:6443 (``magw.lab.planes.kube_kubectl``);
CLUSTER is a cluster id of the lab or ``broker``. Its exit status is kubectl's.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable

from magw.lab.build import state
from magw.lab.errors import LabInputError
from magw.lab.planes.kube import api_servers
from magw.lab.planes.kube_kubectl import kubectl_command
from magw.lab.spec import naming

USAGE = "usage: magw lab kubectl CLUSTER [--name N] -- KUBECTL-ARGS"


def add_verb(verbs: argparse._SubParsersAction[argparse.ArgumentParser], name: Callable[..., None]) -> None:
    kc = verbs.add_parser(
        "kubectl", help="run the real kubectl against a kube lab's API server (a cluster's, or 'broker')"
    )
    kc.add_argument("target", metavar="CLUSTER", help="a cluster id of the lab (east) or 'broker'")
    name(kc)
    kc.add_argument("args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="kubectl's arguments")
    kc.set_defaults(lab_run=run)


def _split(args: argparse.Namespace) -> tuple[str, list[str]]:
    """(lab name, kubectl args): ``--name N`` may stand between CLUSTER and "--"."""
    rest = list(args.args)  # argparse drops the first "--" when nothing stands before it
    head, tail = (rest[: rest.index("--")], rest[rest.index("--") + 1 :]) if "--" in rest else ([], rest)
    lab = args.name
    while head:
        flag = head.pop(0)
        if flag == "--name" and head:
            lab = head.pop(0)
        elif flag.startswith("--name="):
            lab = flag.split("=", 1)[1]
        else:
            raise LabInputError(f"kubectl: unexpected {flag!r} before '--' ({USAGE})")
    if not tail:
        raise LabInputError(f"kubectl: no kubectl arguments after '--' ({USAGE})")
    return naming.check_lab_name(lab), tail


def run(args: argparse.Namespace) -> int:
    lab, kubectl_args = _split(args)
    try:
        st = state.require(lab, up=True)
    except state.UnknownLab as exc:
        raise LabInputError(str(exc)) from None
    servers = {api.name: (api.netns, api.socket) for api in api_servers(st)}
    return subprocess.run(kubectl_command(st, args.target, servers, kubectl_args), check=False).returncode
