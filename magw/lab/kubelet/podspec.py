"""What the lab kubelet makes of a Pod object: the commands it runs, where, and what it refuses (pure).

The lab kubelet has no container runtime and no images: it runs a container's command with the lab's own Python
and tools, in a network namespace of its own (or the node's, ``hostNetwork``). So it runs only what the magw
image (``Dockerfile``) ships and a pod is meant to run there; anything else is refused, the pod ``Failed`` with
the reason ``LabKubeletRefused`` and one line of why (fail closed: the lab kubelet runs as root):

- ``python`` / ``python3`` ``-m magw.<module> ...``: our own tools (``magw.lab.payload.traffic``: the verify
  suite's echo server and probes), with the lab's interpreter;
- ``iperf3 ...`` (``magw benchmark``'s server and client), the host's.

The image is not looked at (the lab's files stand in for every image). A container with no ``command`` is
refused: its image's entrypoint is not known here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

PYTHONS = ("python", "python3")
MODULE_RE = re.compile(r"^magw(\.[A-Za-z_][A-Za-z0-9_]*)+$")
PROGRAMS = ("iperf3",)
RESTART_POLICIES = ("Always", "OnFailure", "Never")
REFUSED = "LabKubeletRefused"
HOSTNAME_LABEL = "kubernetes.io/hostname"


class Refused(ValueError):
    """A pod the lab kubelet will not run; ``str()`` is the one line put in its status."""


@attrs.frozen(kw_only=True)
class ContainerRun:
    name: str
    argv: tuple[str, ...]  # resolved: the lab's interpreter or the host's program first
    env: tuple[tuple[str, str], ...]


@attrs.frozen(kw_only=True)
class PodRun:
    namespace: str
    name: str
    uid: str
    node: str | None  # spec.nodeName; None: to be scheduled
    node_selector: tuple[tuple[str, str], ...]
    host_network: bool
    restart_policy: str
    grace: float  # seconds between SIGTERM and SIGKILL (terminationGracePeriodSeconds, at most MAX_GRACE)
    containers: tuple[ContainerRun, ...]


MAX_GRACE = 5.0


def resolve_argv(command: Sequence[str], args: Sequence[str], python: str) -> tuple[str, ...]:
    """``command + args`` with its program resolved, or ``Refused``."""
    argv = [*command, *args]
    allowed = ", ".join(("python -m magw.<module>", *PROGRAMS))
    if not command:
        raise Refused(f"a container without a command: the lab kubelet does not know an image's entrypoint "
                      f"(it runs {allowed})")  # fmt: skip
    prog = argv[0].rsplit("/", 1)[-1]
    if prog in PYTHONS:
        if len(argv) < 3 or argv[1] != "-m" or not MODULE_RE.fullmatch(argv[2]):
            raise Refused(f"{' '.join(argv[:3])}: the lab kubelet runs python only as 'python -m magw.<module>'")
        return (python, *argv[1:])
    if prog in PROGRAMS:
        return (prog, *argv[1:])
    raise Refused(f"{argv[0]}: the lab kubelet runs only what the magw image ships ({allowed})")


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Refused(f"{what}: not a list of strings")
    return list(value)


def _env(value: Any, container: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in value or ():
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise Refused(f"container {container}: an env entry without a name")
        if "valueFrom" in item:
            raise Refused(f"container {container}: env {item['name']}: valueFrom is not supported by the lab kubelet")
        value = item.get("value")
        out.append((item["name"], "" if value is None else str(value)))
    return tuple(out)


def parse(pod: Mapping[str, Any], python: str) -> PodRun:
    """The run of ``pod``, or ``Refused``."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        raise Refused("metadata and spec must be objects")
    containers = []
    for c in spec.get("containers") or ():
        if not isinstance(c, dict):
            raise Refused("a container that is not an object")
        name = str(c.get("name", ""))
        argv = resolve_argv(_strings(c.get("command"), f"{name}.command"), _strings(c.get("args"), f"{name}.args"),
                            python)  # fmt: skip
        containers.append(ContainerRun(name=name, argv=argv, env=_env(c.get("env"), name)))
    if not containers:
        raise Refused("a pod without containers")
    if spec.get("initContainers"):
        raise Refused("init containers are not supported by the lab kubelet")
    policy = str(spec.get("restartPolicy") or "Always")
    if policy not in RESTART_POLICIES:
        raise Refused(f"restartPolicy {policy!r}: one of {', '.join(RESTART_POLICIES)}")
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, dict):
        raise Refused("nodeSelector must be an object")
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, bool) or not isinstance(grace, (int, float)):
        grace = MAX_GRACE
    return PodRun(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        node=spec.get("nodeName") or None,
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        host_network=bool(spec.get("hostNetwork")),
        restart_policy=policy,
        grace=max(0.0, min(float(grace), MAX_GRACE)),
        containers=tuple(containers),
    )


def choose_node(run: PodRun, nodes: Mapping[str, Mapping[str, str]], load: Mapping[str, int]) -> str:
    """The node for an unscheduled pod: of ``nodes`` (name -> labels) whose labels hold the pod's nodeSelector,
    the one running the fewest of the kubelet's pods (then by name); ``Refused`` when none fits."""
    fits = [n for n, labels in nodes.items() if all(labels.get(k) == v for k, v in run.node_selector)]
    if not fits:
        wanted = ",".join(f"{k}={v}" for k, v in run.node_selector)
        raise Refused(f"no node of the cluster matches nodeSelector {wanted}")
    return min(fits, key=lambda n: (load.get(n, 0), n))


def restart_delay(restarts: int) -> float:
    """Seconds before restarting a container that exited for the ``restarts``-th time: 1, 2, 4, ... 30, as a
    kubelet's back-off (10 s to 5 min there; shorter here, where a lab lives minutes)."""
    return float(min(30, 2 ** min(restarts, 5)))


def restarts_after(policy: str, exit_code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)
