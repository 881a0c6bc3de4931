"""Shared values of the WireGuard cable tests: real key pairs (made with ``wg genkey | wg pubkey``) and a
clusterset document whose every derived value the tests compute by hand.

The clusterset, seen from cluster east (underlay MTU 1400, WireGuard port 51999):

- east: gateway e-gw1 (private 172.18.0.6, public 198.51.100.6, key E_GW1_PUB), worker e-w1 (172.18.0.3);
- west: w-gw1 (private 172.19.0.4, public 203.0.113.4, key W_GW1_PUB), w-gw2 (private 172.19.1.5, no public
  IP, key W_GW2_PUB), w-gw3 (private 172.19.2.7, public 203.0.113.7, backend vxlan: no key);
- south: s-gw1 (private 172.20.3.9, public 192.0.2.9, key S_GW1_PUB).
"""

from __future__ import annotations

import copy
from typing import Any

# Real pairs: private key, then its public key (as `wg pubkey` prints it).
E_GW1_PRIV = "yBPf5KunzQPOWtfEncT6c4WQZlmFgG3fEsCLC/aVP38="
E_GW1_PUB = "gEPWeo3CclFHvyqboWUy2JjmRmyGnsRLPjPIdq4ohTE="
W_GW1_PRIV = "6OBvx9moMqJ8aLmb/0iPzxuUBRYcrcfdvzfIXcXoIlQ="
W_GW1_PUB = "OVicSQUzyD/mHTzzvPSih0pBAvUr4U30f/zTvb5pSE4="
W_GW2_PUB = "TAT1ARGHmvj0vJPnjwEhpo0aqeviQbiZDi56Qk4B5mk="
S_GW1_PUB = "0dsOanZTMclqtuOWofePC4+PniEwmIWqYmLmmahNvyY="
OTHER_PUB = "wyAxhKTa5l7pigWaAZ+Y2y3wgNm0f2QKl/xPRdIb/08="

PORT = 51999
MTU = 1400


def wg_endpoint(cluster: str, host: str, private: str, key: str, public: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"cluster": cluster, "hostname": host, "private_ip": private}
    if public is not None:
        doc["public_ip"] = public
    doc["backend"] = "wireguard"
    doc["backend_config"] = {"publicKey": key}
    return doc


_DOC: dict[str, Any] = {
    "local_cluster": "east",
    "multi_active_gateway": True,
    "underlay_mtu": MTU,
    "cable": "wireguard",
    "wireguard_port": PORT,
    "clusters": [
        {"id": "east", "pod_cidrs": ["10.1.0.0/16"], "service_cidrs": ["100.1.0.0/16"]},
        {"id": "west", "pod_cidrs": ["10.2.0.0/16"], "service_cidrs": ["100.2.0.0/16"]},
        {"id": "south", "pod_cidrs": ["10.3.0.0/16"], "service_cidrs": ["100.3.0.0/16"]},
    ],
    "nodes": [
        {"name": "e-gw1", "ip": "172.18.0.6", "cni_ip": "10.1.1.1", "gateway": True},
        {"name": "e-w1", "ip": "172.18.0.3", "cni_ip": "10.1.3.1"},
    ],
    "endpoints": [
        wg_endpoint("east", "e-gw1", "172.18.0.6", E_GW1_PUB, "198.51.100.6"),
        wg_endpoint("west", "w-gw1", "172.19.0.4", W_GW1_PUB, "203.0.113.4"),
        wg_endpoint("west", "w-gw2", "172.19.1.5", W_GW2_PUB),
        {"cluster": "west", "hostname": "w-gw3", "private_ip": "172.19.2.7", "public_ip": "203.0.113.7"},
        wg_endpoint("south", "s-gw1", "172.20.3.9", S_GW1_PUB, "192.0.2.9"),
    ],
}


def clusterset_doc() -> dict[str, Any]:
    """A fresh copy of the clusterset document (tests may change it)."""
    return copy.deepcopy(_DOC)


def endpoint_item(doc: dict[str, Any], hostname: str) -> dict[str, Any]:
    """The endpoint item of ``hostname`` in ``doc`` (to change it in place)."""
    return next(e for e in doc["endpoints"] if e["hostname"] == hostname)
