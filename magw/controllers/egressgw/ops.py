"""Binding and unbinding egress VIPs: the seed's rules as pure functions over ``magw.model.egressgw``. Pure.

The seed (centralized-snat-gateway.zh.md, "binding") records a VIP bound to a namespace once, for the
namespace; the Services of that namespace then share it, each bound to it by a call of its own that the seed
keeps on the Service (an annotation). A Service that must own a VIP is bound with namespace and Service
together, to a VIP nothing else uses. Unbinding mirrors this: an exclusive VIP is released by one unbind;
a shared VIP is released by unbinding every Service bound to it first, then the namespace.

Here those calls become ``EgressBinding`` values on the ``EgressVIP``:

- ``bind(vip, ns)``: the namespace *shares* the VIP: every Service of ``ns`` leaves through it
  (``magw.desired.egressgw.bindings``). Refused when the namespace already shares a VIP, or the VIP is
  bound to anything.
- ``bind(vip, ns, svc)`` on a VIP that ``ns`` shares: ``svc`` *joins* the shared VIP (the seed's per-Service
  bind). It changes no traffic (the namespace's binding already covers ``svc``) but it is recorded, and the
  namespace cannot be unbound while it is.
- ``bind(vip, ns, svc)`` on a VIP bound to nothing: the VIP is ``svc``'s *exclusively*; no other binding may
  join it. It beats a VIP that ``ns`` shares (the resolver's rule).
- ``unbind(vip, ns, svc)`` removes that Service binding; ``unbind(vip, ns)`` removes the namespace's, and is
  refused while Services are still bound to the VIP (they are named).
- Any bind is refused when it would make two Services claim the same port of a VIP (``ports.vip_ports``: the
  planner would DNAT the port to the first by name and ignore the other's).

Every refusal is an ``EgressOpError`` with one line and a kind (``invalid``, ``not_found``, ``conflict``:
the HTTP API's 400, 404 and 409); nothing is changed, the functions return new values. Binding checks that
the namespace and Service exist (Snapshot.globalnet's workloads); unbinding does not, so that a deleted
namespace's bindings can still be removed.
"""

from __future__ import annotations

import enum
from ipaddress import AddressValueError, IPv4Address

import attrs

from magw.desired.egressgw.bindings import resolve
from magw.desired.egressgw.ports import PortClash, port_clashes
from magw.model.egressgw import EgressBinding, EgressConfig, EgressGateway, EgressVIP, EgressVIPStatus
from magw.model.globalnet import Globalnet


class ErrorKind(enum.Enum):
    INVALID = "invalid"  # HTTP 400: the request cannot mean anything
    NOT_FOUND = "not_found"  # HTTP 404: it names a VIP, namespace, Service or node that does not exist
    CONFLICT = "conflict"  # HTTP 409: it contradicts the current bindings


