"""Status conditions: merging freshly decided conditions with the ones already stored.

Decides only which `lastTransitionTime` each condition carries (kept when the
status did not change, so an unchanged status is never rewritten).  No I/O.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The longest condition message we store, and the longest Event message we post.  Messages
# quote user input (a field's value, node names); a 10 KB string must not be copied whole
# into every condition and Event.
CONDITION_MESSAGE_LIMIT = 2048
EVENT_MESSAGE_LIMIT = 1024


def bounded_message(message: str, limit: int = CONDITION_MESSAGE_LIMIT) -> str:
    """`message`, cut to `limit` characters with a note of how much was left out."""
    if len(message) <= limit:
        return message
    note = f"… ({len(message) - limit} more characters)"
    return message[: max(0, limit - len(note))] + note


@dataclasses.dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    def __post_init__(self) -> None:
        # NB: bounded here, once, so a fresh message compares equal to the stored one (no
        # re-written status, no repeated Event).
        object.__setattr__(self, "message", bounded_message(self.message))


def merge_conditions(
    fresh: Iterable[Condition],
    stored: Sequence[Mapping[str, Any]],
    now: datetime.datetime,
    observed_generation: int,
) -> list[dict[str, Any]]:
    """The conditions list to store, in `fresh` order.

    A condition whose status did not flip keeps its stored lastTransitionTime;
    conditions no longer decided are dropped.
    """
    previous = {str(item.get("type")): item for item in stored}
    merged: list[dict[str, Any]] = []
    for condition in fresh:
        status = "True" if condition.status else "False"
        before = previous.get(condition.type)
        if before is not None and before.get("status") == status and before.get("lastTransitionTime"):
            # Same status as stored: the transition happened earlier.
            since = str(before["lastTransitionTime"])
        else:
            # New condition or flipped status: it transitions now.
            since = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        merged.append(
            {
                "type": condition.type,
                "status": status,
                "reason": condition.reason,
                "message": condition.message,
                "lastTransitionTime": since,
                "observedGeneration": observed_generation,
            }
        )
    return merged
