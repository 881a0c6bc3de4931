"""``magw.lab.build.ready.wait_for``: a lab process that died while connectivity is awaited is named at once."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

import pytest

from magw.lab.build import ready
from magw.lab.errors import LabError
from magw.lab.verify.connectivity import TrafficTarget

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
