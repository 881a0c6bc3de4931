"""What a real cluster's node has in its firewall besides us: kube-proxy's ClusterIP DNAT and a CNI masquerade.

Both are plain nft scripts, loaded once per node when the lab comes up:

- ``table ip lab-kube``: like kube-proxy in nftables mode, every node DNATs a
  ClusterIP (TCP and UDP) to one of the service's backend pods chosen by
  ``numgen random`` (a chain per service, a chain per endpoint); hooked at
  prerouting (traffic from pods and from other nodes) and output (traffic from
  the node itself). Hairpin traffic (a pod that picked itself) is marked and
  masqueraded, and cni0's ports are in hairpin mode, as kubelet sets them.
  A headless service has no ClusterIP, so no rule (clients use its pods' IPs).
- ``table ip lab-cni``: like flannel's ip-masq or Calico's natOutgoing, pod
  traffic to anything outside the cluster's own CIDRs is masqueraded when it
  leaves the node (any interface but ``cni0``), at postrouting priority srcnat.
  It also catches inter-cluster traffic: that is deliberate, it is what magw
  has to keep pod source IPs against (DESIGN "Source IPs survive the CNI").
"""

from __future__ import annotations

from magw.lab.spec.cluster import DEFAULT_NAMESPACE
from magw.lab.spec.layout import ClusterLayout, ServiceLayout
from magw.lab.spec.naming import CNI_BRIDGE

KUBE_TABLE = "lab-kube"
CNI_TABLE = "lab-cni"

# kube-proxy's "masquerade this" mark: set on hairpin traffic (a pod reaching a service that picked the pod
# itself), whose reply would otherwise stay inside the pod and never be un-DNATed.
MASQ_MARK = 0x4000

# nft 1.0.6: `priority dstnat` is refused on the output hook ("invalid priority
# expression value in this context"); -100 is the same number.
_DSTNAT = -100


def _chain(name: str, rules: list[str], base: str | None = None) -> str:
    head = f"\t\t{base}\n" if base else ""
    body = "".join(f"\t\t{r}\n" for r in rules)
    return f"\tchain {name} {{\n{head}{body}\t}}\n"


def _chain_id(svc: ServiceLayout) -> str:
    """The service's part of its chain names: ``echo``, or ``shop.web`` outside namespace ``default`` ('.' is
    in no service or namespace name, so two services never share chains)."""
    return svc.name if svc.namespace == DEFAULT_NAMESPACE else f"{svc.namespace}.{svc.name}"


def _service_chains(svc: ServiceLayout) -> tuple[str, str]:
    """(the dispatch rule in ``services``, the service's own chains): one chain per endpoint, like kube-proxy."""
    match = f"ip daddr {svc.ip} meta l4proto {{ tcp, udp }} th dport {svc.port}"
    comment = f'comment "service {_chain_id(svc).replace(".", "/")}"'
    if not svc.backends:
        return f"{match} reject {comment}", ""
    svc_chain = f"svc-{_chain_id(svc)}"
    eps = [f"ep-{_chain_id(svc)}-{i}" for i in range(len(svc.backends))]
    vmap = ", ".join(f"{i} : goto {ep}" for i, ep in enumerate(eps))
    chains = _chain(svc_chain, [f"numgen random mod {len(eps)} vmap {{ {vmap} }}"])
    for ep, ip in zip(eps, svc.backends, strict=True):
        mark = f"ip saddr {ip} meta mark set meta mark | {MASQ_MARK:#x}"
        chains += _chain(ep, [mark, f"meta l4proto {{ tcp, udp }} dnat to {ip}:{svc.target_port}"])
    return f"{match} goto {svc_chain} {comment}", chains


def proxy_table(name: str, dispatch: list[str], chains: str) -> str:
    """A kube-proxy-like nat table: chain ``services`` with the ``dispatch`` rules, the services' ``chains``, and
    the hooks (prerouting and output jump to ``services``; hairpin traffic masqueraded at postrouting)."""
    return (
        f"table ip {name} {{\n"
        + _chain("services", dispatch)
        + chains
        + _chain("prerouting", ["jump services"], "type nat hook prerouting priority dstnat; policy accept;")
        + _chain("output", ["jump services"], f"type nat hook output priority {_DSTNAT}; policy accept;")
        + _chain(
            "postrouting",
            [f"meta mark & {MASQ_MARK:#x} == {MASQ_MARK:#x} masquerade"],
            "type nat hook postrouting priority srcnat; policy accept;",
        )
        + "}\n"
    )


def kube_proxy_script(cluster: ClusterLayout) -> str:
    """The ``lab-kube`` table of every node of ``cluster``."""
    pairs = [_service_chains(s) for s in cluster.services if s.cluster_ip is not None]
    return proxy_table(KUBE_TABLE, [dispatch for dispatch, _ in pairs], "".join(chains for _, chains in pairs))


def cni_masquerade_script(cluster: ClusterLayout) -> str:
    """The ``lab-cni`` table of every node of ``cluster``."""
    own = f"{{ {cluster.pod_cidr}, {cluster.service_cidr} }}"
    return (
        f"table ip {CNI_TABLE} {{\n"
        "\tchain postrouting {\n"
        "\t\ttype nat hook postrouting priority srcnat; policy accept;\n"
        f'\t\tip saddr {cluster.pod_cidr} ip daddr != {own} oifname != "{CNI_BRIDGE}" masquerade '
        'comment "cni: masquerade pod traffic leaving the cluster"\n'
        "\t}\n"
        "}\n"
    )


def node_script(cluster: ClusterLayout) -> str:
    """Both tables, for one ``nft -f`` transaction."""
    return kube_proxy_script(cluster) + cni_masquerade_script(cluster)
