"""KubeLease: coordination.k8s.io/v1 Leases that are released on cancel (real kubernetes_asyncio against the API
server emulator), and the pure helpers others use (expiry of a Lease read from the API, lease names)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, V1Lease, V1LeaseSpec, V1ObjectMeta
from structlog.testing import capture_logs

from magw.sources.kube.lease import (
    KubeLease,
    cluster_gateway_lease_name,
    gateway_lease_name,
    globalnet_lease_name,
    lease_expired,
    micro_time,
)
from tests.support import kubeemu_fixtures

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def lease_json(holder: str | None, renew: str | None, duration: int | None = 10) -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "resourceVersion": "7"},
        "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration},
    }


# --- pure helpers -------------------------------------------------------------------------------------------


def test_lease_expired_on_json_and_on_models() -> None:
    at = T0.timestamp()
    fresh = lease_json("gw1", "2025-01-02T03:04:00.000000Z")  # renewed 5 s before T0, lasts 10 s
    assert not lease_expired(fresh, at)
    assert lease_expired(fresh, at + 5)  # renewTime + duration reached
    assert lease_expired(fresh, T0 + timedelta(seconds=6))
    assert lease_expired(lease_json(None, "2025-01-02T03:04:05.000000Z"), at)  # released
    assert lease_expired(lease_json("gw1", None), at)  # never renewed
    assert lease_expired(lease_json("gw1", "2025-01-02T03:04:00Z", None), at)  # no duration
    model = V1Lease(
        metadata=V1ObjectMeta(name="x"),
        spec=V1LeaseSpec(holder_identity="gw1", renew_time=T0 - timedelta(seconds=5), lease_duration_seconds=10),
    )
    assert not lease_expired(model, at)
    assert lease_expired(model, at + 5.001)


def test_lease_expired_reads_nanosecond_and_offset_times() -> None:
    at = T0.timestamp()
    assert not lease_expired(lease_json("gw1", "2025-01-02T03:04:00.123456789Z"), at)
    assert not lease_expired(lease_json("gw1", "2025-01-02T04:04:00.000000+01:00"), at)
    assert lease_expired(lease_json("gw1", "not a time"), at)  # unreadable: nobody can show it is held


def test_micro_time_always_has_six_fraction_digits() -> None:
    # the API server parses MicroTime with a fixed .000000 layout; isoformat() would drop a zero fraction
    assert micro_time(T0) == "2025-01-02T03:04:05.000000Z"
    assert micro_time(T0.replace(microsecond=42)) == "2025-01-02T03:04:05.000042Z"
    assert micro_time(datetime(2025, 1, 2, 3, 4, 5)) == "2025-01-02T03:04:05.000000Z"  # naive: UTC


def test_lease_names() -> None:
    assert gateway_lease_name("node-1") == "magw-gateway-node-1"
    assert cluster_gateway_lease_name() == "magw-gateway"
    assert globalnet_lease_name() == "magw-globalnet"
    with pytest.raises(ValueError, match="longer than 253"):
        gateway_lease_name("n" * 250)


@pytest.mark.parametrize(("duration", "renew"), [(0, None), (10, 8), (10, 0), (10, -1)])
def test_timing_is_checked(duration: float, renew: float | None) -> None:
    with pytest.raises(ValueError, match="lease"):
        KubeLease(object(), "ns", "l", "me", duration, renew)


def test_holding_lapses_at_four_fifths_of_the_duration() -> None:
    clock = [100.0]
    lease = KubeLease(object(), "ns", "l", "me", 10, 2, monotonic=lambda: clock[0])
    assert not lease.holding
    lease._renewed_at = 100.0
    clock[0] = 107.99
    assert lease.holding
    clock[0] = 108.0
    assert not lease.holding


# --- against the emulator, with the real client ---------------------------------------------------------------

kube, kube_env = kubeemu_fixtures.kube, kubeemu_fixtures.kube_env
NS = kubeemu_fixtures.NAMESPACE


async def read(client: ApiClient, name: str = "l") -> V1Lease:
    return await CoordinationV1Api(client).read_namespaced_lease(name, NS)


async def until(cond: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``cond()`` holds; fails after ``timeout``."""
    start = time.monotonic()
    while not cond():
        assert time.monotonic() - start < timeout, "condition not reached in time"
        await asyncio.sleep(0.01)
    return time.monotonic() - start


