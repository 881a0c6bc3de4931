"""``magw.lab.build.ready``: a lab process that died while connectivity is awaited is named at once; an egress
probe counts only when the outside server saw the pod's VIP."""

from __future__ import annotations

from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest

from magw.lab.build import ready
from magw.lab.errors import LabError
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import load_topology
from magw.lab.verify.connectivity import TrafficTarget

EGRESS_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lab-egress-gateway.yaml"
TARGET = TrafficTarget(proto="tcp", ip=IPv4Address("10.2.1.2"), port=8080)


class Unanswered:
    ok = False
    target = TARGET


def test_a_dead_process_ends_the_wait_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds: list[int] = []

    def probe_many(plan: Any, **_kw: Any) -> dict[str, list[Unanswered]]:
        rounds.append(1)
        return {ns: [Unanswered()] for ns in plan}

    def alive() -> None:
        if len(rounds) >= 2:
            raise LabError("ovs-vswitchd on east-gw2 exited: assertion failed (log: x)")

    monkeypatch.setattr(ready, "probe_many", probe_many)
    monkeypatch.setattr(ready, "ROUND_PAUSE", 0.0)
    with pytest.raises(LabError, match="ovs-vswitchd on east-gw2 exited"):
        ready.wait_for("inter-cluster connectivity", {"ns1": [TARGET]}, lambda _s: None, timeout=60.0, alive=alive)
    assert len(rounds) == 2  # not the whole minute of lost probes


def test_without_a_death_the_timeout_names_the_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ready, "probe_many", lambda plan, **_kw: {ns: [Unanswered()] for ns in plan})
    monkeypatch.setattr(ready, "ROUND_PAUSE", 0.0)
    with pytest.raises(LabError, match=r"1/1 probes unanswered after 0s, e.g. ns1->tcp:10.2.1.2:8080"):
        ready.wait_for("x", {"ns1": [TARGET]}, lambda _s: None, timeout=0.0, alive=lambda: None)


class Answered:
    ok = True
    target = TARGET

    def __init__(self, seen_ip: str) -> None:
        self.seen_ip = seen_ip


def test_an_answer_from_another_address_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """``seen``: the outside server answered, but saw the pod's node, not its VIP (the VIP not held yet, or the
    reroute not in place): the wait goes on, and its timeout names what the server saw."""
    answers = iter(["172.17.0.101", "172.17.0.101", "172.17.0.200"])
    monkeypatch.setattr(ready, "probe_many", lambda plan, **_kw: {ns: [Answered(next(answers))] for ns in plan})
    monkeypatch.setattr(ready, "ROUND_PAUSE", 0.0)
    lines: list[str] = []
    ready.wait_for("egress", {"ns1": [TARGET]}, lines.append, timeout=60.0, seen={"ns1": "172.17.0.200"})
    assert lines == ["egress: 0/1 probes answered from the expected address",
                     "egress: 1/1 probes answered from the expected address"]  # fmt: skip
    monkeypatch.setattr(ready, "probe_many", lambda plan, **_kw: {ns: [Answered("172.17.0.101")] for ns in plan})
    why = r"1/1 probes unanswered or seen from another address after 0s, e.g. ns1->tcp:10.2.1.2:8080 \(seen as "
    with pytest.raises(LabError, match=why + r"172.17.0.101, not 172.17.0.200\)"):
        ready.wait_for("egress", {"ns1": [TARGET]}, lambda _s: None, timeout=0.0, seen={"ns1": "172.17.0.200"})


def test_the_egress_plan_probes_each_bound_pod_of_the_example_for_its_vip() -> None:
    """The oracle is examples/lab-egress-gateway.yaml's text: cart-0 (w1-p2), cart-1 (w2-p2) and pay-0 (w2-p3) are
    namespace shop's (VIP shop .200), web-0 (w1-p3) is Service blog/web's (VIP web .201); feed-0 and the default
    pods are bound to nothing and not probed. The server is the outside namespace, the underlay's .250."""
    lab = layout("t1", load_topology(EGRESS_EXAMPLE))
    plan, seen = ready.egress_plan(lab)
    shop, web = "172.17.0.200", "172.17.0.201"
    assert seen == {"t1-east-w1-p2": shop, "t1-east-w2-p2": shop, "t1-east-w2-p3": shop, "t1-east-w1-p3": web}
    assert plan == {ns: [TrafficTarget(proto="tcp", ip=IPv4Address("172.17.0.250"), port=8080)] for ns in seen}


def test_a_lab_without_an_egress_gateway_has_no_egress_plan() -> None:
    assert ready.egress_plan(layout("t1", load_topology(EGRESS_EXAMPLE.parent / "lab-globalnet.yaml"))) == ({}, {})
