"""Which hops a traced flow reached, and the hop where it died.

A traced flow is a paced UDP stream from a known client port (``magw.lab.payload.losswatch stream``, the echo
servers send its datagrams back unchanged). While it runs, every node of the lab and the pods involved hold a
table of ours that remembers, in two sets keyed by the client port, which requests (client port as source) and
which replies (client port as destination) entered that namespace (prerouting, before anything can drop them):

    table ip magw_verify {
        set req { type inet_service; flags dynamic,timeout; timeout 120s; }
        set rep { type inet_service; flags dynamic,timeout; timeout 120s; }
        chain pre {
            type filter hook prerouting priority -350; policy accept;
            udp sport LO-HI update @req { udp sport }
            udp dport LO-HI update @rep { udp dport }
        }
    }

The client ports (``LO``..``HI``) lie below the kernel's ephemeral range (32768-60999: VXLAN's outer source
ports and every other socket's are there), so nothing else lands in the sets. The table is removed afterwards.

``find_break`` is pure: given the ordered stages of the way there and back (the client's node, a gateway of its
cluster, a gateway of the server's cluster, the server's node, the server pod; then back) and the namespaces
that saw the flow, it names the first stage nobody saw, after the last one that did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import attrs

from magw.lab.build import netns
from magw.lab.errors import LabError

TABLE = "magw_verify"
PORT_LO = 21000
PORT_HI = 29999
KEEP_SECONDS = 120


def _nft_time(seconds: float) -> str:
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{round(seconds * 1000)}ms"


def table_text(lo: int = PORT_LO, hi: int = PORT_HI, table: str = TABLE, keep: float = KEEP_SECONDS) -> str:
    """The table (``table``: another name, so that runs at once on one node keep apart), replacing one of the
    same name; a port leaves its set ``keep`` seconds after its last packet."""
    sets = "".join(
        f"  set {name} {{ type inet_service; flags dynamic,timeout; timeout {_nft_time(keep)}; }}\n"
        for name in ("req", "rep")
    )
    return (
        f"add table ip {table}\ndelete table ip {table}\n"
        f"table ip {table} {{\n{sets}"
        "  chain pre {\n    type filter hook prerouting priority -350; policy accept;\n"
        f"    udp sport {lo}-{hi} update @req {{ udp sport }}\n"
        f"    udp dport {lo}-{hi} update @rep {{ udp dport }}\n  }}\n}}\n"
    )


def install(namespaces: Iterable[str]) -> None:
    for ns in namespaces:
        netns.nft_load(ns, table_text())


def remove(namespaces: Iterable[str]) -> None:
    for ns in namespaces:
        if netns.exists(ns):
            try:
                netns.ns_exec(ns, "nft", "delete", "table", "ip", TABLE)
            except LabError:  # already gone
                continue


def elements(listing: Mapping[str, object]) -> set[int]:
    """The ports in one ``nft -j list set`` answer (an element is a number, or an object with its value)."""
    items = listing.get("nftables")
    out: set[int] = set()
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or "set" not in item:
            continue
        for elem in item["set"].get("elem", []):
            out.add(int(elem["elem"]["val"]) if isinstance(elem, dict) and "elem" in elem else int(elem))
    return out


def read(namespaces: Mapping[str, str]) -> dict[str, tuple[set[int], set[int]]]:
    """Lab name -> (requests seen, replies seen) by client port, for ``namespaces`` (lab name -> namespace)."""
    out = {}
    for name, ns in namespaces.items():
        sets = tuple(
            elements(json.loads(netns.ns_exec(ns, "nft", "-j", "list", "set", "ip", TABLE, s))) for s in ("req", "rep")
        )
        out[name] = (sets[0], sets[1])
    return out


@attrs.frozen(kw_only=True)
class Stage:
    """One hop of a path: who may see the flow there (any one of ``members`` is enough) and what to call it."""

    label: str
    members: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Break:
    """Where a flow died: the way (``request`` or ``reply``), who saw it last, and the stage nobody reached."""

    direction: str
    last: tuple[str, ...]
    stage: Stage

    @property
    def hop(self) -> str:
        return f"{'|'.join(self.last) or '?'} -> {self.stage.label}"

    def text(self) -> str:
        return f"{self.direction} died at {self.hop}"


@attrs.frozen(kw_only=True)
class Route:
    """The stages of one client -> target path, both ways."""

    client: str
    request: tuple[Stage, ...]
    reply: tuple[Stage, ...]


def _gateways(cluster: str, names: Sequence[str]) -> Stage:
    """The stage any gateway of ``cluster`` may pass a flow at."""
    return Stage(label=f"a {cluster} gateway ({'|'.join(names)})", members=tuple(names))


def route(
    *,
    client: str,
    client_node: str,
    local_gateways: Sequence[str],
    remote_gateways: Sequence[str],
    server_nodes: Sequence[str],
    servers: Sequence[str],
    local: str,
    remote: str,
) -> Route:
    """The expected path of a flow from pod ``client`` (on ``client_node``, in cluster ``local``) to one of
    ``servers`` (on ``server_nodes``, in cluster ``remote``)."""
    node = Stage(label=client_node, members=(client_node,))
    lgw, rgw = _gateways(local, local_gateways), _gateways(remote, remote_gateways)
    snode = Stage(label="|".join(server_nodes), members=tuple(server_nodes))
    spod = Stage(label="|".join(servers), members=tuple(servers))
    back = Stage(label=client, members=(client,))
    return Route(client=client, request=(node, lgw, rgw, snode, spod), reply=(snode, rgw, lgw, node, back))


def node_route(
    *,
    client: str,
    client_node: str,
    local_gateways: Sequence[str],
    remote_gateways: Sequence[str],
    server: str,
    server_node: str,
    local: str,
    remote: str,
) -> Route:
    """The path of ``route`` seen from the nodes only (``magw verify --kubeconfig`` traces no pod's namespace): the
    server pod's answer is first seen entering ``server_node`` from the pod, the client's replies last on
    ``client_node``."""
    node = Stage(label=client_node, members=(client_node,))
    lgw, rgw = _gateways(local, local_gateways), _gateways(remote, remote_gateways)
    snode = Stage(label=server_node, members=(server_node,))
    answer = Stage(label=f"{server}'s answer (seen on {server_node})", members=(server_node,))
    back = Stage(label=f"{client_node} (on the way back to {client})", members=(client_node,))
    return Route(client=client, request=(node, lgw, rgw, snode), reply=(answer, rgw, lgw, back))


def find_break(r: Route, req_seen: set[str], rep_seen: set[str]) -> Break | None:
    """The first stage (there, then back) that no namespace of it saw; None when the flow was seen everywhere."""
    last: tuple[str, ...] = (r.client,)
    for direction, stages, seen in (("request", r.request, req_seen), ("reply", r.reply, rep_seen)):
        for stage in stages:
            hit = tuple(m for m in stage.members if m in seen)
            if not hit:
                return Break(direction=direction, last=last, stage=stage)
            last = hit
    return None


def seen_by(trace: Mapping[str, tuple[set[int], set[int]]], sport: int) -> tuple[set[str], set[str]]:
    """(who saw the request, who saw the reply) of the flow from client port ``sport``."""
    return ({n for n, (req, _) in trace.items() if sport in req}, {n for n, (_, rep) in trace.items() if sport in rep})
