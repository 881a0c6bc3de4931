"""The lab kubelet's loop: the Pods of one cluster's API server emulator, run as processes in lab namespaces.

Every ``POLL`` seconds it lists the cluster's Pods and:

- **starts** a pod that is new to it (no ``status.phase``, or ``Pending``): binds it to a node when it has no
  ``nodeName`` (``podspec.choose_node``), makes its sandbox (``sandbox.create``), starts each container's command
  in it (``podspec``: only what the magw image ships), output to ``<pod logs>/<ns>_<name>_<uid>/<container>.log``
  (which the emulator serves as the pod's log) and writes ``Running`` with ``podIP``, ``hostIP`` and the
  containers' states. A pod it refuses is ``Failed`` with the reason ``LabKubeletRefused``. The lab's static pods
  (created ``Running``) are not its own and are left alone;
- **watches** its containers: one that exits is restarted after a back-off when the pod's ``restartPolicy`` says
  so, else recorded ``terminated``; once none runs the pod is ``Succeeded`` (every exit 0) or ``Failed``;
- **proxies** the Services made through the API to their pods, in every node (``proxy``: table ``lab-kube-api``);
- **stops** a pod that was deleted (or replaced by a new one of the same name): SIGTERM to each container's
  session, SIGKILL after the pod's grace period (at most 5 s), then removes its sandbox and log.

On SIGTERM it stops every pod of its own the same way and marks it ``Failed`` ("the lab kubelet stopped"): a lab
kubelet's pods do not outlive it (``magw lab down`` also removes whatever is left in the lab's namespaces).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import structlog

from magw.lab.build import netns
from magw.lab.errors import LabError
from magw.lab.kubelet import podspec, proxy, sandbox
from magw.lab.planes.kube_http import KubeHttp, KubeHttpError
from magw.lab.spec.layout import NodeLayout

log = structlog.get_logger(__name__)

POLL = 0.2
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define
class Container:
    spec: podspec.ContainerRun
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    started: str = ""
    restarts: int = 0
    exit_code: int | None = None
    finished: str = ""
    restart_at: float | None = None  # monotonic time of the next start after an exit


@attrs.define
class Running:
    run: podspec.PodRun
    box: sandbox.Sandbox
    containers: list[Container]
    started: str
    phase: str = "Running"
    released: bool = False  # its sandbox removed (the pod finished or was stopped)


class Kubelet:
    """One cluster's kubelet. ``nodes()``: the cluster's nodes by name (read again when a pod names one it does
    not know: a gateway added to the lab)."""

    def __init__(
        self,
        http: KubeHttp,
        *,
        lab: str,
        marker: str,
        nodes: Callable[[], Mapping[str, NodeLayout]],
        logs: Path,
        mtu: int,
        python: str,
        static_services: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.http = http
        self.lab = lab
        self.marker = marker
        self._nodes_of = nodes
        self.nodes = dict(nodes())
        self.logs = logs
        self.mtu = mtu
        self.python = python
        self.pods: dict[tuple[str, str], Running] = {}
        self.refused: set[str] = set()  # uids refused once (their status says why)
        self.last_slot: dict[str, int] = {}  # per node: the slot given last (the next pod takes the one after)
        self.static_services = frozenset(static_services)  # (namespace, name): the topology's, in lab-kube already
        self.proxied: tuple[str, tuple[str, ...]] = ("", ())  # the lab-kube-api script, and the nodes holding it

    # --- one pass ------------------------------------------------------------------------------------------

    def step(self) -> None:
        listed = self.http.list("Pod")
        present = {}
        for pod in listed:
            meta = pod.get("metadata") or {}
            present[(meta.get("namespace", ""), meta.get("name", ""))] = str(meta.get("uid", ""))
        for key, running in list(self.pods.items()):
            if present.get(key) != running.run.uid:
                self._stop(running, reason="deleted")
                del self.pods[key]
        labels = None
        for pod in listed:
            meta = pod.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            uid = str(meta.get("uid", ""))
            if key in self.pods or uid in self.refused or meta.get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
                continue  # the lab's static pods, and pods another kubelet ran
            if labels is None:
                labels = self._node_labels()
            self._start(pod, labels)
        for running in self.pods.values():
            self._watch(running)
        self._proxy(listed)

    def _proxy(self, pods: list[dict[str, Any]]) -> None:
        """The Services made through the API, DNATed to their pods in every node (``proxy``), when that changed."""
        text = proxy.script(self.http.list("Service"), pods, self.static_services)
        wanted = (text, tuple(sorted(self.nodes)))  # a node added to the lab gets the table too
        if wanted == self.proxied or (not self.proxied[0] and " dport " not in text):
            return  # unchanged, or no Service yet and no table: a lab nobody made Services in keeps its tables
        for node in self.nodes.values():
            netns.nft_load(node.namespace, text)
        self.proxied = wanted
        log.info("kubelet.services_loaded", nodes=len(self.nodes), rules=text.count(" dport "))

    def _node_labels(self) -> dict[str, dict[str, str]]:
        out = {}
        for node in self.http.list("Node"):
            name = node["metadata"]["name"]
            if name in self.nodes:
                out[name] = {**(node["metadata"].get("labels") or {}), podspec.HOSTNAME_LABEL: name}
        return out

    # --- start -----------------------------------------------------------------------------------------------

    def _start(self, pod: dict[str, Any], labels: Mapping[str, Mapping[str, str]]) -> None:
        meta = pod["metadata"]
        try:
            run = podspec.parse(pod, self.python)
            node = self._node(run, labels)
            if run.node is None:
                self._bind(run, node.name)
            if run.host_network:
                box = sandbox.host_network(node)
            else:
                slot = sandbox.free_slot(self._slots(node.name), self.last_slot.get(node.name, -1))
                box = sandbox.create(self.lab, self.marker, node, slot, self.mtu)
                self.last_slot[node.name] = slot
        except KubeHttpError:
            raise  # the API server, not the pod: the pass fails and the next one tries again
        except (podspec.Refused, LabError) as exc:
            self._refuse(meta, str(exc))
            return
        except Exception as exc:  # a pod this code did not foresee: refused (once), the loop goes on
            log.exception("kubelet.start_failed", pod=f"{meta.get('namespace')}/{meta.get('name')}")
            self._refuse(meta, f"the lab kubelet failed on this pod: {type(exc).__name__}: {exc}")
            return
        pod_dir = self.logs / f"{run.namespace}_{run.name}_{run.uid}"
        pod_dir.mkdir(parents=True, exist_ok=True)
        containers = [Container(spec=c, log_path=pod_dir / f"{c.name}.log") for c in run.containers]
        running = Running(run=run, box=box, containers=containers, started=_now())
        self.pods[(run.namespace, run.name)] = running
        for c in containers:
            self._launch(running, c)
        log.info("kubelet.started", pod=f"{run.namespace}/{run.name}", node=node.name, ip=str(box.ip),
                 namespace=box.namespace)  # fmt: skip
        self._report(running)

    def _refuse(self, meta: Mapping[str, Any], why: str) -> None:
        self.refused.add(str(meta.get("uid", "")))
        log.warning("kubelet.refused", pod=f"{meta.get('namespace')}/{meta.get('name')}", why=why)
        self._write_status(meta, {"phase": "Failed", "reason": podspec.REFUSED, "message": why})

    def _node(self, run: podspec.PodRun, labels: Mapping[str, Mapping[str, str]]) -> NodeLayout:
        if run.node is None:
            load: dict[str, int] = {}
            for r in self.pods.values():
                if r.released:
                    continue
                load[r.box.node.name] = load.get(r.box.node.name, 0) + 1
            return self.nodes[podspec.choose_node(run, labels, load)]
        if run.node not in self.nodes:
            self.nodes = dict(self._nodes_of())
        if run.node not in self.nodes:
            raise podspec.Refused(f"node {run.node} is not a node of this lab cluster")
        return self.nodes[run.node]

    def _slots(self, node: str) -> list[int]:
        return [r.box.slot for r in self.pods.values()
                if r.box.node.name == node and r.box.slot is not None and not r.released]  # fmt: skip

    def _launch(self, running: Running, c: Container) -> None:
        env = {"PATH": PATH, "HOSTNAME": running.run.name, "PYTHONUNBUFFERED": "1", **dict(c.spec.env)}
        with open(c.log_path, "ab") as out:
            try:
                c.proc = subprocess.Popen(
                    ["ip", "netns", "exec", running.box.namespace, *c.spec.argv],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                )  # fmt: skip
            except OSError as exc:
                out.write(f"lab kubelet: cannot start {c.spec.argv[0]}: {exc.strerror}\n".encode())
                c.proc, c.exit_code, c.finished = None, 128, _now()
                return
        c.started, c.exit_code, c.finished, c.restart_at = _now(), None, "", None

    # --- watch -----------------------------------------------------------------------------------------------

    def _watch(self, running: Running) -> None:
        changed = False
        now = time.monotonic()
        for c in running.containers:
            if c.proc is not None and (code := c.proc.poll()) is not None:
                c.proc, c.exit_code, c.finished = None, code, _now()
                log.info("kubelet.exited", pod=f"{running.run.namespace}/{running.run.name}", container=c.spec.name,
                         code=code)  # fmt: skip
                if podspec.restarts_after(running.run.restart_policy, code):
                    c.restart_at = now + podspec.restart_delay(c.restarts)
                changed = True
            elif c.proc is None and c.restart_at is not None and now >= c.restart_at:
                c.restarts += 1
                self._launch(running, c)
                changed = True
        if all(c.proc is None and c.restart_at is None for c in running.containers) and running.phase == "Running":
            running.phase = "Succeeded" if all(c.exit_code == 0 for c in running.containers) else "Failed"
            self._release(running)  # as a kubelet tears a finished pod's sandbox down; its status keeps the IP
            changed = True
        if changed:
            self._report(running)

    # --- stop ------------------------------------------------------------------------------------------------

    def _stop(self, running: Running, *, reason: str) -> None:
        procs = [c.proc for c in running.containers if c.proc is not None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + running.run.grace
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        for c in running.containers:
            c.proc, c.restart_at = None, None
        self._release(running)
        if reason == "deleted":
            shutil.rmtree(self.logs / f"{running.run.namespace}_{running.run.name}_{running.run.uid}",
                          ignore_errors=True)  # fmt: skip
        log.info("kubelet.stopped", pod=f"{running.run.namespace}/{running.run.name}", reason=reason)

    def _release(self, running: Running) -> None:
        """Remove the pod's sandbox (once) and free its slot."""
        if running.released:
            return
        running.released = True
        try:
            sandbox.remove(running.box)
        except LabError as exc:
            log.warning("kubelet.sandbox_left", namespace=running.box.namespace, error=str(exc))

    def shutdown(self) -> None:
        """Stop every pod of this kubelet and mark it Failed (the emulator may be gone already: then only stop)."""
        for running in self.pods.values():
            self._stop(running, reason="kubelet stopped")
            if running.phase == "Running":
                running.phase = "Failed"
                with contextlib.suppress(LabError):
                    self._report(running, message="the lab kubelet stopped")
        self.pods.clear()

    # --- status ----------------------------------------------------------------------------------------------

    def _report(self, running: Running, message: str | None = None) -> None:
        ip = str(running.box.ip)
        status: dict[str, Any] = {
            "phase": running.phase,
            "hostIP": str(running.box.node.node_ip),
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": running.started,
            "conditions": [{"type": "Ready", "status": "True" if running.phase == "Running" else "False"}],
            "containerStatuses": [_container_status(c) for c in running.containers],
        }
        if message:
            status["message"] = message
        meta = {"namespace": running.run.namespace, "name": running.run.name, "uid": running.run.uid}
        try:
            self._write_status(meta, status)
        except KubeHttpError as exc:
            if " 404 " not in str(exc):
                raise
            # deleted meanwhile: the next pass stops it

    def _write_status(self, meta: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        body = {"metadata": {"uid": meta.get("uid")}, "status": status}
        self.http.request("PATCH", path, body, content_type="application/merge-patch+json")

    def _bind(self, run: podspec.PodRun, node: str) -> None:
        """Set the pod's ``nodeName`` (what the scheduler's binding does on a cluster)."""
        path = f"/api/v1/namespaces/{run.namespace}/pods/{run.name}"
        self.http.request("PATCH", path, {"spec": {"nodeName": node}}, content_type="application/merge-patch+json")


def _container_status(c: Container) -> dict[str, Any]:
    if c.proc is not None:
        state: dict[str, Any] = {"running": {"startedAt": c.started}}
    elif c.exit_code is not None and c.restart_at is None:
        reason = "Completed" if c.exit_code == 0 else "Error"
        state = {"terminated": {"exitCode": c.exit_code, "reason": reason, "startedAt": c.started,
                                "finishedAt": c.finished}}  # fmt: skip
    else:
        state = {"waiting": {"reason": "CrashLoopBackOff" if c.restarts or c.exit_code is not None else
                             "ContainerCreating"}}  # fmt: skip
    return {"name": c.spec.name, "ready": c.proc is not None, "started": c.proc is not None,
            "restartCount": c.restarts, "image": "", "imageID": "", "state": state}  # fmt: skip
