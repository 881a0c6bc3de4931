"""The soak's faults on a kube lab's control plane (``benchmarks/soak.py --control-plane kube``).

Each returns ``(inject, heal)`` actions, as ``benchmarks/soak_faults.py``'s do:

- ``kill_apiserver``: an API server emulator (a cluster's, or the broker's) SIGKILLed; heal: started again with its
  command line, which carries ``--persist`` (``magw.lab.planes.kube``), so it comes back with every object and a
  compacted history, and waits (bounded) until it answers. Its clients' requests fail meanwhile; their watches
  from versions before the restart get 410 and they list again;
- ``signal_apiserver``: SIGUSR1 (history compacted and every watch dropped: a 410 storm) or SIGUSR2 (every watch
  dropped) to an emulator (``magw.kubeemu``, docs/kubeemu.md);
- ``globalnet_blip``: a GlobalEgressIP created and deleted 5 ms later through the cluster's API, as the file
  soak's ``globalnet-blip`` does with a broker document;
- ``unlabel_and_withdraw`` / ``relabel``: the Kubernetes half of ``gateway-remove`` (the operator takes the Node's
  gateway label away, the gateway's Endpoint is withdrawn; then the label comes back), around the gateway
  daemon's kill and restart (``benchmarks/soak_faults.py``).

None of the API servers' faults may cost a datagram: the data plane never waits for the control plane
(docs/kubernetes.md).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable

from magw.lab.build import procs, state
from magw.lab.planes.kube import ApiServer, api_servers
from magw.lab.planes.kube_http import KubeHttpError, object_path
from magw.sources.kube import mapping

Action = Callable[[], str]
SERVE_TIMEOUT = 60.0  # s for a restarted emulator to answer (Python and aiohttp start slowly on a loaded machine)


def _api(name: str, owner: str) -> tuple[ApiServer, procs.ProcRecord]:
    st = state.read(name)
    assert st is not None
    api = next((a for a in api_servers(st) if a.name == owner), None)
    rec = next((r for r in st.processes if api is not None and r.kind == api.kind and r.owner == owner), None)
    if api is None or rec is None:
        raise RuntimeError(f"no API server emulator {owner} in lab {name}")
    return api, rec


def _serving(api: ApiServer, deadline: float) -> int:
    """The number of Nodes (a cluster's) or Endpoints (the broker's) it lists once it answers."""
    kind, ns = ("Node", None) if api.role == "cluster" else ("Endpoint", api.namespace)
    while True:
        try:
            return len(api.http(timeout=2.0).list(kind, ns))
        except KubeHttpError:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"API server emulator {api.name} not answering {SERVE_TIMEOUT:g} s after its "
                                   "restart") from None  # fmt: skip
            time.sleep(0.1)


def kill_apiserver(name: str, owner: str, kill: tuple[Action, Action]) -> tuple[Action, Action]:
    """``kill``: the SIGKILL and restart of the emulator's process (``soak_faults.kill_daemon``); the heal then
    waits until the restarted emulator answers."""
    sigkill, restart = kill

    def heal() -> str:
        started = time.monotonic()
        restarted = restart()
        api = _api(name, owner)[0]
        count = _serving(api, started + SERVE_TIMEOUT)
        what = "Nodes" if api.role == "cluster" else "Endpoints"
        return f"{restarted}, answering after {time.monotonic() - started:.1f} s with {count} {what}"

    return sigkill, heal


def signal_apiserver(name: str, owner: str, sig: signal.Signals) -> tuple[Action, Action]:
    what = {signal.SIGUSR1: "history compacted, every watch dropped (410 storm)",
            signal.SIGUSR2: "every watch dropped"}[sig]  # fmt: skip

    def inject() -> str:
        rec = _api(name, owner)[1]
        if not procs.alive(rec):
            raise RuntimeError(f"API server emulator {owner} is not running")
        os.kill(rec.pid, sig)
        return f"{sig.name} to pid {rec.pid}: {what}"

    return inject, (lambda: "nothing to heal")


def globalnet_blip(name: str, cluster: str, rng: random.Random) -> tuple[Action, Action]:
    """A GlobalEgressIP created and deleted within milliseconds (a namespace-wide one in ``default``)."""
    obj_name = f"soak-{rng.randrange(10**6)}"
    obj = {"apiVersion": "submariner.io/v1", "kind": "GlobalEgressIP",
           "metadata": {"name": obj_name, "namespace": "default"}, "spec": {"numberOfIPs": 1}}  # fmt: skip

    def inject() -> str:
        api, _rec = _api(name, cluster)
        http = api.http()
        created = http.create(obj)
        time.sleep(0.005)
        http.request("DELETE", object_path(obj))
        rv = (created.get("metadata") or {}).get("resourceVersion")
        return f"GlobalEgressIP default/{obj_name} created (version {rv}) and deleted 5 ms later"

    return inject, (lambda: "nothing to heal")


def _label(name: str, cluster: str, node: str, value: str | None) -> None:
    api = _api(name, cluster)[0]
    body = {"metadata": {"labels": {mapping.GATEWAY_LABEL: value}}}  # merge patch: None removes the label
    node_obj = {"kind": "Node", "metadata": {"name": node}}
    api.http().request("PATCH", object_path(node_obj), body, content_type="application/merge-patch+json")


def unlabel_and_withdraw(name: str, cluster: str, node: str) -> str:
    """The Node's gateway label removed (as an operator does: the gateway DaemonSet then leaves the node), and the
    node's Endpoint deleted from its cluster's API server, what ``magw-gateway --withdraw-on-exit`` does on the
    SIGTERM of its pod (the other gateways' broker sync then deletes the broker's copy and every cluster's)."""
    _label(name, cluster, node, None)
    api = _api(name, cluster)[0]
    endpoint = {"kind": "Endpoint", "metadata": {"namespace": api.namespace,
                                                  "name": mapping.endpoint_object_name(cluster, node)}}  # fmt: skip
    try:
        api.http().request("DELETE", object_path(endpoint))
        gone = "Endpoint withdrawn"
    except KubeHttpError as exc:
        if " 404 " not in str(exc):
            raise
        gone = "Endpoint was already gone"
    return f"label {mapping.GATEWAY_LABEL} removed; {gone}"


def relabel(name: str, cluster: str, node: str) -> str:
    _label(name, cluster, node, "true")
    return f"label {mapping.GATEWAY_LABEL}=true back"
