"""Names and addresses of the seed's OVN topology, per gateway slot.

The seed (``globalnet-ovn-kubernetes.md``) has one ``submariner_router`` pinned to the active gateway's
chassis, joined to ``ovn_cluster_router`` over ``submariner_join`` (169.254.254.0/29: ``submariner_j_lrp``
.1, ``ovn_cluster_subm_lrp`` .2), and reaching the gateway host over ``submariner_gateway`` (a localnet
switch bridged to ``br-submariner``: ``submariner_up_lrp`` .9, the host's ``ovn-k8s-sub0`` .10).

Multiple active gateways (docs/ovn.md): one such gateway router per active gateway, each in a *slot*.
Slot 1 has exactly the seed's names and addresses, so single-gateway mode is the seed's topology. Slot k>1
adds ``_k`` to the names of the router, its ports and its uplink switch, and takes join address .(k+1);
every slot's uplink switch is its own L2 domain (localnet on its own chassis), so all reuse .9/.10. The join
/29 has room for slots 1..5.
"""

from __future__ import annotations

import re
import zlib

import attrs

CLUSTER_ROUTER = "ovn_cluster_router"
LB_GROUP = "clusterLBGroup"
JOIN_SWITCH = "submariner_join"
JOIN_CIDR_LEN = 29
CLUSTER_PORT = "ovn_cluster_subm_lrp"
CLUSTER_PORT_IP = "169.254.254.2"
CLUSTER_PORT_MAC = "00:60:2f:10:01:02"
CLUSTER_SWITCH_PORT = "ovn_cluster_subm_lsp"
UP_IP = "169.254.254.9"
HOST_IP = "169.254.254.10"  # ovn-k8s-sub0 on the gateway host
LOCALNET_NETWORK = "submariner_gateway"  # ovn-bridge-mappings: submariner_gateway:br-submariner
POLICY_PRIORITY = 20000
MAX_SLOTS = 5


@attrs.frozen
class Slot:
    """The names and addresses of one gateway router's topology."""

    number: int

    def _name(self, base: str) -> str:
        return base if self.number == 1 else f"{base}_{self.number}"

    @property
    def router(self) -> str:
        return self._name("submariner_router")

    @property
    def join_port(self) -> str:
        return self._name("submariner_j_lrp")

    @property
    def join_switch_port(self) -> str:
        return self._name("submariner_j_lsp")

    @property
    def join_ip(self) -> str:
        return "169.254.254.1" if self.number == 1 else f"169.254.254.{self.number + 1}"

    @property
    def join_mac(self) -> str:
        return f"00:60:2f:10:{self.number:02x}:03"

    @property
    def up_switch(self) -> str:
        return self._name("submariner_gateway")

    @property
    def up_port(self) -> str:
        return self._name("submariner_up_lrp")

    @property
    def up_switch_port(self) -> str:
        return self._name("submariner_up_lsp")

    @property
    def localnet_port(self) -> str:
        return self._name("submariner_gateway_localnet")

    @property
    def up_mac(self) -> str:
        return f"00:60:2f:10:{self.number:02x}:04"


_NAME_OK = re.compile(r"[A-Za-z_.][A-Za-z0-9_.]*\Z")


def remote_set_name(cluster_id: str) -> str:
    """The Address_Set of a remote cluster's CIDRs; a valid OVN identifier for any cluster id.

    Characters OVN does not allow in a ``$name`` become ``_``; a CRC of the id is then added so that two ids
    differing only there (``a-b``, ``a.b``) never share a set.
    """
    return set_name("submariner_remote_", cluster_id)


def set_name(prefix: str, ident: str) -> str:
    """``prefix + ident`` as a valid OVN identifier (see ``remote_set_name``)."""
    name = f"{prefix}{ident}"
    if _NAME_OK.match(name):
        return name
    clean = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    return f"{clean}_{zlib.crc32(ident.encode()):08x}"