async def put_lease(client: ApiClient, holder: str | None, renewed_ago: float, duration: int, transitions: int) -> None:
    renew = datetime.now(UTC) - timedelta(seconds=renewed_ago)
    body = {
        "metadata": {"name": "l", "namespace": NS},
        "spec": {
            "holderIdentity": holder,
            "renewTime": micro_time(renew),
            "acquireTime": micro_time(renew),
            "leaseDurationSeconds": duration,
            "leaseTransitions": transitions,
        },
    }
    await CoordinationV1Api(client).create_namespaced_lease(NS, body)


async def test_two_electors_race_for_a_new_lease_and_exactly_one_holds(kube: Any) -> None:
    emulator, client = kube
    a, b = KubeLease(client, NS, "l", "a", 10), KubeLease(client, NS, "l", "b", 10)
    results = await asyncio.gather(a.try_acquire(), b.try_acquire())
    assert sorted(results) == [False, True]
    assert [m for m, _ in emulator.faults.log].count("POST") == 2  # both created: one got 409 AlreadyExists
    winner = "a" if results[0] else "b"
    lease = await read(client)
    assert lease.spec.holder_identity == winner
    assert (a.holding, b.holding) == (results[0], results[1])
    assert lease.spec.lease_transitions == 0
    assert lease.spec.lease_duration_seconds == 10
    # the loser keeps answering False while the winner renews
    assert await (b if winner == "a" else a).try_acquire() is False
    assert await (a if winner == "a" else b).try_acquire() is True


async def test_expired_lease_is_taken_over_and_transitions_bump(kube: Any) -> None:
    _, client = kube
    await put_lease(client, "dead", renewed_ago=3, duration=2, transitions=4)
    before = time.time()
    b = KubeLease(client, NS, "l", "b", 10)
    assert await b.try_acquire() is True
    lease = await read(client)
    assert lease.spec.holder_identity == "b"
    assert lease.spec.lease_transitions == 5
    assert lease.spec.acquire_time.timestamp() >= before - 0.001  # a new holder's acquireTime
    acquired = lease.spec.acquire_time
    assert await b.try_acquire() is True  # a renewal: same holder, same acquireTime, no transition
    again = await read(client)
    assert (again.spec.lease_transitions, again.spec.acquire_time) == (5, acquired)
    assert again.spec.renew_time > lease.spec.renew_time


async def test_live_lease_of_another_holder_is_left_alone(kube: Any) -> None:
    _, client = kube
    await put_lease(client, "alive", renewed_ago=1, duration=30, transitions=2)
    rv = (await read(client)).metadata.resource_version
    b = KubeLease(client, NS, "l", "b", 10)
    assert await b.try_acquire() is False
    assert not b.holding
    assert (await read(client)).metadata.resource_version == rv  # not even written


async def test_expired_lease_race_answers_false_on_409(kube: Any) -> None:
    """Both read the same expired lease; the one whose replace comes second carries a stale resourceVersion."""
    _, client = kube
    await put_lease(client, "dead", renewed_ago=5, duration=1, transitions=0)
    a, b = KubeLease(client, NS, "l", "a", 10), KubeLease(client, NS, "l", "b", 10)
    real_read = a._coord.read_namespaced_lease

    async def read_then_b_wins(*args: Any, **kwargs: Any) -> Any:
        seen = await real_read(*args, **kwargs)
        assert await b.try_acquire() is True  # b writes between a's read and a's replace
        return seen

    a._coord.read_namespaced_lease = read_then_b_wins
    assert await a.try_acquire() is False
    assert not a.holding
    lease = await read(client)
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("b", 1)


