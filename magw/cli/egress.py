"""``magw egress bind|unbind|show``: the egress VIPs of a broker directory, thin over the controller's operations.

``bind`` and ``unbind`` do what the HTTP API's ``POST /vip`` does (same rules, same one-line refusals, nothing
written on a refusal), directly on the directory: for an operator without the controller running, and for the
lab. ``show`` prints every VIP with its bindings and its status, and every conflict among the bindings (a port
two Services of one VIP claim, a namespace or Service bound to two VIPs) as a ``CONFLICT:`` line.
docs/egress-gateway.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from magw.cli import UsageError
from magw.model.egressgw import EgressGateway, EgressVIPStatus
from magw.model.globalnet import Globalnet


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (("bind", "bind a VIP to a namespace (shared) or a Service"), ("unbind", "remove a binding")):
        p = verbs.add_parser(verb, help=text)
        _source(p)
        p.add_argument("vip", metavar="VIP", help="the EgressVIP's name or address")
        p.add_argument("namespace", metavar="NAMESPACE")
        p.add_argument("service", metavar="SERVICE", nargs="?", default="", help="a Service of NAMESPACE")
    show = verbs.add_parser("show", help="print every VIP, its bindings and its status")
    _source(show)
    show.add_argument("--json", action="store_true", help="machine-readable output")


def _source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker-dir", metavar="DIR", required=True, help="the file broker directory")
    p.add_argument("--cluster", metavar="ID", required=True, help="the local cluster's id")


def run(args: argparse.Namespace) -> int:
    from magw.cli.brokerdir import open_broker
    from magw.controllers.egressgw import ops
    from magw.controllers.egressgw.controller import EgressController, NotReady
    from magw.sources.file.egressgw_store import EgressStore, StoreRefused

    broker = open_broker(args.broker_dir, args.cluster)
    controller = EgressController(source=broker, store=EgressStore(args.broker_dir, args.cluster))
    try:
        if args.verb == "show":
            snapshot = controller.fresh()
            report = build_report(snapshot.egressgw, snapshot.globalnet)
            sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else render_text(report))
            return 0
        answer = controller.change_binding(args.verb, args.vip, args.namespace, args.service)
    except NotReady as exc:
        raise RuntimeError(f"{args.broker_dir}: {exc}") from None
    except (ops.EgressOpError, StoreRefused) as exc:
        raise UsageError(f"egress {args.verb}: {exc}") from None
    services = ", ".join(answer.status.services) or "none"
    sys.stdout.write(f"{answer.vip.name} ({answer.vip.vip}): services {services}\n")
    return 0


def build_report(egress: EgressGateway, workloads: Globalnet) -> dict[str, Any]:
    """Every VIP as the broker has it, with its ``conflicts`` computed now from the bindings and ``workloads``
    (as the controller's status and the planner would: ``ops.statuses``), so that a conflict shows even where
    no controller runs; ``conflicts`` at the top: the resolver's, across VIPs."""
    from magw.controllers.egressgw import ops

    computed, across = ops.statuses(egress, workloads)
    vips = []
    for v in egress.vips:
        st = egress.status_of(v.name) or EgressVIPStatus()
        vips.append(
            {
                "name": v.name,
                "vip": str(v.vip),
                "vrid": v.vrid,
                "candidates": list(v.candidates),
                "bindings": [str(b) for b in v.bindings],
                "holder": st.holder,
                "since": st.since,
                "services": list(st.services),
                "conflicts": list(computed[v.name].conflicts),
            }
        )
    cfg = egress.config
    return {
        "config": {
            "vipRanges": [str(n) for n in cfg.vip_ranges],
            "advertInt": cfg.advert_int,
            "conntrackSync": cfg.conntrack_sync,
        },
        "vips": vips,
        "conflicts": list(across),
    }


def render_text(report: dict[str, Any]) -> str:
    cfg = report["config"]
    lines = [
        f"vip ranges: {', '.join(cfg['vipRanges']) or 'none'}  advert_int: {cfg['advertInt']:g} s  "
        f"conntrack sync: {'on' if cfg['conntrackSync'] else 'off'}"
    ]
    for v in report["vips"]:
        holder = f"{v['holder']} since {v['since']}" if v["holder"] else "no holder known"
        lines.append(f"{v['name']} {v['vip']} vrid {v['vrid']} candidates {','.join(v['candidates'])}: {holder}")
        lines.append(f"  bindings: {'; '.join(v['bindings']) or 'none'}")
        lines.append(f"  services: {', '.join(v['services']) or 'none'}")
        lines += [f"  CONFLICT: {c}" for c in v["conflicts"]]
    lines += [f"CONFLICT: {c}" for c in report["conflicts"]]
    return "\n".join(lines) + "\n"
