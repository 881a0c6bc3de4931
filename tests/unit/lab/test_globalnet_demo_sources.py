"""What a backend of an exported ClusterIP service sees in the Globalnet matrix (``service_sources``), per CNI.

The plain lab: the client's own global source (None) with keep_client_ip, else the ingress gateway's cni0 address
(its return SNAT). An OVN lab with several active gateways: the
join address of the ingress gateway's router (its load balancers' SNAT), read from the syncer's slots in its
status file; the join addresses are written out from docs/ovn.md's slot table. An OVN lab with one active
gateway: None, the backend sees the client's own global source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from magw.lab.build.state import LabState
from magw.lab.scenarios.globalnet_demo import service_sources
from magw.lab.spec import naming
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import parse_topology

SAME = {"pod_cidr": "10.0.0.0/16", "service_cidr": "100.0.0.0/16", "workers": 1, "pods_per_node": 1}


def _state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, cni: str, multi_active: bool = True, client_ip: bool = True
) -> LabState:
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    topo = parse_topology({
        "globalnet": True, "multi_active": multi_active, "keep_client_ip": client_ip,
        "clusters": [{"id": "east", **SAME, "gateways": 3}, {"id": "west", **SAME, "gateways": 1}],
    })  # fmt: skip
    st = LabState(name="gn", topology=topo, phase="up", daemons=True, token="t", cni=cni)
    (st.dir / "status").mkdir(parents=True)
    last = {"ok": True, "slots": {"east-gw1": 1, "east-gw2": 2, "east-gw3": 3}}
    (st.dir / "status" / "ovn-syncer-east.json").write_text(json.dumps({"last_sync": last}))
    return st


def test_the_plain_lab_expects_the_client_own_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = _state(tmp_path, monkeypatch, cni="generic")
    assert service_sources(layout("gn", st.topology), st, "east") is None


def test_without_keep_client_ip_the_plain_lab_expects_the_ingress_gateways_cni_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _state(tmp_path, monkeypatch, cni="generic", client_ip=False)
    assert service_sources(layout("gn", st.topology), st, "east") == {
        "10.0.1.1": "ingress gateway east-gw1 (return SNAT)",
        "10.0.2.1": "ingress gateway east-gw2 (return SNAT)",
        "10.0.3.1": "ingress gateway east-gw3 (return SNAT)",
    }


def test_an_ovn_lab_expects_the_join_address_of_a_gateway_router(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _state(tmp_path, monkeypatch, cni="ovn")
    assert service_sources(layout("gn", st.topology), st, "east") == {
        "169.254.254.1": "gateway router of east-gw1 (load-balancer SNAT)",
        "169.254.254.3": "gateway router of east-gw2 (load-balancer SNAT)",
        "169.254.254.4": "gateway router of east-gw3 (load-balancer SNAT)",
    }
    assert service_sources(layout("gn", st.topology), st, "west") == {}  # no syncer status yet: nothing expected


def test_an_ovn_lab_with_one_active_gateway_expects_the_clients_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = _state(tmp_path, monkeypatch, cni="ovn", multi_active=False)
    assert service_sources(layout("gn", st.topology), st, "east") is None
