"""Whether the watches have delivered enough of the cluster for a pass to act on.

Decides: which watched kinds have not been listed completely once since the operator
started (no pass runs until none is left), and what a watched singleton (the
driver-toolkit ImageStream, ClusterVersion `version`, Proxy `cluster`) is to the planner:
not delivered yet, absent, or present.
Never does: watch, wait or read (the watches' views mark kinds delivered, the loops wait).

NB: `None` alone cannot tell "absent" from "not delivered yet".  A pass that took an
ImageStream not listed yet for a deleted one would report it missing and build every
driver without its Driver Toolkit image; one that took a Proxy not listed yet for none
would strip the proxy env from every driver DaemonSet (a rollout).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal


class Delivery(enum.Enum):
    """The one value a watched singleton holds before its kind has been listed once."""

    PENDING = "not delivered yet"


# The watched singleton before its kind's first complete listing.
NOT_DELIVERED: Final = Delivery.PENDING

# A watched singleton as the view holds it: its JSON, None (absent), or NOT_DELIVERED.
Singleton = Mapping[str, Any] | None | Literal[Delivery.PENDING]
# NOT_DELIVERED's type, for records converted from a singleton.
Pending = Literal[Delivery.PENDING]


def undelivered_kinds(watched: Iterable[str], delivered: Iterable[str]) -> tuple[str, ...]:
    """The watched kinds not listed completely once yet, sorted (the ones a pass waits for)."""
    return tuple(sorted(set(watched) - set(delivered)))


def is_view_complete(watched: Iterable[str], delivered: Iterable[str]) -> bool:
    """Every watched kind has been listed once: the view may be acted on."""
    return not undelivered_kinds(watched, delivered)


def is_delivered(singleton: Singleton) -> bool:
    """The singleton's kind has been listed once (its value is the object, or None for absent)."""
    return singleton is not NOT_DELIVERED


def present(singleton: Singleton) -> Mapping[str, Any] | None:
    """The singleton's JSON, or None when absent or not delivered yet (the caller has checked which)."""
    return singleton if isinstance(singleton, Mapping) else None


def settle(singleton: Singleton) -> Singleton:
    """The singleton once its kind's listing is complete: a value still pending was never listed (absent)."""
    # listed with no such object: absent
    if singleton is NOT_DELIVERED:
        return None
    # listed with the object (or deleted since): as delivered
    return singleton
