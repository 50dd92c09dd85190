"""Leader election decisions on a `coordination.k8s.io` Lease.

Decides, from the Lease as last read and the current time, whether this
replica may take the lease, must renew it, or must wait.  It never reads or
writes the Lease itself and never reads a clock: `kube/electing.py` does both.

The rules are client-go's leaderelection package's: a lease is free when it has
no holder or its holder has not renewed it for `lease_duration_s`.

The identity is the pod's name (issue 24): a container the kubelet restarts in the same
pod after a crash finds the Lease held by its own name and renews it at once, while a
new pod (another name) waits for the Lease to expire, as OpenShift's convention says.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping

# The operator Deployment sets it from the downward API (metadata.name): the pod's name.
POD_NAME_ENV = "POD_NAME"


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """The parts of a Lease's spec the election reads."""

    holder: str | None
    renewed_at: datetime.datetime | None
    acquired_at: datetime.datetime | None
    duration_s: int
    transitions: int


class LeaseAction(enum.StrEnum):
    CREATE = "create"  # no Lease object exists yet
    TAKE = "take"  # the Lease is free or expired: become the holder
    RENEW = "renew"  # we hold it: extend it
    WAIT = "wait"  # someone else holds a live lease


@dataclasses.dataclass(frozen=True)
class LeaseDecision:
    action: LeaseAction
    # The spec to write for CREATE/TAKE/RENEW; None for WAIT.
    record: LeaseRecord | None
    # For WAIT: when the current holder's lease expires unless renewed.
    expires_at: datetime.datetime | None = None


def lease_identity(env: Mapping[str, str], hostname: str, suffix: str) -> str:
    """Who we are in the Lease: the pod's name, stable across container restarts in the pod.

    Without $POD_NAME (a process outside a pod: a developer's shell, a test, a bench) each
    process is someone new, `<hostname>_<suffix>` with a random suffix, as client-go's
    examples do: two such processes on one machine never take each other for themselves.
    """
    pod_name = env.get(POD_NAME_ENV, "").strip()
    if pod_name:
        # in a pod: the same name after a restart, another name in another pod
        return pod_name
    # outside a pod: nothing stable to be, so never mistaken for an earlier process
    return f"{hostname}_{suffix}"


def plan_lease(
    observed: LeaseRecord | None,
    identity: str,
    now: datetime.datetime,
    lease_duration_s: int,
) -> LeaseDecision:
    """What this replica (`identity`) should do with the Lease as observed."""
    if observed is None:
        # No Lease yet: create it with us as the holder.
        return LeaseDecision(
            LeaseAction.CREATE,
            LeaseRecord(identity, now, now, lease_duration_s, 0),
        )
    if observed.holder == identity:
        # We hold it: renew, keeping the acquisition time.
        return LeaseDecision(
            LeaseAction.RENEW,
            dataclasses.replace(observed, renewed_at=now, duration_s=lease_duration_s),
        )
    expires_at = _expiry(observed)
    if observed.holder and expires_at is not None and now < expires_at:
        # Another replica holds a live lease: wait for it to expire or be released.
        return LeaseDecision(LeaseAction.WAIT, None, expires_at)
    # Released (no holder) or expired: take it over, counting the transition.
    return LeaseDecision(
        LeaseAction.TAKE,
        LeaseRecord(identity, now, now, lease_duration_s, observed.transitions + 1),
    )


def is_lease_lost(last_renewed: datetime.datetime, now: datetime.datetime, renew_deadline_s: float) -> bool:
    """True when we failed to renew for so long that another replica may already lead.

    NB: the deadline must be shorter than the lease duration, so that we stop
    acting before a standby is allowed to take over.
    """
    return (now - last_renewed).total_seconds() >= renew_deadline_s


def released(record: LeaseRecord) -> LeaseRecord:
    """The record to write when we step down voluntarily: no holder, so a standby takes over at once."""
    return dataclasses.replace(record, holder=None)


def _expiry(record: LeaseRecord) -> datetime.datetime | None:
    stamp = record.renewed_at or record.acquired_at
    if stamp is None:
        return None
    return stamp + datetime.timedelta(seconds=record.duration_s)
