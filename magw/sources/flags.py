"""The flags that choose a daemon's state source (``--source file|kube``) and say where it is.

Shared by the route agent, the gateway and the Globalnet controller. ``check_source`` refuses, in one line
(argparse's ``error``: exit 2), the flags that do not fit the chosen source.
"""

from __future__ import annotations

import argparse
import os

SOURCES = ("file", "kube")


def add_source_arguments(p: argparse.ArgumentParser, *, broker: bool = False) -> None:
    """``--source`` and where each source is: the file broker's directory, or the Kubernetes API servers."""
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="file",
        help="where state comes from: the file broker directory (default) or the Kubernetes API",
    )
    p.add_argument("--broker-dir", help="--source file: directory of the file broker's YAML documents (must exist)")
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="--source kube: kubeconfig of the local cluster (default: the in-cluster service account)",
    )
    p.add_argument(
        "--namespace",
        default="submariner-operator",
        help="--source kube: the namespace of magw's objects (default submariner-operator)",
    )
    if broker:
        p.add_argument(
            "--broker-kubeconfig",
            metavar="PATH",
            help="--source kube: kubeconfig of the broker's API server; Endpoints and Clusters are synced with it "
            "(default: no broker sync)",
        )
        p.add_argument(
            "--broker-namespace",
            default="submariner-k8s-broker",
            help="--source kube: the broker's namespace (default submariner-k8s-broker)",
        )


def check_source(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One line and exit 2 for a source flag that does not fit the chosen source."""
    if args.source == "file":
        if not args.broker_dir:
            parser.error("--broker-dir: required with --source file")
        if not os.path.isdir(args.broker_dir):
            parser.error(f"--broker-dir: no such directory: {args.broker_dir}")
        for flag in ("kubeconfig", "broker_kubeconfig", "public_service"):
            if getattr(args, flag, None):
                parser.error(f"--{flag.replace('_', '-')}: only with --source kube")
        return
    if args.broker_dir:
        parser.error("--broker-dir: only with --source file")
    for flag in ("kubeconfig", "broker_kubeconfig"):
        path = getattr(args, flag, None)
        if path and not os.path.isfile(path):
            parser.error(f"--{flag.replace('_', '-')}: no such file: {path}")
    if not args.kubeconfig and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        parser.error("--kubeconfig: required outside a pod (no in-cluster service account: KUBERNETES_SERVICE_HOST)")
