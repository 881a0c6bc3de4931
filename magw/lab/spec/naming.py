"""Names of everything a lab creates, all derived from the lab's name.

Every namespace starts with ``<lab>-``; a lab name has no hyphen, so the
namespaces of lab ``magw`` never share that prefix with lab ``magw2`` or with
any other lab. The prefix alone does not make a namespace the lab's: anyone may
create ``magw-keepme``. What the lab made carries its marker, the alias
``magw-lab:<lab>:<token>`` of the namespace's ``lo`` (``token`` is random per
``up`` and kept in the state file). Interface names only have to be unique inside
their namespace and fit in IFNAMSIZ - 1 = 15 bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

from magw.lab.errors import LabInputError

DEFAULT_LAB_NAME = "magw"
STATE_ROOT = Path("/run/magw-lab")

LAB_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
CLUSTER_ID_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")

# Inside a node namespace.
UNDERLAY_IF = "eth0"
ENCAP_IF = "eth1"  # --cni ovn: the node's leg for OVN's geneve tunnels, a port of its br-phy
WAN_IF = "wan0"
CNI_BRIDGE = "cni0"
# Inside a pod namespace.
POD_IF = "eth0"
# Inside the underlay and WAN namespaces.
BRIDGE = "br0"

IFNAMSIZ_MAX = 15

MARKER_PREFIX = "magw-lab"
_MARKER_RE = re.compile(rf"^{MARKER_PREFIX}:([a-z][a-z0-9]{{0,11}}):([0-9a-f]{{8,32}})$")


def check_lab_name(name: str) -> str:
    """Return ``name`` if it is a valid lab name, else raise with one line."""
    if not LAB_NAME_RE.match(name):
        raise LabInputError(
            f"lab name: {name!r} must be 1-12 characters, lower-case letters and digits, starting with a letter"
        )
    return name


def ns_prefix(lab: str) -> str:
    """The prefix shared by every namespace of ``lab`` and by nothing else."""
    return f"{lab}-"


def marker(lab: str, token: str) -> str:
    """The ``lo`` alias that marks a namespace as made by ``up`` of lab ``lab`` (run ``token``)."""
    return f"{MARKER_PREFIX}:{lab}:{token}"


def parse_marker(alias: str | None) -> tuple[str, str] | None:
    """(lab, token) of a marker alias; None for anything else (no alias, someone else's alias)."""
    m = _MARKER_RE.match(alias or "")
    return None if m is None else (m.group(1), m.group(2))


def node_name(cluster: str, short: str) -> str:
    """The node's (Kubernetes) name, unique across the clusterset: ``east-gw1``."""
    return f"{cluster}-{short}"


def node_ns(lab: str, cluster: str, short: str) -> str:
    return f"{lab}-{node_name(cluster, short)}"


def pod_short(node_short: str, index: int) -> str:
    """A pod's name inside its cluster: ``w1-p2`` (index counts from 1)."""
    return f"{node_short}-p{index}"


def pod_name(cluster: str, node_short: str, index: int) -> str:
    return f"{cluster}-{pod_short(node_short, index)}"


def pod_ns(lab: str, cluster: str, node_short: str, index: int) -> str:
    return f"{lab}-{pod_name(cluster, node_short, index)}"


def pod_host_if(index: int) -> str:
    """The node-side end of a pod's veth, a port of ``cni0``."""
    return f"p{index}"


def underlay_ns(lab: str, cluster: str) -> str:
    """The namespace holding a cluster's underlay bridge."""
    return f"{lab}-{cluster}-ul"


CLOUD_SHORT = "lb"  # the cloud's port names: "lb" on the underlay bridge, "<cluster>-lb" on the WAN bridge


def cloud_ns(lab: str, cluster: str) -> str:
    """The namespace emulating the cloud load balancer and NAT gateway in front of a cluster's gateways."""
    return f"{lab}-{cluster}-cloud"


def outside_ns(lab: str) -> str:
    """The egress gateway lab's world outside the cluster (``magw.lab.planes.egressgw``)."""
    return f"{lab}-outside"


def wan_ns(lab: str) -> str:
    """The namespace holding the WAN bridge between all gateways."""
    return f"{lab}-wan"


def underlay_port(node_short: str) -> str:
    """A node's port on its cluster's underlay bridge."""
    return node_short


def encap_port(node_short: str) -> str:
    """A node's second port on its cluster's underlay bridge, OVN's tunnel leg (``--cni ovn``)."""
    return f"{node_short}-ovn"


def wan_port(cluster: str, node_short: str) -> str:
    """A gateway's port on the WAN bridge (<= 15 chars by the id length limits)."""
    return node_name(cluster, node_short)


def state_dir(lab: str) -> Path:
    return STATE_ROOT / lab
