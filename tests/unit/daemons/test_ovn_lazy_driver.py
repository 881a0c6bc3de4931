"""The route agent's lazy NB driver keeps its connection after a refused input and rebuilds it after any other
failure (a broken connection)."""

from __future__ import annotations

from typing import Any

import pytest

from magw.daemons.route_agent.ovn_host import LazyOvnDriver
from magw.drivers.ovn.nbrows import OvnInputError


class _Driver:
    def __init__(self, fail: Exception | None) -> None:
        self.fail = fail
        self.closed = False

    def observe(self) -> Any:
        if self.fail is not None:
            raise self.fail
        return "state"

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[_Driver]:
    made: list[_Driver] = []
    failures: list[Exception | None] = [OvnInputError("ovn: no Logical_Router 'ovn_cluster_router'"),
                                        ConnectionResetError("reset"), None]  # fmt: skip

    def connect(nb: str, sb: str, *, timeout: float) -> _Driver:
        made.append(_Driver(failures.pop(0)))
        return made[-1]

    import magw.drivers.ovn as ovn_pkg

    monkeypatch.setattr(ovn_pkg, "connect", connect)
    return made


def test_a_refused_input_keeps_the_connection_and_a_broken_one_is_rebuilt(connects: list[_Driver]) -> None:
    lazy = LazyOvnDriver("unix:/nb", "unix:/sb")
    with pytest.raises(OvnInputError):
        lazy.observe()
    assert len(connects) == 1 and not connects[0].closed
    connects[0].fail = ConnectionResetError("reset")
    with pytest.raises(ConnectionResetError):
        lazy.observe()
    assert connects[0].closed  # dropped: the next call connects again
    with pytest.raises(ConnectionResetError):
        lazy.observe()  # the second connection's first failure
    assert len(connects) == 2 and connects[1].closed
    assert lazy.observe() == "state" and len(connects) == 3
