"""The OVN Northbound rows magw owns, as frozen keyed values (the OVN counterpart of ``desired.state``).

Each row type names the NB table it lives in and has a ``key`` that identifies it among our rows of that
table (a router by name, a static route by ``(router, prefix, nexthop, output_port)``, ...). The same types
describe what the driver observes, so the pure diff compares like with like: same key and different fields
means "update in place".

Every row we write carries ``external_ids`` ``{OWNER_KEY: OWNER, KEY_KEY: <key text>}``; the driver reads
and writes only rows with ``OWNER_KEY == OWNER``. Rows of other tables that we *refer to* (OVN-Kubernetes'
``ovn_cluster_router`` and ``clusterLBGroup``) are never changed beyond adding and removing our own child
rows in their reference columns (``ports``, ``policies``).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

OWNER_KEY = "magw-owner"
OWNER = "magw"
KEY_KEY = "magw-key"
# The gateway a per-gateway row belongs to, and its slot (see magw.desired.ovn.slots).
GATEWAY_KEY = "magw-gateway"
SLOT_KEY = "magw-slot"

Pairs = tuple[tuple[str, str], ...]


def _pairs(value: Any) -> Pairs:
    """A mapping (or pairs) as sorted pairs: frozen, hashable and order-free."""
    items = value.items() if isinstance(value, dict) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(sorted(str(v) for v in value))


@attrs.frozen(kw_only=True)
class Router:
    """A ``Logical_Router`` of ours. ``chassis`` pins it (``options:chassis``): a gateway router. ``lb_snat``
    (``options:lb_force_snat_ip=router_ip``): connections its load balancers DNAT leave with the address of the
    router port they leave by, so the replies come back to this router (docs/ovn.md, "Services")."""

    name: str
    chassis: str | None = None
    lb_group: str | None = None  # the name of a (foreign) Load_Balancer_Group it uses
    lb_snat: bool = False
    gateway: str | None = None  # the gateway host the router serves
    slot: int | None = None

    table = "Logical_Router"

    @property
    def key(self) -> str:
        return self.name


LB_SNAT_OPTION = "lb_force_snat_ip"
LB_SNAT_VALUE = "router_ip"


def router_options(row: Router) -> dict[str, str]:
    """The ``options`` a router of ours has: its chassis, and the load balancers' SNAT when ``lb_snat``."""
    options = {"chassis": row.chassis} if row.chassis else {}
    if row.lb_snat:
        options[LB_SNAT_OPTION] = LB_SNAT_VALUE
    return options


@attrs.frozen(kw_only=True)
class RouterPort:
    """A ``Logical_Router_Port`` of ours on ``router`` (ours or OVN-Kubernetes' ``ovn_cluster_router``)."""

    name: str
    router: str
    mac: str
    networks: tuple[str, ...] = attrs.field(converter=_strs)

    table = "Logical_Router_Port"

    @property
    def key(self) -> str:
        return self.name


@attrs.frozen(kw_only=True)
class Switch:
    """A ``Logical_Switch`` of ours."""

    name: str

    table = "Logical_Switch"

    @property
    def key(self) -> str:
        return self.name


PortType = Literal["router", "localnet"]


@attrs.frozen(kw_only=True)
class SwitchPort:
    """A ``Logical_Switch_Port`` of ours on ``switch``: a router port's peer, or a localnet port."""

    name: str
    switch: str
    type: PortType
    addresses: tuple[str, ...] = attrs.field(converter=_strs)
    options: Pairs = attrs.field(converter=_pairs)

    table = "Logical_Switch_Port"

    @property
    def key(self) -> str:
        return self.name


@attrs.frozen(kw_only=True)
class StaticRoute:
    """A ``Logical_Router_Static_Route`` of ours on ``router``."""

    router: str
    prefix: str
    nexthop: str
    output_port: str

    table = "Logical_Router_Static_Route"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.router, self.prefix, self.nexthop, self.output_port)

    @property
    def key_text(self) -> str:
        return f"{self.router}:{self.prefix}>{self.nexthop}@{self.output_port}"


@attrs.frozen(kw_only=True)
class Policy:
    """A ``Logical_Router_Policy`` of ours on ``router``: ``reroute`` to ``nexthops`` (several make an ECMP set), or
    ``allow`` (no nexthops: routed as usual, lower-priority policies skipped)."""

    router: str
    priority: int
    match: str
    nexthops: tuple[str, ...] = attrs.field(converter=_strs)
    action: Literal["reroute", "allow"] = "reroute"

    table = "Logical_Router_Policy"

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.router, self.priority, self.match)

    @property
    def key_text(self) -> str:
        return f"{self.router}:{self.priority}:{self.match}"


@attrs.frozen(kw_only=True)
class AddressSet:
    """An ``Address_Set`` of ours (named ``name``; matches refer to it as ``$name``)."""

    name: str
    addresses: tuple[str, ...] = attrs.field(converter=_strs)

    table = "Address_Set"

    @property
    def key(self) -> str:
        return self.name


OvnRow = Router | RouterPort | Switch | SwitchPort | StaticRoute | Policy | AddressSet

# Kinds in dependency order: a row may refer only to rows of kinds before it (or to foreign rows).
OVN_KINDS: tuple[str, ...] = (
    "address_sets",
    "routers",
    "switches",
    "router_ports",
    "switch_ports",
    "routes",
    "policies",
)


def key_text(row: OvnRow) -> str:
    """The ``magw-key`` external id of a row: its key as one line of text."""
    if isinstance(row, StaticRoute | Policy):
        return row.key_text
    return row.key


def external_ids(row: OvnRow) -> dict[str, str]:
    """The ``external_ids`` we write on ``row``: ours, its key, and a router's gateway and slot."""
    ids = {OWNER_KEY: OWNER, KEY_KEY: key_text(row)}
    if isinstance(row, Router):
        if row.gateway is not None:
            ids[GATEWAY_KEY] = row.gateway
        if row.slot is not None:
            ids[SLOT_KEY] = str(row.slot)
    return ids


def _by_key(rows: Any) -> tuple[Any, ...]:
    return tuple(sorted(rows, key=key_text))


@attrs.frozen(kw_only=True)
class OvnState:
    """All NB rows of ours, sorted by key text in every kind. Desired and observed alike."""

    address_sets: tuple[AddressSet, ...] = attrs.field(default=(), converter=_by_key)
    routers: tuple[Router, ...] = attrs.field(default=(), converter=_by_key)
    switches: tuple[Switch, ...] = attrs.field(default=(), converter=_by_key)
    router_ports: tuple[RouterPort, ...] = attrs.field(default=(), converter=_by_key)
    switch_ports: tuple[SwitchPort, ...] = attrs.field(default=(), converter=_by_key)
    routes: tuple[StaticRoute, ...] = attrs.field(default=(), converter=_by_key)
    policies: tuple[Policy, ...] = attrs.field(default=(), converter=_by_key)

    def of_kind(self, kind: str) -> tuple[OvnRow, ...]:
        rows: tuple[OvnRow, ...] = getattr(self, kind)
        return rows

    def rows(self) -> tuple[OvnRow, ...]:
        return tuple(r for kind in OVN_KINDS for r in self.of_kind(kind))

    def count(self) -> int:
        return sum(len(self.of_kind(k)) for k in OVN_KINDS)