class EgressOpError(Exception):
    """A refused operation. ``str()`` is one line; ``kind`` says which HTTP status the API answers."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _invalid(message: str) -> EgressOpError:
    return EgressOpError(ErrorKind.INVALID, message)


def _not_found(message: str) -> EgressOpError:
    return EgressOpError(ErrorKind.NOT_FOUND, message)


def _conflict(message: str) -> EgressOpError:
    return EgressOpError(ErrorKind.CONFLICT, message)


def _ranges(cfg: EgressConfig) -> str:
    return ", ".join(str(n) for n in cfg.vip_ranges) or "none configured"


def find_vip(egress: EgressGateway, ref: str) -> EgressVIP:
    """The VIP named ``ref``, or whose address is ``ref`` (the seed's requests name VIPs by address)."""
    if not ref:
        raise _invalid("vip: required: an EgressVIP name or address")
    named = egress.vip(ref)
    if named is not None:
        return named
    try:
        address = IPv4Address(ref)
    except (AddressValueError, ValueError):
        raise _not_found(f"no EgressVIP named {ref!r}") from None
    for v in egress.vips:
        if v.vip == address:
            return v
    # Not found either way (404): a well-formed address names no VIP; the message says why when it cannot.
    if not any(address in net for net in egress.config.vip_ranges):
        raise _not_found(f"VIP {address} is outside the egress VIP ranges ({_ranges(egress.config)})")
    raise _not_found(f"no EgressVIP has address {address}")


def _check_range(egress: EgressGateway, vip: EgressVIP) -> None:
    # The VIP exists but the ranges were narrowed since: the request is sound, the state contradicts it (409).
    if not any(vip.vip in net for net in egress.config.vip_ranges):
        raise _conflict(f"VIP {vip.name} ({vip.vip}) is outside the egress VIP ranges ({_ranges(egress.config)})")


def _check_names(namespace: str, service: str) -> None:
    if not namespace:
        raise _invalid("namespace: required")
    for what, value in (("namespace", namespace), ("service", service)):
        if value != value.strip() or "/" in value:
            raise _invalid(f"{what}: {value!r} is not a Kubernetes name")


def _check_exists(workloads: Globalnet, namespace: str, service: str) -> None:
    if not any(ns.name == namespace for ns in workloads.namespaces):
        raise _not_found(f"namespace {namespace} does not exist")
    if service and not any(s.namespace == namespace and s.name == service for s in workloads.services):
        raise _not_found(f"service {namespace}/{service} does not exist")


def _holder_of(egress: EgressGateway, key: EgressBinding) -> EgressVIP | None:
    for v in egress.vips:
        if key in v.bindings:
            return v
    return None


def _replace(egress: EgressGateway, vip: EgressVIP, bindings: tuple[EgressBinding, ...]) -> EgressGateway:
    changed = attrs.evolve(vip, bindings=bindings)
    return attrs.evolve(egress, vips=[changed if v.name == vip.name else v for v in egress.vips])


def _describe(vip: EgressVIP) -> str:
    return ", ".join(str(b) for b in vip.bindings)


def bind(egress: EgressGateway, workloads: Globalnet, vip_ref: str, namespace: str, service: str = "") -> EgressGateway:
    """``egress`` with the binding added (rules: the module's docstring); ``EgressOpError`` when refused."""
    _check_names(namespace, service)
    vip = find_vip(egress, vip_ref)
    _check_range(egress, vip)
    _check_exists(workloads, namespace, service)
    changed = _with_binding(egress, vip, namespace, service)
    _check_ports(egress, changed, workloads)
    return changed


def _with_binding(egress: EgressGateway, vip: EgressVIP, namespace: str, service: str) -> EgressGateway:
    shared = EgressBinding(namespace)
    wanted = EgressBinding(namespace, service)
    already = _holder_of(egress, wanted)
    if already is not None:
        where = "this VIP" if already.name == vip.name else f"VIP {already.name} ({already.vip})"
        raise _conflict(f"{wanted} is already bound to {where}")
    if not service:
        if vip.bindings:
            raise _conflict(f"VIP {vip.name} is already bound to {_describe(vip)}; unbind it first")
        return _replace(egress, vip, (*vip.bindings, wanted))
    if shared in vip.bindings:  # joining the namespace's shared VIP (the seed's per-Service bind)
        return _replace(egress, vip, (*vip.bindings, wanted))
    if vip.bindings:
        raise _conflict(
            f"VIP {vip.name} is already bound to {_describe(vip)}: a Service gets a VIP of its own, or joins "
            "its namespace's shared VIP"
        )
    return _replace(egress, vip, (wanted,))


def clashes(egress: EgressGateway, workloads: Globalnet) -> tuple[PortClash, ...]:
    """Every VIP's port clashes (``magw.desired.egressgw.ports``: the planner's rule)."""
    return port_clashes(egress, resolve(egress, workloads.services, workloads.pods), workloads.services)


def _check_ports(before: EgressGateway, after: EgressGateway, workloads: Globalnet) -> None:
    """Refuse a change that makes two Services claim one port of a VIP (one that was there before is no reason
    to refuse an unrelated change)."""
    known = set(clashes(before, workloads))
    for clash in clashes(after, workloads):
        if clash not in known:
            raise _conflict(
                f"port {clash.port}/{clash.protocol} of VIP {clash.vip} would lead to both {clash.owner} and "
                f"{clash.service}: a VIP's port leads to one Service (give one of them a VIP of its own)"
            )


def unbind(egress: EgressGateway, vip_ref: str, namespace: str, service: str = "") -> EgressGateway:
    """``egress`` without the binding; refused when it is not there, or for a shared VIP still joined by
    Services (they must be unbound first, as in the seed)."""
    _check_names(namespace, service)
    vip = find_vip(egress, vip_ref)
    wanted = EgressBinding(namespace, service)
    if wanted not in vip.bindings:
        other = _holder_of(egress, wanted)
        hint = f" (it is bound to VIP {other.name})" if other is not None else ""
        if service and other is None and EgressBinding(namespace) in vip.bindings:
            hint = f" (it uses the VIP through namespace {namespace}'s shared binding: unbind the namespace)"
        raise _conflict(f"{wanted} is not bound to VIP {vip.name}{hint}")
    if not service:
        joined = sorted(f"{b.namespace}/{b.service}" for b in vip.bindings if b.service)
        if joined:
            raise _conflict(
                f"VIP {vip.name} is shared by namespace {namespace} and still used by services "
                f"{', '.join(joined)}: unbind them first"
            )
    return _replace(egress, vip, tuple(b for b in vip.bindings if b != wanted))


# ----- holder reports ---------------------------------------------------------------------------


class VrrpState(enum.Enum):
    """What keepalived reports for one VRRP instance (its notify FIFO's states)."""

    MASTER = "MASTER"
    BACKUP = "BACKUP"
    FAULT = "FAULT"
    STOP = "STOP"


@attrs.frozen(kw_only=True)
class HolderReport:
    """Node ``node`` entered ``state`` for VIP ``vip`` (a name) at ``at`` (RFC 3339 UTC)."""

    vip: str
    node: str
    state: VrrpState = VrrpState.MASTER
    at: str = ""


def check_report(egress: EgressGateway, report: HolderReport) -> None:
    """Refuse a report about an unknown VIP or from a node that is not one of its candidates."""
    vip = find_vip(egress, report.vip)
    if report.node not in vip.candidates:
        raise _conflict(f"node {report.node} is not a candidate of VIP {vip.name} ({', '.join(vip.candidates)})")


def apply_report(status: EgressVIPStatus, report: HolderReport) -> EgressVIPStatus:
    """The status after ``report``: MASTER makes the node the holder (``since`` moves only when the holder
    changes); any other state from the current holder leaves the VIP without a known holder."""
    if report.state is VrrpState.MASTER:
        if status.holder == report.node:
            return status
        return attrs.evolve(status, holder=report.node, since=report.at)
    if status.holder == report.node:
        return attrs.evolve(status, holder="", since=report.at)
    return status


def statuses(egress: EgressGateway, workloads: Globalnet) -> tuple[dict[str, EgressVIPStatus], tuple[str, ...]]:
    """Every VIP's status (holder and since as they are, services from the resolver, conflicts: its port
    clashes), and the resolver's conflicts (one line each)."""
    resolution = resolve(egress, workloads.services, workloads.pods)
    found = port_clashes(egress, resolution, workloads.services)
    out: dict[str, EgressVIPStatus] = {}
    for v in egress.vips:
        current = egress.status_of(v.name) or EgressVIPStatus()
        mine = [c.describe() for c in found if c.vip == v.name]
        out[v.name] = attrs.evolve(current, services=resolution.of(v.name).services, conflicts=mine)
    return out, resolution.conflicts
