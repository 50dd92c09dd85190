"""What the operator's own health metrics say (NVIDIA's gpu_operator_* gauges).

Decides the values of the reconciliation status gauge, `has_nfd_labels` and the five
`gpu_operator_openshift_driver_toolkit_*` gauges from what one pass observed and
planned, with NVIDIA's meanings (controllers/operator_metrics.go), so NVIDIA's
alerts and dashboards read the same numbers.  Never sets a metric (ocp_gpu/metrics.py
holds the collectors; the reconcilers set them) and never reads the cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverToolkitStream, StreamState


class ReconciliationStatus(enum.IntEnum):
    """`gpu_operator_reconciliation_status`, NVIDIA's four values."""

    SUCCESS = 1
    NOT_READY = 0
    # No ClusterPolicy, or one whose spec cannot be used.
    POLICY_UNAVAILABLE = -1
    # The pass raised or could not apply what it planned.
    OPERATOR_ERROR = -2


def reconciliation_status(
    *, has_policy: bool, spec_errors: bool, apply_errors: bool, ready: bool
) -> ReconciliationStatus:
    """The status gauge for one finished pass."""
    if not has_policy or spec_errors:
        # nothing to reconcile towards: the policy is missing or invalid
        return ReconciliationStatus.POLICY_UNAVAILABLE
    if apply_errors:
        # we planned writes the API refused: an error within the operator's reach
        return ReconciliationStatus.OPERATOR_ERROR
    # everything applied: ready or still waiting for pods
    return ReconciliationStatus.SUCCESS if ready else ReconciliationStatus.NOT_READY


def has_nfd_labels(node_labels: Iterable[Mapping[str, str]]) -> bool:
    """NFD's mandatory kernel label is on some node (NFD is running and labelling)."""
    return any(labels.KERNEL_VERSION_FULL in each for each in node_labels)


@dataclass(frozen=True)
class DriverToolkitGauges:
    """The five `gpu_operator_openshift_driver_toolkit_*` values and the versions without a tag."""

    enabled: int
    nfd_too_old: int
    imagestream_missing: int
    imagestream_broken: int
    rhcos_tags_missing: int
    # RHCOS versions GPU nodes run that the ImageStream has no tag for (ocp_gpu_driver_toolkit_tag_missing).
    missing_versions: tuple[str, ...] = ()


NOT_REQUESTED = DriverToolkitGauges(0, 0, 0, 0, 0)


def plan_driver_toolkit_gauges(
    *,
    requested: bool,
    stream: DriverToolkitStream,
    gpu_node_labels: Iterable[Mapping[str, str]],
) -> DriverToolkitGauges:
    """The Driver Toolkit gauges: `requested` is
    planning.drivers.driver_strategy.should_use_driver_toolkit."""
    if not requested:
        # vanilla Kubernetes, drivers disabled, precompiled, or useOpenShiftDriverToolkit: false
        return NOT_REQUESTED
    gpu_labels = list(gpu_node_labels)
    versions = {each[labels.OSTREE_VERSION] for each in gpu_labels if each.get(labels.OSTREE_VERSION)}
    # a GPU node without NFD's OSTREE_VERSION label cannot be keyed to a toolkit image
    nfd_too_old = any(not each.get(labels.OSTREE_VERSION) for each in gpu_labels)
    # absent, or unreadable: either way no image can be resolved
    missing = stream.state in (StreamState.ABSENT, StreamState.UNREADABLE)
    broken = stream.state is StreamState.BROKEN
    tagged = {str(tag.name) for tag in stream.tags if tag.image}
    # NB: with the stream absent every version lacks a tag (the imagestream gauge says why);
    # with the read failed we know nothing about tags, so none is called missing.
    without_tag = tuple(sorted(versions - tagged)) if stream.known else ()
    return DriverToolkitGauges(
        enabled=-1 if (missing or nfd_too_old) else 1,
        nfd_too_old=int(nfd_too_old),
        imagestream_missing=int(missing),
        imagestream_broken=int(broken),
        rhcos_tags_missing=int(bool(without_tag)),
        missing_versions=without_tag,
    )
