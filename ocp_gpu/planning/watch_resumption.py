"""What a watch does next: apply an event, move its resourceVersion, resume, list again, retry.

Decides, for the operator's own watch streams (kube/pod_watch.py), from one watch event or
one HTTP status: whether the event is an object to keep or forget, a bookmark (only the
resourceVersion moves), or the end of what the stream can resume (410 Gone: the version is
compacted away, so list again); whether a failed request is retried as is, after renewing
the credentials (401), or after listing again; and how long to wait before a retry.
Never does: open a connection, sleep, or parse JSON.

NB: a stream that ends cleanly (the server's timeoutSeconds, or a slow watcher closed by the
API server's watch cache) resumes from the last resourceVersion seen: one request, not a
list of every operand pod again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

# The first retry after a failure waits this long; each further one doubles it up to the cap.
FIRST_RETRY_S: Final = 0.2
MAX_RETRY_S: Final = 5.0


class Step(enum.Enum):
    KEEP = "keep"  # ADDED or MODIFIED: the object as it is now
    FORGET = "forget"  # DELETED
    BOOKMARK = "bookmark"  # nothing changed; the stream's resourceVersion moves on
    RELIST = "relist"  # 410 Gone: resume is impossible, list everything again
    RENEW = "renew"  # 401: the credentials expired; log in again, then resume
    RETRY = "retry"  # anything else: wait (retry_delay), then resume from where we were
    SKIP = "skip"  # an event type this watch does not know: ignore it, as client-go does


_TYPES: Final[Mapping[str, Step]] = {
    "ADDED": Step.KEEP,
    "MODIFIED": Step.KEEP,
    "DELETED": Step.FORGET,
    "BOOKMARK": Step.BOOKMARK,
}


def step_for_event(event: Mapping[str, Any]) -> Step:
    """What one decoded watch event asks for."""
    kind = event.get("type")
    if kind == "ERROR":
        status = event.get("object") or {}
        # NB: the API server reports an expired resourceVersion in the stream as an ERROR
        # event with a Status of code 410 (reason Expired or Gone), not as an HTTP status.
        return step_for_status(int(status.get("code") or 0))
    return _TYPES.get(str(kind), Step.SKIP)


def step_for_status(status: int) -> Step:
    """What an HTTP status (of a LIST or a WATCH request, or an ERROR event) asks for."""
    # the resourceVersion (or a list's continue token) is compacted away
    if status == 410:
        return Step.RELIST
    # the token expired or was rotated
    if status == 401:
        return Step.RENEW
    # 429 (priority and fairness), 5xx (an API server restarting), 403 (RBAC not there yet)
    return Step.RETRY


def retry_delay(failures: int) -> float:
    """Seconds to wait before the attempt after `failures` consecutive failures (1 = the first)."""
    if failures <= 0:
        return 0.0
    return float(min(FIRST_RETRY_S * 2.0 ** (failures - 1), MAX_RETRY_S))
