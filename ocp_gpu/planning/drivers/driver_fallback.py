"""Which precompiled keys fall back to a Driver Toolkit build when their image cannot be pulled.

Decides from pull failures observed by the caller (with when they were first seen), the
fallbacks already in effect (read back from DaemonSet annotations) and `now`; never reads
the clock or the cluster.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverDaemonSet, DriverKey

# --- precompiled images with a Driver Toolkit fallback --------------------------


@dataclass(frozen=True)
class PullFailure:
    """The driver pods of a precompiled key cannot pull `image`, observed since `since`."""

    key: DriverKey
    image: str
    since: datetime.datetime


@dataclass(frozen=True)
class FallbackPlan:
    """Which precompiled keys build with the Driver Toolkit, and which may soon."""

    # key -> the precompiled image that failed (feed to DriverSettings.dtk_fallback).
    keys: Mapping[DriverKey, str]
    # key -> when it falls back unless the pull starts working (requeue then).
    pending: Mapping[DriverKey, datetime.datetime]


def plan_precompiled_fallback(
    *,
    wanted: Mapping[DriverKey, str],
    failures: Iterable[PullFailure],
    current: Mapping[DriverKey, str],
    now: datetime.datetime,
    grace: datetime.timedelta,
) -> FallbackPlan:
    """Decide the per-key fallback from precompiled images to Driver Toolkit builds.

    `wanted`: the precompiled image each key with nodes would use now.
    `current`: keys already on fallback, with the image that failed (read back from the
    fallback DaemonSets' annotations, so the decision survives restarts and does not
    flap once the failing pods are gone).
    """
    keys: dict[DriverKey, str] = {}
    pending: dict[DriverKey, datetime.datetime] = {}
    for key, failed_image in current.items():
        # already on fallback and the precompiled image is still the one that failed: stay
        if wanted.get(key) == failed_image:
            keys[key] = failed_image
        # otherwise: a new driver version (retry precompiled) or no node left: drop the fallback
    for failure in failures:
        # the observation is about an image we no longer want (old version): ignore it
        if wanted.get(failure.key) != failure.image or failure.key in keys:
            continue
        deadline = failure.since + grace
        if now >= deadline:
            # failing for longer than the grace period: fall back
            keys[failure.key] = failure.image
            pending.pop(failure.key, None)
        else:
            # failing, but give the registry until the deadline (keep the earliest observation)
            pending[failure.key] = min(deadline, pending.get(failure.key, deadline))
    return FallbackPlan(keys=dict(sorted(keys.items())), pending=dict(sorted(pending.items())))


def fallbacks_in_effect(daemonsets: Iterable[DriverDaemonSet]) -> dict[DriverKey, str]:
    """The `current` input of plan_precompiled_fallback, read back from DTK fallback DaemonSets."""
    found: dict[DriverKey, str] = {}
    for daemonset in daemonsets:
        key = daemonset.annotations.get(labels.PRECOMPILED_FALLBACK_KEY)
        image = daemonset.annotations.get(labels.PRECOMPILED_FALLBACK_IMAGE)
        if key and image:
            found[DriverKey(key)] = image
    return found
