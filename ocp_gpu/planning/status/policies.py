"""Which ClusterPolicy is active when there are several.

Decides, from the ClusterPolicies' names and creation times, which one the
operator follows: the oldest (by creationTimestamp; the name breaks ties, so
two replicas always agree).  Every other one is ignored, with a message that
names the active one.  It never reads or writes a ClusterPolicy and never
looks at a spec: a newer policy cannot take over by being "better".
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence

# Sorts after every real timestamp: a policy without a readable one never wins.
_NEWEST: datetime.datetime = datetime.datetime.max.replace(tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True)
class PolicyRef:
    """The parts of a ClusterPolicy the selection reads."""

    name: str
    created: str  # metadata.creationTimestamp, RFC 3339 (e.g. 2026-11-22T01:44:44Z)
    uid: str = ""


@dataclasses.dataclass(frozen=True)
class ActiveSelection:
    # The name of the active ClusterPolicy; None only when there is none at all.
    active: str | None
    # Every other ClusterPolicy by name, with the message for its status.
    ignored: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _created(policy: PolicyRef) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(policy.created)
    except ValueError:
        return _NEWEST
    # NB: the API server always writes UTC; a naive value is taken as UTC too.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _age_order(policy: PolicyRef) -> tuple[datetime.datetime, str]:
    return _created(policy), policy.name


def select_active_policy(policies: Sequence[PolicyRef]) -> ActiveSelection:
    """The active ClusterPolicy and the ignored ones."""
    if not policies:
        # No ClusterPolicy: nothing to do until an admin creates one.
        return ActiveSelection(active=None)
    ordered = sorted(policies, key=_age_order)
    active, others = ordered[0], ordered[1:]
    # The oldest wins; every other one is ignored and told which one is in charge.
    return ActiveSelection(
        active=active.name,
        ignored={
            other.name: (
                f"ClusterPolicy {active.name!r} (created {active.created}) is the active policy; "
                f"only one ClusterPolicy is used per cluster, so {other.name!r} is ignored. "
                f"Move its settings into {active.name!r} and delete {other.name!r}."
            )
            for other in others
        },
    )
