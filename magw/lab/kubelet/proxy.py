"""The lab kubelet's kube-proxy: Services made through the API reach their pods (pure: objects in, nft script out).

The lab's own Services (the topology's) are DNATed by the ``lab-kube`` table every node gets at ``up``
(``magw.lab.build.services``). A Service created through the API later (``magw verify --kubeconfig``, kubectl) is in
table ``ip lab-kube-api``, rendered here from the cluster's Services and Pods as kube-proxy's nftables mode does:
per Service port a dispatch rule on its ClusterIP, a chain picking an endpoint by ``numgen random``, a chain per
endpoint that DNATs to the pod's IP and target port (hairpin traffic marked for masquerading). A port whose Service
has no ready endpoint is rejected. Endpoints: the Running pods with an IP in the Service's namespace whose labels
hold its selector, Ready and not being deleted. Not here: Services without a selector, headless ones, named target
ports, NodePorts. The kubelet loads the script into every node of its cluster when it changes (one ``nft -f``: the
table is replaced whole, atomically)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from ipaddress import ip_address
from typing import Any

from magw.lab.build.services import MASQ_MARK, _chain, proxy_table

TABLE = "lab-kube-api"
PROTOS = ("TCP", "UDP", "SCTP")


def _ipv4(value: object) -> bool:
    """The table is ``ip``: an address of another family (or none) would fail the whole load."""
    try:
        return ip_address(str(value)).version == 4
    except ValueError:
        return False


def _ready(pod: Mapping[str, Any]) -> bool:
    """Running, Ready, not being deleted, with an IPv4 address: what kube-proxy takes as an endpoint."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
                if isinstance(c, dict))  # fmt: skip
    return status.get("phase") == "Running" and ready and not meta.get("deletionTimestamp") and \
        _ipv4(status.get("podIP"))  # fmt: skip


def _endpoints(svc: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[str]:
    selector = (svc.get("spec") or {}).get("selector") or {}
    namespace = svc["metadata"].get("namespace", "")
    out = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("namespace", "") != namespace or not _ready(pod):
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            out.add(str(pod["status"]["podIP"]))
    return sorted(out, key=lambda ip: ip_address(ip))


def _rules(svc: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> tuple[list[str], str]:
    """(the dispatch rules, the Service's chains)."""
    spec, meta = svc.get("spec") or {}, svc["metadata"]
    ip = spec.get("clusterIP")
    if not spec.get("selector") or not _ipv4(ip) or spec.get("type") == "ExternalName":
        return [], ""
    eps = _endpoints(svc, pods)
    dispatch, chains = [], ""
    sid = f"{meta.get('namespace', '')}.{meta['name']}"
    seen = set()
    for port in spec.get("ports") or ():
        proto = str(port.get("protocol") or "TCP").upper()
        target = port.get("targetPort", port.get("port"))
        if proto not in PROTOS or not isinstance(port.get("port"), int) or not isinstance(target, int):
            continue
        if (proto, port["port"]) in seen:  # a real server refuses such a Service; one rule, not two chains
            continue
        seen.add((proto, port["port"]))
        l4 = proto.lower()
        match = f"ip daddr {ip} {l4} dport {port['port']}"
        comment = f'comment "service {meta.get("namespace")}/{meta["name"]}:{port["port"]}/{l4}"'
        if not eps:
            dispatch.append(f"{match} reject {comment}")
            continue
        chain = f"api-svc-{sid}-{l4}{port['port']}"
        names = [f"{chain}-{i}" for i in range(len(eps))]
        vmap = ", ".join(f"{i} : goto {n}" for i, n in enumerate(names))
        chains += _chain(chain, [f"numgen random mod {len(names)} vmap {{ {vmap} }}"])
        for name, ep in zip(names, eps, strict=True):
            mark = f"ip saddr {ep} meta mark set meta mark | {MASQ_MARK:#x}"
            chains += _chain(name, [mark, f"meta l4proto {l4} dnat to {ep}:{target}"])
        dispatch.append(f"{match} goto {chain} {comment}")
    return dispatch, chains


def script(services: Iterable[Mapping[str, Any]], pods: Collection[Mapping[str, Any]],
           skip: Collection[tuple[str, str]] = ()) -> str:  # fmt: skip
    """The ``lab-kube-api`` table for ``services`` (but those in ``skip``, (namespace, name): the topology's, in
    ``lab-kube`` already), preceded by what replaces the old one in the same transaction."""
    dispatch: list[str] = []
    chains = ""
    for svc in sorted(services, key=lambda s: (s["metadata"].get("namespace", ""), s["metadata"]["name"])):
        if (svc["metadata"].get("namespace", ""), svc["metadata"]["name"]) in skip:
            continue
        rules, more = _rules(svc, pods)
        dispatch += rules
        chains += more
    return f"table ip {TABLE} {{}}\ndelete table ip {TABLE}\n" + proxy_table(TABLE, dispatch, chains)
