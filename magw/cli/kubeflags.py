"""The flags ``magw verify`` and ``magw benchmark`` share for their Kubernetes mode (pods made through the API)."""

from __future__ import annotations

import argparse

from magw.cli.argtypes import float_in


def add_kube_pod_flags(parser: argparse.ArgumentParser, what: str) -> None:
    """``--kubeconfig`` (repeatable), ``--namespace``, ``--pod-namespace``, ``--image``, ``--pod-timeout``;
    ``what``: the pods' owner in the help ("the suite", "the benchmark")."""
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        action="append",
        help=f"Kubernetes mode: a cluster's kubeconfig (give two or more; {what}'s pods are made through the API)",
    )
    parser.add_argument(
        "--namespace",
        default="submariner-operator",
        help="--kubeconfig: magw's namespace, where the cluster's id is read (default %(default)s)",
    )
    parser.add_argument(
        "--pod-namespace",
        default="magw-verify",
        help=f"--kubeconfig: where {what}'s pods go, created if missing (default %(default)s)",
    )
    parser.add_argument(
        "--image", default="magw:0.1.0", help="--kubeconfig: the pods' image, magw's (default %(default)s)"
    )
    parser.add_argument(
        "--pod-timeout",
        metavar="S",
        type=float_in(5, 600),
        default=90.0,
        help="--kubeconfig: seconds for a pod to run and for a global IP to be given (default 90)",
    )
