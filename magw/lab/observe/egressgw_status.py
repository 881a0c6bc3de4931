"""``magw lab status``'s ``egress`` section: who holds each VIP.

Two views, side by side, because they can disagree for a moment and that is worth seeing:

- ``kernel``: the candidates whose underlay interface carries the VIP right now (``ip -j addr``), the truth of
  the datapath. Exactly one is the healthy state; none is a VIP down; two is a split brain.
- ``status``: what the ``EgressVIPStatus`` document in the broker says (with ``--control-plane kube``, the
  EgressVIP object's status in the cluster's API server): holder and since, and its port ``conflicts``, each
  shown as a ``CONFLICT:`` line, written by the controller from the agents' reports; empty while nothing reported.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from magw.lab.build.state import LabState
from magw.lab.planes.egressgw import cluster_of, egressgw_model
from magw.lab.planes.kube import cluster_api
from magw.lab.planes.kube_http import KubeHttpError
from magw.lab.spec import naming
from magw.lab.spec.layout import LabLayout

TIMEOUT = 10


def _addresses(namespace: str) -> set[str]:
    out = subprocess.run(
        ["ip", "-n", namespace, "-j", "addr", "show", "dev", naming.UNDERLAY_IF],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        return set()
    try:
        links = json.loads(out.stdout)
    except ValueError:
        return set()
    return {str(a.get("local")) for link in links for a in link.get("addr_info", []) if a.get("family") == "inet"}


def _statuses(broker_dir: Path) -> dict[str, dict[str, Any]]:
    """VIP name -> its EgressVIPStatus document, from the broker directory."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(broker_dir.glob("*.yaml")):
        try:
            text = path.read_text()
            if "EgressVIPStatus" not in text:
                continue
            docs = list(yaml.safe_load_all(text))
        except (OSError, yaml.YAMLError):
            continue
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") == "EgressVIPStatus" and isinstance(doc.get("name"), str):
                found[doc["name"]] = doc
    return found


def kernel_holders(lab: LabLayout) -> dict[str, list[str]]:
    """VIP name -> the candidates whose underlay interface has the VIP now."""
    c = cluster_of(lab)
    model = egressgw_model(lab)
    candidates = {n for v in model.vips for n in v.candidates}
    by_name = {n.name: n for n in c.nodes}
    addrs = {n: _addresses(by_name[n].namespace) for n in sorted(candidates)}
    return {v.name: [n for n in v.candidates if str(v.vip) in addrs[n]] for v in model.vips}


def _kube_statuses(st: LabState, cluster: str) -> dict[str, dict[str, Any]]:
    """VIP name -> the status of its EgressVIP object in the cluster's API server (empty when it does not answer)."""
    api = cluster_api(st, cluster)
    try:
        objs = api.http(timeout=2.0).list("EgressVIP", api.namespace)
    except KubeHttpError:
        return {}
    return {str(o["metadata"]["name"]): dict(o.get("status") or {}) for o in objs}


def status_doc(lab: LabLayout, st: LabState) -> dict[str, Any]:
    model = egressgw_model(lab)
    held = kernel_holders(lab)
    reported = _kube_statuses(st, cluster_of(lab).id) if st.kube else _statuses(st.broker_dir)
    vips = []
    for v in model.vips:
        rep = reported.get(v.name, {})
        vips.append(
            {
                "name": v.name,
                "vip": str(v.vip),
                "vrid": v.vrid,
                "candidates": list(v.candidates),
                "bindings": [str(b) for b in v.bindings],
                "kernel": held[v.name],
                "status": {k: rep.get(k) for k in ("holder", "since", "services", "conflicts") if k in rep},
            }
        )
    return {"cluster": cluster_of(lab).id, "advert_int": model.config.advert_int, "vips": vips}


def status_text(doc: dict[str, Any] | None) -> list[str]:
    if doc is None:
        return []
    lines = [f"egress gateway: cluster {doc['cluster']}, VRRP advert_int {doc['advert_int']:g} s"]
    for v in doc["vips"]:
        held = v["kernel"]
        kernel = held[0] if len(held) == 1 else ("nobody" if not held else f"SPLIT BRAIN: {', '.join(held)}")
        st = v["status"]
        if not st:
            reported = "no status yet"
        elif st.get("holder"):
            reported = f"{st['holder']} since {st.get('since') or '-'}"
        else:
            reported = "no holder reported"
        lines.append(f"  VIP {v['name']} {v['vip']} (vrid {v['vrid']}): held by {kernel}; status: {reported}")
        lines.append(f"    candidates {', '.join(v['candidates'])}; bound: {', '.join(v['bindings']) or 'nothing'}")
        lines += [f"    CONFLICT: {c}" for c in st.get("conflicts") or ()]
    return lines
