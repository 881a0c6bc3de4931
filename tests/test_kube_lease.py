"""KubeLease: coordination.k8s.io/v1 Leases that are released on cancel (real kubernetes_asyncio against the API
server emulator), and the pure helpers others use (expiry of a Lease read from the API, lease names)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio.client import V1Lease, V1LeaseSpec, V1ObjectMeta

from magw.sources.kube.lease import (
    KubeLease,
    cluster_gateway_lease_name,
    gateway_lease_name,
    globalnet_lease_name,
    lease_expired,
    micro_time,
)

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