async def test_release_gives_up_only_our_own_lease(kube: Any) -> None:
    _, client = kube
    a, b = KubeLease(client, NS, "l", "a", 10), KubeLease(client, NS, "l", "b", 10)
    assert await a.try_acquire()
    assert await b.release() is False
    assert (await read(client)).spec.holder_identity == "a"
    assert await a.release() is True
    assert not a.holding
    lease = await read(client)
    assert lease.spec.holder_identity is None
    assert lease.spec.lease_transitions == 0
    assert await b.try_acquire() is True  # released: no need to wait for expiry
    assert (await read(client)).spec.lease_transitions == 1


async def test_cancelled_holder_releases_at_once_and_the_other_takes_over_within_one_renew_interval(
    kube: Any,
) -> None:
    _, client = kube
    renew = 0.2
    # An hour's lease: b can only hold it within the test because a released it, not because it expired.
    a, b = KubeLease(client, NS, "l", "a", 3600, renew), KubeLease(client, NS, "l", "b", 3600, renew)
    seen_a: list[bool] = []
    seen_b: list[bool] = []
    stop = asyncio.Event()
    task_a = asyncio.create_task(a.hold(stop, seen_a.append))
    await until(lambda: a.holding, 2)
    task_b = asyncio.create_task(b.hold(stop, seen_b.append))
    await asyncio.sleep(3 * renew)
    assert (a.holding, b.holding) == (True, False)
    task_a.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task_a
    assert seen_a == [True, False]
    assert (await read(client)).spec.holder_identity in (None, "b")
    await until(lambda: b.holding, 5)  # a safety net: b's next poll takes the released lease
    stop.set()
    await asyncio.wait_for(task_b, 2)
    assert seen_b == [True, False]
    assert (await read(client)).spec.holder_identity is None  # stop released too


async def test_cancel_mid_request_still_releases(kube: Any) -> None:
    """The server applied our takeover but the answer never came; the cancelled holder gives it back anyway."""
    _, client = kube
    await put_lease(client, None, renewed_ago=0, duration=10, transitions=0)
    a = KubeLease(client, NS, "l", "a", 10, 0.2)
    real_replace = a._coord.replace_namespaced_lease
    applied = asyncio.Event()

    async def replace_and_hang(*args: Any, **kwargs: Any) -> Any:
        await real_replace(*args, **kwargs)
        applied.set()
        await asyncio.Event().wait()  # the response is lost

    a._coord.replace_namespaced_lease = replace_and_hang
    task = asyncio.create_task(a.hold(asyncio.Event()))
    await asyncio.wait_for(applied.wait(), 2)
    assert (await read(client)).spec.holder_identity == "a"
    a._coord.replace_namespaced_lease = real_replace
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await read(client)).spec.holder_identity is None
    assert not a.holding


async def test_holding_turns_false_once_renewals_fail_for_four_fifths_of_the_duration(kube: Any) -> None:
    emulator, client = kube
    a = KubeLease(client, NS, "l", "a", 1, 0.2)
    changes: list[tuple[bool, bool]] = []
    stop = asyncio.Event()
    # each report with what ``holding`` said at that moment: a lapse is told once it is true, never before
    task = asyncio.create_task(a.hold(stop, lambda held: changes.append((held, a.holding))))
    await until(lambda: a.holding, 2)
    await emulator.stop()
    await until(lambda: len(changes) == 2, 5)  # safety net; the 4/5 rule itself: test_holding_lapses_at_...
    assert changes[1] == (False, False)
    assert not task.done()  # API errors are retried, never raised
    await emulator.start()
    await until(lambda: a.holding, 3)  # comes back after the outage (the lease was not taken meanwhile)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert changes == [(True, True), (False, False), (True, True), (False, False)]


async def test_api_errors_are_retried_with_backoff(kube: Any) -> None:
    emulator, client = kube
    emulator.faults.fail(4, 503)
    a = KubeLease(client, NS, "l", "a", 10, 2)
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(a.hold(stop))
        await until(lambda: a.holding, 10)  # safety net
    retries = [e["retry_in"] for e in logs if e["event"] == "kube_lease.api_error"]
    assert retries == [0.2, 0.4, 0.8, 1.6]  # 0.2 s doubling, one wait per failed request
    stop.set()
    await asyncio.wait_for(task, 2)
