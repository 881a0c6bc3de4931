"""A sync that starts from the last one's rows (``sync_ovn(..., known=, chassis=)``), on the fake NB and on a
real ovsdb-server: it reads neither database, writes the same single transaction a full sync would, and leaves
the NB exactly as its ``known`` says. Drift is not seen by it (the full sync's job): a row deleted behind our
back makes it fail in one line, and the next full sync repairs everything."""

from __future__ import annotations

from typing import Any

import attrs

from magw.reconcile.ovndiff import ovn_diff
from magw.reconcile.ovnsync import sync_ovn
from tests.support import ovn_contract_worlds
from tests.support.ovn_contract_worlds import World
from tests.support.ovn_snapshots import east_snapshot

world = ovn_contract_worlds.world


@attrs.define
class Counting:
    """The world's driver, counting its reads of the NB and the SB."""

    inner: Any
    reads: int = 0

    def observe(self) -> Any:
        self.reads += 1
        return self.inner.observe()

    def chassis_by_hostname(self) -> dict[str, str]:
        self.reads += 1
        return dict(self.inner.chassis_by_hostname())

    def apply(self, changes: Any, plan: Any) -> Any:
        return self.inner.apply(changes, plan)


def test_a_failover_from_the_known_rows_reads_nothing_and_ends_where_a_full_sync_would(world: World) -> None:
    world.seed()
    driver = Counting(world.driver)
    first = sync_ovn(driver, east_snapshot(north=True))
    assert first.ok and first.observed and driver.reads == 2 and first.known is not None
    commits = world.commits()
    failover = sync_ovn(driver, east_snapshot(north=True, down=("gw2",)), known=first.known, chassis=first.chassis)
    assert failover.ok and not failover.observed, failover.error
    assert driver.reads == 2  # neither the NB nor the SB was read
    assert failover.changes is not None and {u.new.table for u in failover.changes.updates} == {"Logical_Router_Policy"}
    assert world.commits() == commits + 1
    assert world.driver.observe() == failover.known  # what it believes is what the NB holds
    full = sync_ovn(world.driver, east_snapshot(north=True, down=("gw2",)))
    assert full.ok and full.changes is not None and full.changes.empty


def test_drift_is_not_seen_from_the_known_rows_but_the_next_full_sync_repairs_it(world: World) -> None:
    world.seed()
    first = sync_ovn(world.driver, east_snapshot())
    assert first.ok and first.known is not None
    world.drift_delete(first.known.routes[0])
    same = sync_ovn(world.driver, east_snapshot(), known=first.known, chassis=first.chassis)
    assert same.ok and same.changes is not None and same.changes.empty  # blind to the drift, by design
    full = sync_ovn(world.driver, east_snapshot())
    assert full.ok and full.changes is not None and len(full.changes.creates) == 1
    assert ovn_diff(full.known, world.driver.observe()).empty  # type: ignore[arg-type]


def test_a_stale_known_row_fails_in_one_line_and_drops_known(world: World) -> None:
    world.seed()
    first = sync_ovn(world.driver, east_snapshot(north=True))
    assert first.ok and first.known is not None
    policy = first.known.policies[0]
    world.drift_delete(policy)  # the row the failover would update is gone
    stale = sync_ovn(world.driver, east_snapshot(north=True, down=("gw2",)), known=first.known, chassis=first.chassis)
    assert not stale.ok and stale.known is None and "\n" not in (stale.error or "")
    full = sync_ovn(world.driver, east_snapshot(north=True, down=("gw2",)))
    assert full.ok and world.driver.observe() == full.known
