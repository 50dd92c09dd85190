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
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class PolicyRef:
    """The parts of a ClusterPolicy the selection reads."""

    name: str
    created: datetime.datetime  # metadata.creationTimestamp


@dataclasses.dataclass(frozen=True)
class IgnoredPolicy:
    policy: PolicyRef
    # For the ignored policy's status: names the active policy and the way out.
    message: str


@dataclasses.dataclass(frozen=True)
class ActiveSelection:
    # None only when there is no ClusterPolicy at all.
    active: PolicyRef | None
    ignored: tuple[IgnoredPolicy, ...] = ()


def _age_order(policy: PolicyRef) -> tuple[datetime.datetime, str]:
    return policy.created, policy.name


def select_active_policy(policies: Sequence[PolicyRef]) -> ActiveSelection:
    """The active ClusterPolicy and the ignored ones (newest last)."""
    if not policies:
        # No ClusterPolicy: nothing to do until an admin creates one.
        return ActiveSelection(active=None)
    ordered = sorted(policies, key=_age_order)
    active, others = ordered[0], ordered[1:]
    # The oldest wins; every other one is ignored and told which one is in charge.
    return ActiveSelection(
        active=active,
        ignored=tuple(
            IgnoredPolicy(
                policy=other,
                message=(
                    f"ClusterPolicy {active.name!r} (created {active.created.isoformat()}) is the active "
                    f"policy; only one ClusterPolicy is used per cluster, so {other.name!r} is ignored. "
                    f"Move its settings into {active.name!r} and delete {other.name!r}."
                ),
            )
            for other in others
        ),
    )
