"""harness/openshift.uninstall_openshift_apis wakes the API server's cleanup of a deleted CRD
whose last attempt failed (an update queues it again); it leaves alone a CRD whose cleanup is
running or that is not deleted."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

from ocp_gpu_harness import openshift


class RecordingExt:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    def patch_custom_resource_definition(self, name: str, body: Any) -> None:
        self.patches.append((name, body))


def crd(deleted: bool, reason: str, annotations: dict[str, str] | None = None) -> Any:
    """A CRD as the client reads it (the attributes the nudge looks at)."""
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name="imagestreams.image.openshift.io",
            deletion_timestamp=datetime.datetime.now(datetime.UTC) if deleted else None,
            annotations=annotations,
        ),
        status=SimpleNamespace(
            conditions=[SimpleNamespace(type="Terminating", status="True", reason=reason)]
        ),
    )


def test_a_failed_cleanup_is_woken_with_a_counted_annotation() -> None:
    ext = RecordingExt()
    openshift._nudge_failed_cleanup(ext, crd(True, "InstanceDeletionFailed"))  # type: ignore[arg-type]
    openshift._nudge_failed_cleanup(ext, crd(True, "InstanceDeletionFailed", {openshift.CLEANUP_NUDGE: "1"}))  # type: ignore[arg-type]
    assert [body["metadata"]["annotations"][openshift.CLEANUP_NUDGE] for _, body in ext.patches] == ["1", "2"]


def test_a_running_cleanup_or_a_live_crd_is_left_alone() -> None:
    ext = RecordingExt()
    openshift._nudge_failed_cleanup(ext, crd(True, "InstanceDeletionInProgress"))  # type: ignore[arg-type]
    openshift._nudge_failed_cleanup(ext, crd(False, "InstanceDeletionFailed"))  # type: ignore[arg-type]
    assert ext.patches == []
