"""Which gateways each UDP flow of a measurement really crosses: nft sets in the gateways' forward hook.

Predicting the path with ``ip route get`` does not work for pod traffic:
kernel 6.18, ``fib_multipath_hash_policy=1``: a datagram from a pod's socket
carries the socket's random ``sk_txhash`` (``skb->l4_hash`` set), which
``fib_multipath_hash`` uses as is, so the worker's choice depends on the
socket, not on the 5-tuple that ``ip route get ... sport .. dport ..`` hashes
(64 flows: the prediction was wrong for about half of them). So we watch:
every gateway of the lab gets a table of its own for the measurement

    table ip magw_losswatch {
        set toward { type inet_service; flags dynamic,timeout; timeout 400ms; }
        set back { type inet_service; flags dynamic,timeout; timeout 400ms; }
        chain forward {
            type filter hook forward priority -300; policy accept;
            udp dport PORT update @toward { udp sport }
            udp sport PORT update @back { udp dport }
        }
    }

and a read of the sets says which flows (by client port) crossed it in each
direction within the last 400 ms. The table is removed afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import attrs

from magw.lab.build import netns
from magw.lab.errors import LabError
from magw.lab.spec.layout import LabLayout, NodeLayout

TABLE = "magw_losswatch"
RECENT_MS = 400


@attrs.frozen(kw_only=True)
class FlowPath:
    """The gateways a flow (client port ``sport``) crossed: toward the server, and back."""

    sport: int
    forward: frozenset[str] = frozenset()
    back: frozenset[str] = frozenset()

    @property
    def gateways(self) -> frozenset[str]:
        return self.forward | self.back


def table_text(port: int) -> str:
    sets = "".join(
        f"  set {name} {{ type inet_service; flags dynamic,timeout; timeout {RECENT_MS}ms; }}\n"
        for name in ("toward", "back")
    )
    return (
        f"add table ip {TABLE}\ndelete table ip {TABLE}\n"
        f"table ip {TABLE} {{\n{sets}"
        "  chain forward {\n    type filter hook forward priority -300; policy accept;\n"
        f"    udp dport {port} update @toward {{ udp sport }}\n"
        f"    udp sport {port} update @back {{ udp dport }}\n  }}\n}}\n"
    )


def install(gateways: Iterable[NodeLayout], port: int) -> None:
    for gw in gateways:
        netns.nft_load(gw.namespace, table_text(port))


def remove(gateways: Iterable[NodeLayout]) -> None:
    for gw in gateways:
        if netns.exists(gw.namespace):
            try:
                netns.ns_exec(gw.namespace, "nft", "delete", "table", "ip", TABLE)
            except LabError:  # already gone
                continue


def _elements(ns: str, name: str) -> set[int]:
    out = netns.ns_exec(ns, "nft", "-j", "list", "set", "ip", TABLE, name)
    sets = [item["set"] for item in json.loads(out)["nftables"] if "set" in item]
    values = set()
    for elem in sets[0].get("elem", []) if sets else []:
        values.add(int(elem["elem"]["val"]) if isinstance(elem, dict) and "elem" in elem else int(elem))
    return values


def read_paths(lab: LabLayout, sports: Sequence[int]) -> list[FlowPath]:
    """The gateways every flow crossed in the last ``RECENT_MS`` ms, in ``sports`` order."""
    seen = {gw.name: (_elements(gw.namespace, "toward"), _elements(gw.namespace, "back")) for gw in lab.gateways}
    return [
        FlowPath(
            sport=p,
            forward=frozenset(g for g, (fwd, _b) in seen.items() if p in fwd),
            back=frozenset(g for g, (_f, back) in seen.items() if p in back),
        )
        for p in sports
    ]
