"""We test these aspects of the UpgradePreflight condition (planning/upgrade_preflight), no server:

- no condition unless ClusterVersion's newest history entry is Partial (an update being applied);
- the targets are the builds the floating tags' images carry that no GPU node runs yet, each with
  its driver image for its RHEL (`-rhel9`, `-rhel10`, `-rhcos4.16` for the old scheme);
- a floating tag of a stream the GPU nodes run whose image has no build tag is
  DriverToolkitTagMissing (False, and an Event once); other streams' floating tags do not count;
- the status says it, and says the Event once (planning/status);
- whether the driver branch supports the target OpenShift release, by the release's support
  table: a branch that does not is DriverBranchUnsupported (False) even with every tag there; a
  branch the table does not know is said, not judged.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.model import images, releases
from ocp_gpu.model.imagestream_tags import ImageStream, SpecTag
from ocp_gpu.planning.status import conditions, policy_status
from ocp_gpu.planning.upgrades import upgrade_preflight

ART = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
OLD9, NEW9, NEW10, LEGACY = "9.6.20250909-0", "9.6.20251021-0", "10.1.20251015-0", "416.94.202407030122-0"
IMAGE = {OLD9: ART + "1" * 64, NEW9: ART + "2" * 64, NEW10: ART + "3" * 64, LEGACY: ART + "4" * 64}
DRIVER = images.ImageRef("nvcr.io/nvidia/driver:595.91.07")
SUPPORTED = "driver branch 595 supports OpenShift 4.18-4.22"


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
        "nvcr.io/nvidia/driver:595.91.07-rhel9; "
        f"RHCOS {NEW10}: Driver Toolkit tag present, driver image nvcr.io/nvidia/driver:595.91.07-rhel10; "
        + SUPPORTED
    )


def test_the_old_numbering_scheme() -> None:
    tags = stream({LEGACY: IMAGE[LEGACY]}, latest=IMAGE[LEGACY])
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, ["415.92.202402201450-0"], DRIVER)
    assert condition is not None
    assert "driver image nvcr.io/nvidia/driver:595.91.07-rhcos4.16" in condition.message


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
        "UpgradePreflight",
        True,
        "TargetReady",
        f"OpenShift 4.20.3: no new RHCOS build for GPU nodes; {SUPPORTED}",
    )


def test_a_driver_branch_that_does_not_support_the_target_is_reported_before_any_node_moves() -> None:
    tags = stream({OLD9: IMAGE[OLD9], NEW9: IMAGE[NEW9]}, latest=IMAGE[NEW9])
    condition = upgrade_preflight.plan_preflight(cluster_version(version="4.23.1"), tags, [OLD9], DRIVER)
    assert condition is not None and not condition.status
    assert condition.reason == "DriverBranchUnsupported"
    assert condition.message.startswith(
        "OpenShift 4.23.1 is being applied; driver branch 595 supports OpenShift 4.18-4.22, not 4.23.1: "
        "set driver.version"
    )
    # the targets are still named: the tags are there
    assert f"RHCOS {NEW9}: Driver Toolkit tag present" in condition.message
    # a missing tag is said first (its reason), the branch beside it
    missing = stream({OLD9: IMAGE[OLD9]}, latest=IMAGE[NEW9])
    both = upgrade_preflight.plan_preflight(cluster_version(version="4.23.1"), missing, [OLD9], DRIVER)
    assert both is not None and both.reason == "DriverToolkitTagMissing" and "not 4.23.1" in both.message


def test_a_branch_the_table_does_not_know_is_said_not_judged() -> None:
    tags = stream({OLD9: IMAGE[OLD9], NEW9: IMAGE[NEW9]}, latest=IMAGE[NEW9])
    old_branch = images.ImageRef("nvcr.io/nvidia/driver:550.90.07")
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [OLD9], old_branch)
    assert condition is not None and condition.status
    assert condition.message.endswith(
        "driver branch 550 is not in this release's support table (branches 580, 595, 610)"
    )


def test_the_support_table_is_every_pinned_branch_over_the_release_range() -> None:
    assert set(releases.DRIVER_BRANCH_OPENSHIFT) == {b.branch for b in releases.DRIVER_BRANCHES}
    assert set(releases.DRIVER_BRANCH_OPENSHIFT.values()) == {("4.18", "4.22")}
    assert releases.driver_branch_support("595", "4.17.9").supported is False
    assert releases.driver_branch_support("580", "4.22.0").supported is True
    assert releases.driver_branch_of(releases.DEFAULT_DRIVER.digest) == "595"
    assert releases.openshift_range("v4.18") == ("4.18", None)
    assert releases.openshift_range("=v4.19") == ("4.19", "4.19")


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


def test_the_nodes_still_to_move_pull_their_streams_target_images() -> None:
    tags = stream(
        {OLD9: IMAGE[OLD9], NEW9: IMAGE[NEW9], NEW10: IMAGE[NEW10]},
        latest=IMAGE[NEW9],
        latest_rhel_10=IMAGE[NEW10],
    )
    old10 = "10.1.20250901-0"
    pulls = upgrade_preflight.plan_prepulls(cluster_version(), tags, [OLD9, old10, OLD9], DRIVER)
    assert pulls == (
        upgrade_preflight.PrePull("rhel9", (OLD9,), (IMAGE[NEW9], "nvcr.io/nvidia/driver:595.91.07-rhel9")),
        upgrade_preflight.PrePull(
            "rhel10", (old10,), (IMAGE[NEW10], "nvcr.io/nvidia/driver:595.91.07-rhel10")
        ),
    )
    # one RHCOS 9 node has moved: the other still pulls
    halfway = upgrade_preflight.plan_prepulls(cluster_version(), tags, [NEW9, OLD9, old10], DRIVER)
    assert [(pull.stream, pull.builds) for pull in halfway] == [("rhel9", (OLD9,)), ("rhel10", (old10,))]
    # RHCOS 9's nodes have all moved: only RHCOS 10's still pull
    moved = upgrade_preflight.plan_prepulls(cluster_version(), tags, [NEW9, old10], DRIVER)
    assert [pull.stream for pull in moved] == ["rhel10"]
    # no upgrade being applied (ClusterVersion Completed): nothing to pull
    assert upgrade_preflight.plan_prepulls(cluster_version("Completed"), tags, [OLD9], DRIVER) == ()
    # a missing build tag: no target, nothing to pull (the condition says why)
    missing = stream({OLD9: IMAGE[OLD9]}, latest=IMAGE[NEW9])
    assert upgrade_preflight.plan_prepulls(cluster_version(), missing, [OLD9], DRIVER) == ()


def test_the_prepull_daemonset_pulls_in_init_containers_on_the_nodes_still_to_move() -> None:
    from ocp_gpu.model.policy import policy_spec
    from ocp_gpu.rendering import prepull_rendering

    pull = upgrade_preflight.PrePull("rhel9", (OLD9,), (IMAGE[NEW9], "nvcr.io/nvidia/driver:595.91.07-rhel9"))
    manifest = prepull_rendering.render_prepull(pull, policy_spec.Policy(), "nvidia-gpu-operator")
    assert manifest["metadata"]["name"] == "nvidia-driver-prepull-rhel9"
    # not a driver DaemonSet: nothing that selects driver pods selects it
    assert manifest["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-driver-prepull"
    spec = manifest["spec"]
    assert spec["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "100%"
    pod = spec["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]] == list(pull.images)
    assert all(c["command"] == ["sh", "-c", "exit 0"] for c in pod["initContainers"])
    assert "priorityClassName" not in pod
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {
        "key": "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION",
        "operator": "In",
        "values": [OLD9],
    } in term["matchExpressions"]
