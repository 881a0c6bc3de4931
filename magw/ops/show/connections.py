"""``magw show connections``: one row per path a node uses, local node to peer gateway. Pure.

The rows of a node come from its route agent's status (``health.peers[]``: what its probes say now): state,
RTT (last, average, max, in seconds), ``since`` (when the state last changed) and the share of the node's flows
the path carries (``magw.ops.show.kernel``: the share of the nexthop group's buckets, read from the node's
kernel), and ``flows``: how many of the node's tracked connections toward remote clusters went over it (found
in the tracking of the node at its other end: ``magw.ops.show.flows``). A gateway whose route agent's status is
not at hand (Kubernetes without a lab) falls back to what its gateway daemon wrote in its ``Gateway`` object's
``status.connections``: state and RTT, no since, no share, no flows.
``from`` says which.

A gateway's paths go to the remote clusters' gateways over the cable (``vxlan`` or ``wireguard``); a worker's
paths go to its own cluster's gateways over ``vx-submariner`` (cable ``local``).

``via``: where the cable sends to, from the remote gateway's Endpoint in the node's cluster's snapshot: ``public
IP[:PORT]`` (a port when a load balancer gives the gateway one, docs/load-balancer.md) or ``private IP``;
``local IP`` for a path inside the cluster (the gateway's node IP on ``vx-submariner``); None when the snapshot
does not have the Endpoint. When the node's NAT discovery found the remote gateway at its private address (its
status's ``nat_discovery``), ``private IP (discovered)``: the cable goes there instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from magw.ops.show.inputs import Doc, Inputs
from magw.ops.show.kernel import path_share

LOCAL_CABLE = "local"
# the Gateway CRD's connection status -> the probes' state names
_CR_STATE = {"connected": "up", "connecting": "pending", "error": "down"}
RTT_KEYS = ("last", "average", "max")


def default_nodes(inputs: Inputs) -> list[str]:
    """Every gateway node, in cluster order; the nodes with a status file when no snapshot names any."""
    gateways = [n.name for _cid, n in inputs.gateway_nodes()]
    return gateways or sorted(inputs.statuses) or sorted(inputs.gateway_statuses)


def _cable(inputs: Inputs, cluster: str | None) -> str:
    snap = inputs.snapshots.get(cluster or "")
    return snap.config.cable.value if snap is not None else "vxlan"


def via(inputs: Inputs, cluster: str | None, remote: str, remote_cluster: str) -> str | None:
    """Where ``cluster``'s cable reaches gateway ``remote`` (see the module's docstring)."""
    snap = inputs.snapshots.get(cluster or "")
    if snap is None:
        return None
    e = next((e for e in snap.endpoints if e.hostname == remote and e.cluster == remote_cluster), None)
    if e is None:
        return None
    if remote_cluster == cluster:
        return f"local {e.private_ip}"
    if e.public_ip is None:
        return f"private {e.private_ip}"
    return f"public {e.public_ip}" + ("" if e.underlay_port is None else f":{e.underlay_port}")


def _discovered(status: Doc, remote: str) -> str | None:
    """``private IP (discovered)`` when the node's NAT discovery found ``remote`` on its private address."""
    found = ((status.get("nat_discovery") or {}).get("peers") or {}).get(remote)
    if isinstance(found, Mapping) and found.get("path") == "private":
        return f"private {found.get('private_ip')} (discovered)"
    return None


def _rtt(raw: Any) -> dict[str, float] | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return {k: float(raw[k]) for k in RTT_KEYS}
    except (KeyError, TypeError, ValueError):
        return None


def _probe_rows(inputs: Inputs, node: str, cluster: str | None, status: Doc) -> list[dict[str, Any]]:
    kernel = inputs.kernels.get(node)
    rows = []
    for peer in (status.get("health") or {}).get("peers") or ():
        remote_cluster = str(peer.get("cluster"))
        address = str(peer.get("address"))
        share = None if kernel is None else path_share(kernel.nexthops, kernel.buckets, address)
        flows = None if kernel is None or kernel.tracked is None else kernel.path_flows.get(address, 0)
        rows.append(
            {
                "node": node,
                "cluster": cluster,
                "remote": str(peer.get("hostname")),
                "remote_cluster": remote_cluster,
                "address": address,
                "cable": LOCAL_CABLE if remote_cluster == cluster else _cable(inputs, cluster),
                "via": _discovered(status, str(peer.get("hostname")))
                or via(inputs, cluster, str(peer.get("hostname")), remote_cluster),
                "state": str(peer.get("state", "unknown")),
                "rtt": _rtt(peer.get("rtt")),
                "since": peer.get("since"),
                "share": share,
                "flows": flows,
                "from": "probes",
            }
        )
    return rows


def duration_seconds(text: Any) -> float | None:
    """The Gateway CRD's RTT string ("1.234ms", also "us"/"µs"/"ns"/"s") in seconds; None when unreadable."""
    if not isinstance(text, str):
        return None
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * scale
            except ValueError:
                return None
    return None


def _cr_rows(inputs: Inputs, node: str, cluster: str | None, gw_status: Doc) -> list[dict[str, Any]]:
    rows = []
    for conn in gw_status.get("connections") or ():
        ep = conn.get("endpoint") or {}
        latency = conn.get("latencyRTT") or {}
        rtt = {"last": latency.get("last"), "average": latency.get("average"), "max": latency.get("max")}
        seconds = {k: duration_seconds(v) for k, v in rtt.items()}
        rows.append(
            {
                "node": node,
                "cluster": cluster,
                "remote": ep.get("hostname"),
                "remote_cluster": ep.get("cluster_id"),
                "address": ep.get("private_ip"),
                "cable": _cable(inputs, cluster),
                "via": via(inputs, cluster, str(ep.get("hostname")), str(ep.get("cluster_id"))),
                "state": _CR_STATE.get(str(conn.get("status")), str(conn.get("status"))),
                "rtt": None if any(v is None for v in seconds.values()) else seconds,
                "since": None,
                "share": None,
                "flows": None,
                "from": "gateway status",
            }
        )
    return rows


def connection_rows(inputs: Inputs, nodes: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``nodes`` (default ``default_nodes``), each node's sorted by remote cluster and gateway."""
    rows: list[dict[str, Any]] = []
    for node in nodes or default_nodes(inputs):
        cluster = inputs.cluster_of(node)
        status = inputs.statuses.get(node)
        if status is not None and (status.get("health") or {}).get("peers"):
            found = _probe_rows(inputs, node, cluster, status)
        elif node in inputs.gateway_statuses:
            found = _cr_rows(inputs, node, cluster, inputs.gateway_statuses[node])
        else:
            found = []
        rows += sorted(found, key=lambda r: (str(r["remote_cluster"]), str(r["remote"])))
    return rows


def last_failover(transitions: Iterable[Doc]) -> Doc | None:
    """The last change of a path's ``alive`` state to down in a status's ``health.transitions[]`` (None: none),
    with ``recovered_at``: when that peer was up again afterwards, if it was."""
    events = [t for t in transitions if t.get("what") == "alive"]
    downs = [i for i, t in enumerate(events) if t.get("new") == "down"]
    if not downs:
        return None
    last = events[downs[-1]]
    later = events[downs[-1] + 1 :]
    back = next((t for t in later if t.get("peer") == last.get("peer") and t.get("new") == "up"), None)
    return {**last, "recovered_at": None if back is None else back.get("at")}
