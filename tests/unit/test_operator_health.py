"""We test these aspects of planning/operator_health (NVIDIA's gauge meanings):

- the reconciliation status: -1 without a usable policy, -2 when writes failed, 1 ready, 0 waiting;
- has_nfd_labels follows NFD's kernel label on any node;
- the Driver Toolkit gauges: not requested -> all 0; the ImageStream absent or unreadable ->
  missing and enabled -1; broken -> broken but enabled; a GPU node without OSTREE_VERSION ->
  nfd_too_old and enabled -1; a version without a tag -> rhcos_tags_missing and the version named;
  an unreadable stream never calls a tag missing.
"""

from __future__ import annotations

import pytest

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverToolkitStream, ImageStreamTag, RhcosVersion, StreamState
from ocp_gpu.planning.status import operator_health
from ocp_gpu.planning.status.operator_health import ReconciliationStatus

V1, V2 = "416.94.202407030122-0", "417.94.202410090854-0"


def node(rhcos: str | None) -> dict[str, str]:
    found = {labels.NFD_NVIDIA_PCI: "true", labels.KERNEL_VERSION_FULL: "5.14.0"}
    if rhcos:
        found[labels.OSTREE_VERSION] = rhcos
    return found


def stream(state: StreamState, *versions: str) -> DriverToolkitStream:
    tags = tuple(ImageStreamTag(RhcosVersion(v), f"quay.io/dtk@sha256:{v}") for v in versions)
    return DriverToolkitStream(state, tags)


@pytest.mark.parametrize(
    ("has_policy", "spec_errors", "apply_errors", "ready", "expected"),
    [
        (False, False, False, False, ReconciliationStatus.POLICY_UNAVAILABLE),
        (True, True, True, False, ReconciliationStatus.POLICY_UNAVAILABLE),
        (True, False, True, True, ReconciliationStatus.OPERATOR_ERROR),
        (True, False, False, True, ReconciliationStatus.SUCCESS),
        (True, False, False, False, ReconciliationStatus.NOT_READY),
    ],
)
def test_reconciliation_status(
    has_policy: bool, spec_errors: bool, apply_errors: bool, ready: bool, expected: ReconciliationStatus
) -> None:
    got = operator_health.reconciliation_status(
        has_policy=has_policy, spec_errors=spec_errors, apply_errors=apply_errors, ready=ready
    )
    assert got is expected and int(got) == {1: 1, 0: 0, -1: -1, -2: -2}[int(expected)]


def test_has_nfd_labels() -> None:
    assert operator_health.has_nfd_labels([{}, node(V1)])
    assert not operator_health.has_nfd_labels([{}, {labels.NFD_NVIDIA_PCI: "true"}])
    assert not operator_health.has_nfd_labels([])


def test_not_requested_is_all_zero() -> None:
    got = operator_health.plan_driver_toolkit_gauges(
        requested=False, stream=stream(StreamState.ABSENT), gpu_node_labels=[node(None)]
    )
    assert got == operator_health.DriverToolkitGauges(0, 0, 0, 0, 0, ())


def test_every_version_tagged_is_enabled_and_clean() -> None:
    got = operator_health.plan_driver_toolkit_gauges(
        requested=True, stream=stream(StreamState.PRESENT, V1, V2), gpu_node_labels=[node(V1), node(V2)]
    )
    assert got == operator_health.DriverToolkitGauges(1, 0, 0, 0, 0, ())


def test_a_missing_tag_names_the_version() -> None:
    got = operator_health.plan_driver_toolkit_gauges(
        requested=True, stream=stream(StreamState.PRESENT, V1), gpu_node_labels=[node(V1), node(V2)]
    )
    assert (got.enabled, got.rhcos_tags_missing, got.missing_versions) == (1, 1, (V2,))


@pytest.mark.parametrize("state", [StreamState.ABSENT, StreamState.UNREADABLE])
def test_stream_absent_or_unreadable_is_missing(state: StreamState) -> None:
    got = operator_health.plan_driver_toolkit_gauges(
        requested=True, stream=stream(state), gpu_node_labels=[node(V1)]
    )
    assert (got.enabled, got.imagestream_missing, got.imagestream_broken) == (-1, 1, 0)
    # Absent: no version has a tag.  Unreadable: we cannot say.
    assert got.missing_versions == ((V1,) if state is StreamState.ABSENT else ())


def test_broken_stream_still_serves_named_tags() -> None:
    got = operator_health.plan_driver_toolkit_gauges(
        requested=True, stream=stream(StreamState.BROKEN, V1), gpu_node_labels=[node(V1)]
    )
    assert got == operator_health.DriverToolkitGauges(1, 0, 0, 1, 0, ())


def test_gpu_node_without_ostree_label_means_nfd_too_old() -> None:
    got = operator_health.plan_driver_toolkit_gauges(
        requested=True, stream=stream(StreamState.PRESENT, V1), gpu_node_labels=[node(V1), node(None)]
    )
    assert (got.enabled, got.nfd_too_old, got.rhcos_tags_missing) == (-1, 1, 0)
