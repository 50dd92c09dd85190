"""Whether a ClusterPolicy status change is written now, or may wait a little (progress only).

While operands roll out, the status changes with every pod that turns Ready: the
OperandNotReady message (which nodes, how many more) and the driver DaemonSets'
ready counts.  Written on each change, that was ~378 status writes at 1,000 nodes
during start-up.  A change that is progress only (the policy stays notReady for the
same reasons, only the OperandNotReady message and the counts move) is written at
most once per PROGRESS_INTERVAL_S; anything else (state, a condition appearing,
flipping or changing its reason or message, a DaemonSet appearing or going, every
error) is written at once.  The admin's status stays honest: its state and reasons
are never late, its counts at most PROGRESS_INTERVAL_S, and the last change is
always written (the reconciler comes back when the interval ends).

Never does: read the clock or write anything; the caller passes the time of the last
write and now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

# The longest a progress-only change of the status waits to be written.
PROGRESS_INTERVAL_S: Final = 5.0
# The Ready reason of a policy that only waits for operand pods.
PROGRESS_REASON: Final = "OperandNotReady"
# Fields of a driverDaemonSets entry that count pods (progress); the others name the DaemonSet.
_COUNT_FIELDS: Final = frozenset({"nodes", "ready", "desired", "available", "updated"})


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(item.get("type")): item for item in status.get("conditions") or ()}


def _names(entries: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    return [
        {key: value for key, value in entry.items() if key not in _COUNT_FIELDS} for entry in entries or ()
    ]


def is_progress_only(stored: Mapping[str, Any], fresh: Mapping[str, Any]) -> bool:
    """True when `fresh` differs from `stored` only in rollout progress (see the module doc)."""
    if stored.get("state") != fresh.get("state"):
        return False
    before, after = _conditions(stored), _conditions(fresh)
    if before.keys() != after.keys():
        # A condition appeared or went.
        return False
    for kind, condition in after.items():
        old = before[kind]
        if (old.get("status"), old.get("reason")) != (condition.get("status"), condition.get("reason")):
            return False
        if kind == "Ready" and condition.get("reason") == PROGRESS_REASON:
            # Which nodes are not ready yet, and how many: progress.
            continue
        if old.get("message") != condition.get("message"):
            return False
    if _names(stored.get("driverDaemonSets")) != _names(fresh.get("driverDaemonSets")):
        # A driver DaemonSet appeared, went, or changed image: not progress.
        return False
    others = {key for key in (*stored, *fresh) if key not in ("state", "conditions", "driverDaemonSets")}
    return all(stored.get(key) == fresh.get(key) for key in others)


def write_delay(
    stored: Mapping[str, Any], fresh: Mapping[str, Any], last_write: float | None, now: float
) -> float:
    """Seconds to wait before writing `fresh` over `stored` (0: now); times in the same clock's seconds."""
    if last_write is None or not is_progress_only(stored, fresh):
        # Something an admin must see at once, or nothing written yet by this process.
        return 0.0
    return max(0.0, last_write + PROGRESS_INTERVAL_S - now)
