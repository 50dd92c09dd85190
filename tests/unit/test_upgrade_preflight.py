"""We test these aspects of the UpgradePreflight condition (planning/upgrade_preflight), no server:

- no condition unless ClusterVersion's newest history entry is Partial (an update being applied);
- the targets are the builds the floating tags' images carry that no GPU node runs yet, each with
  its driver image for its RHEL (`-rhel9.6`, `-rhel10.1`, `-rhel9.4` for the old scheme);
- a floating tag of a stream the GPU nodes run whose image has no build tag is
  DriverToolkitTagMissing (False, and an Event once); other streams' floating tags do not count;
- the status says it, and says the Event once (planning/status).
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.model import images
from ocp_gpu.model.imagestream_tags import ImageStream, SpecTag
from ocp_gpu.planning.status import conditions, policy_status
from ocp_gpu.planning.upgrades import upgrade_preflight

ART = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
OLD9, NEW9, NEW10, LEGACY = "9.6.20250909-0", "9.6.20251021-0", "10.1.20251015-0", "416.94.202407030122-0"
IMAGE = {OLD9: ART + "1" * 64, NEW9: ART + "2" * 64, NEW10: ART + "3" * 64, LEGACY: ART + "4" * 64}
DRIVER = images.ImageRef("nvcr.io/nvidia/driver:595.91.07")


def cluster_version(state: str = "Partial", version: str = "4.20.3") -> dict[str, Any]:
    return {
        "status": {
            "desired": {"version": version},
            "history": [{"state": state, "version": version}, {"state": "Completed", "version": "4.19.9"}],
        }
    }


def stream(tags: dict[str, str], latest: str | None = None, latest_rhel_10: str | None = None) -> ImageStream:
    spec = [SpecTag(name, "DockerImage", image) for name, image in tags.items()]
    spec += [SpecTag("latest", "DockerImage", latest)] if latest else []
    spec += [SpecTag("latest-rhel-10", "DockerImage", latest_rhel_10)] if latest_rhel_10 else []
    return ImageStream(spec_tags=tuple(spec))


def test_no_condition_without_an_upgrade_in_progress() -> None:
    tags = stream({OLD9: IMAGE[OLD9], NEW9: IMAGE[NEW9]}, latest=IMAGE[NEW9])
    assert upgrade_preflight.plan_preflight(cluster_version("Completed"), tags, [OLD9], DRIVER) is None
    assert upgrade_preflight.plan_preflight(None, tags, [OLD9], DRIVER) is None
    assert upgrade_preflight.plan_preflight(cluster_version(), None, [OLD9], DRIVER) is None


def test_the_targets_of_both_streams_with_their_driver_images() -> None:
    tags = stream(
        {OLD9: IMAGE[OLD9], NEW9: IMAGE[NEW9], NEW10: IMAGE[NEW10]},
        latest=IMAGE[NEW9],
        latest_rhel_10=IMAGE[NEW10],
    )
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [OLD9, "10.1.20250901-0"], DRIVER)
    assert condition is not None and condition.status and condition.reason == "TargetReady"
    assert condition.message == (
        f"OpenShift 4.20.3: RHCOS {NEW9}: Driver Toolkit tag present, driver image "
        "nvcr.io/nvidia/driver:595.91.07-rhel9.6; "
        f"RHCOS {NEW10}: Driver Toolkit tag present, driver image nvcr.io/nvidia/driver:595.91.07-rhel10.1"
    )


def test_the_old_numbering_scheme() -> None:
    tags = stream({LEGACY: IMAGE[LEGACY]}, latest=IMAGE[LEGACY])
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, ["415.92.202402201450-0"], DRIVER)
    assert (
        condition is not None and "driver image nvcr.io/nvidia/driver:595.91.07-rhel9.4" in condition.message
    )


def test_a_floating_tag_without_a_build_tag_is_reported_before_any_node_moves() -> None:
    tags = stream({OLD9: IMAGE[OLD9]}, latest=IMAGE[NEW9])
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [OLD9], DRIVER)
    assert condition is not None and not condition.status
    assert condition.reason == "DriverToolkitTagMissing"
    assert "OpenShift 4.20.3" in condition.message and "`latest`" in condition.message


def test_another_streams_floating_tag_does_not_count() -> None:
    # only RHCOS 9 GPU nodes: latest-rhel-10's image without a build tag is none of their business
    tags = stream({OLD9: IMAGE[OLD9], NEW9: IMAGE[NEW9]}, latest=IMAGE[NEW9], latest_rhel_10=ART + "f" * 64)
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [OLD9], DRIVER)
    assert condition is not None and condition.status, condition


def test_builds_the_nodes_already_run_are_no_targets() -> None:
    tags = stream({NEW9: IMAGE[NEW9]}, latest=IMAGE[NEW9])
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [NEW9], DRIVER)
    assert condition == conditions.Condition(
        "UpgradePreflight", True, "TargetReady", "OpenShift 4.20.3: no new RHCOS build for GPU nodes"
    )


def test_a_failed_preflight_is_an_event_once() -> None:
    failed = conditions.Condition("UpgradePreflight", False, "DriverToolkitTagMissing", "the tag is missing")
    ready = conditions.Condition("UpgradePreflight", True, "TargetReady", "all there")
    first = policy_status.plan_status_events(policy_status.PolicyStatus("ready", (failed,)), set())
    assert first == [policy_status.StatusEvent("DriverToolkitTagMissing", "the tag is missing", "Warning")]
    stored = {
        "conditions": [{"type": "UpgradePreflight", "status": "False", "message": "the tag is missing"}]
    }
    again = policy_status.plan_status_events(
        policy_status.PolicyStatus("ready", (failed,)), policy_status.true_condition_messages(stored)
    )
    assert again == []
    # the good news is a condition, not a Warning
    assert policy_status.plan_status_events(policy_status.PolicyStatus("ready", (ready,)), set()) == []
