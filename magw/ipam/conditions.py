"""Status conditions of the Globalnet objects: reasons, and transition times that move only on a change."""

from __future__ import annotations

from datetime import UTC, datetime

from magw.model.globalnet import ALLOCATED, UPDATED, ConditionStatus, GlobalIPStatus, GlobalnetCondition

OVERRIDDEN = "Overridden"

# Allocated
SUCCESS = "Success"
POOL_EXHAUSTED = "IPPoolAllocationFailed"
RESERVE_FAILED = "ReserveAllocatedIPsFailed"
INVALID_INPUT = "InvalidInput"
ZERO_INPUT = "ZeroInput"
INVALID_INSTANCE = "InvalidInstance"
NO_GATEWAY = "NoGatewayNode"
WAITING = "WaitingForStatuses"
# Updated
SELECTOR_UPDATE = "PodSelectorUpdateNotSupported"
# Overridden
OVERLAP = "SelectedPodsOverlap"

TRUE = ConditionStatus.TRUE
FALSE = ConditionStatus.FALSE

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def condition(
    previous: GlobalIPStatus | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> GlobalnetCondition:
    """A condition whose time is the previous one's when its status did not change."""
    old = previous.condition(type_) if previous is not None else None
    time = old.time if old is not None and old.status is status and old.time else rfc3339(now)
    return GlobalnetCondition(type=type_, status=status, reason=reason, message=message, time=time)


def allocated(
    previous: GlobalIPStatus | None, ok: bool, reason: str, message: str, now: datetime
) -> GlobalnetCondition:
    return condition(previous, ALLOCATED, TRUE if ok else FALSE, reason, message, now)


def selector_not_updated(previous: GlobalIPStatus | None, message: str, now: datetime) -> GlobalnetCondition:
    return condition(previous, UPDATED, FALSE, SELECTOR_UPDATE, message, now)
