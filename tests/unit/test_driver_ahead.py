"""We test these aspects of the target build's driver DaemonSet ahead of its nodes
(planning/upgrades/upgrade_preflight.ahead_nodes, planning/drivers/driver_plan's `ahead`), no server:

- while an OpenShift upgrade is applied, each target build with its DTK tag (RHCOS 9, RHCOS 10,
  the old `4xx.9x` scheme) gets a driver DaemonSet with no nodes, its DTK image and its driver
  image for its RHEL; none without an upgrade, none for a build some node runs already (that
  one is planned from its nodes), none in vanilla or precompiled mode;
- the DaemonSet ahead is planned exactly as it is once nodes carry the build (same name, labels,
  selector, images, OPENSHIFT_VERSION), so the first node's pod is never restarted by a change;
- it is never collected while the upgrade goes on, and collected (no GPU node has its key) once
  the upgrade is abandoned;
- usePrecompiled: the target build's kernel comes from any node that boots it (a control-plane
  node without NFD labels too); the condition names NVIDIA's precompiled image for it
  (`<branch>-<kernel>-<os>`), the pre-pull pulls it (and no Driver Toolkit), its DaemonSet is made
  ahead selecting that kernel; while no node runs the build the condition says the image is not
  named yet, and nothing is pulled or made for it;
- an image of a target that the pre-pull pods' kubelets cannot pull (read from the pod: the
  first container waiting in a pull failure) makes the condition False (TargetImageMissing).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ocp_gpu.kube import reading
from ocp_gpu.model import images, labels
from ocp_gpu.model.driver_snapshot import DriverSnapshot, GpuNode
from ocp_gpu.model.imagestream_tags import ImageStream, SpecTag
from ocp_gpu.model.nodes import NodeFacts, NodeName
from ocp_gpu.planning.drivers import driver_plan
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.planning.upgrades import upgrade_preflight

from ._drivers import DRIVER, driver_settings, existing, stream_with

ART = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
OLD9, NEW9, NEW10, OLD10 = "9.6.20250909-0", "9.6.20251021-0", "10.1.20251015-0", "10.1.20250901-0"
OLD_LEGACY, NEW_LEGACY = "416.94.202407030122-0", "417.94.202410090854-0"
IMAGE = {b: ART + str(i) * 64 for i, b in enumerate((OLD9, NEW9, NEW10, OLD10, OLD_LEGACY, NEW_LEGACY), 1)}


def cluster_version(state: str = "Partial", version: str = "4.20.3") -> dict[str, Any]:
    return {
        "status": {
            "desired": {"version": version},
            "history": [{"state": state, "version": version}, {"state": "Completed", "version": "4.19.9"}],
        }
    }


def image_stream(*builds: str, latest: str | None = None, latest_rhel_10: str | None = None) -> ImageStream:
    spec = [SpecTag(b, "DockerImage", IMAGE[b]) for b in builds]
    spec += [SpecTag("latest", "DockerImage", IMAGE[latest])] if latest else []
    spec += [SpecTag("latest-rhel-10", "DockerImage", IMAGE[latest_rhel_10])] if latest_rhel_10 else []
    return ImageStream(spec_tags=tuple(spec))


def node_of(name: str, build: str) -> GpuNode:
    """A GPU node as NFD labels it on this build (harness/nodes' labels)."""
    rhel = upgrade_preflight.rhel_of_build(build) or ""
    found = {labels.NFD_NVIDIA_PCI: "true", labels.OSTREE_VERSION: build, labels.OS_RHEL_VERSION: rhel}
    if build.startswith("41"):
        openshift = f"4.{build[1:3]}"
        found |= {
            labels.OS_ID: "rhcos",
            labels.OS_VERSION_ID: openshift,
            labels.OS_OPENSHIFT_VERSION: openshift,
        }
    else:
        found |= {labels.OS_ID: "rhel", labels.OS_VERSION_ID: rhel}
    return GpuNode.from_labels(name, found)


def plan(
    nodes: list[GpuNode], ahead: tuple[GpuNode, ...], daemonsets: Any = (), **kw: Any
) -> driver_plan.DriverPlan:
    builds = {str(n.ostree_version) for n in nodes} | {str(n.ostree_version) for n in ahead}
    snapshot = DriverSnapshot(
        nodes=tuple(nodes), daemonsets=tuple(daemonsets), stream=stream_with(*((b, IMAGE[b]) for b in builds))
    )
    return driver_plan.plan_driver_daemonsets(snapshot, driver_settings(Strategy.DTK, **kw), ahead)


def test_no_daemonset_ahead_without_an_upgrade_in_progress() -> None:
    tags = image_stream(OLD9, NEW9, latest=NEW9)
    assert upgrade_preflight.ahead_nodes(cluster_version("Completed"), tags, [OLD9], DRIVER) == ()
    assert upgrade_preflight.ahead_nodes(None, tags, [OLD9], DRIVER) == ()
    assert upgrade_preflight.ahead_nodes(cluster_version(), None, [OLD9], DRIVER) == ()


@pytest.mark.parametrize(
    ("running", "tags", "target", "driver_tag"),
    [
        ([OLD9], image_stream(OLD9, NEW9, latest=NEW9), NEW9, "rhel9"),
        ([OLD10], image_stream(OLD10, NEW10, latest_rhel_10=NEW10), NEW10, "rhel10"),
        ([OLD_LEGACY], image_stream(OLD_LEGACY, NEW_LEGACY, latest=NEW_LEGACY), NEW_LEGACY, "rhcos4.17"),
    ],
    ids=["rhcos9", "rhcos10", "old-scheme"],
)
def test_each_target_build_gets_its_daemonset_before_its_nodes(
    running: list[str], tags: ImageStream, target: str, driver_tag: str
) -> None:
    ahead = upgrade_preflight.ahead_nodes(cluster_version(), tags, running, DRIVER)
    assert [str(n.ostree_version) for n in ahead] == [target]
    nodes = [node_of("a", running[0])]
    result = plan(nodes, ahead)
    by_build = {str(e.key): e for e in result.desired}
    assert set(by_build) == {running[0], target}
    entry = by_build[target]
    assert entry.nodes == () and entry.dtk_image == IMAGE[target] and not entry.image_missing
    assert entry.driver_image == f"{DRIVER}-{driver_tag}"
    assert entry.node_selector == {labels.OSTREE_VERSION: target}

    # the first node arrives on the target build: the same DaemonSet, now with its node
    arrived = plan([*nodes, node_of("b", target)], (), [existing(e) for e in result.desired])
    now = {str(e.key): e for e in arrived.desired}[target]
    assert now.nodes == ("b",) and now.exists
    assert dataclasses.replace(now, nodes=(), exists=False) == entry
    assert arrived.stale == ()


def test_both_streams_at_once_and_a_build_already_running_is_planned_from_its_nodes() -> None:
    tags = image_stream(OLD9, NEW9, OLD10, NEW10, latest=NEW9, latest_rhel_10=NEW10)
    ahead = upgrade_preflight.ahead_nodes(cluster_version(), tags, [OLD9, OLD10], DRIVER)
    assert sorted(str(n.ostree_version) for n in ahead) == sorted([NEW9, NEW10])
    # a node already moved to NEW9: only NEW10 is a target left
    ahead = upgrade_preflight.ahead_nodes(cluster_version(), tags, [OLD9, NEW9, OLD10], DRIVER)
    assert [str(n.ostree_version) for n in ahead] == [NEW10]
    result = plan([node_of("a", OLD9), node_of("b", NEW9), node_of("c", OLD10)], ahead)
    assert {str(e.key): e.nodes for e in result.desired} == {
        OLD9: ("a",),
        NEW9: ("b",),
        OLD10: ("c",),
        NEW10: (),
    }


def test_not_in_vanilla_or_precompiled_mode() -> None:
    ahead = upgrade_preflight.ahead_nodes(
        cluster_version(), image_stream(OLD9, NEW9, latest=NEW9), [OLD9], DRIVER
    )
    snapshot = DriverSnapshot(nodes=(node_of("a", OLD9),), stream=stream_with((OLD9, IMAGE[OLD9])))
    for strategy in (Strategy.VANILLA, Strategy.PRECOMPILED):
        result = driver_plan.plan_driver_daemonsets(snapshot, driver_settings(strategy), ahead)
        assert all(e.nodes for e in result.desired), strategy


def test_kept_while_the_upgrade_goes_on_collected_once_it_is_abandoned() -> None:
    tags = image_stream(OLD9, NEW9, latest=NEW9)
    nodes = [node_of("a", OLD9)]
    ahead = upgrade_preflight.ahead_nodes(cluster_version(), tags, [OLD9], DRIVER)
    first = plan(nodes, ahead)
    live = [existing(e) for e in first.desired]
    # the next passes of the same upgrade: nothing to collect, nothing changed
    again = plan(nodes, ahead, live)
    assert again.stale == () and [e.name for e in again.desired] == [e.name for e in first.desired]
    # the admin abandons the upgrade (ClusterVersion back to Completed on 4.19.9): collected
    abandoned = upgrade_preflight.ahead_nodes(cluster_version("Completed", "4.19.9"), tags, [OLD9], DRIVER)
    assert abandoned == ()
    after = plan(nodes, abandoned, live)
    (stale,) = after.stale
    assert stale.key == NEW9 and stale.reason == "no GPU node has this key"


def test_stand_in_nodes_carry_nfd_labels_of_their_build() -> None:
    legacy = upgrade_preflight.stand_in_node(NEW_LEGACY)
    assert legacy is not None and legacy.driver_os_tag == "rhcos4.17" and legacy.openshift_version == "4.17"
    rhel10 = upgrade_preflight.stand_in_node(NEW10)
    assert rhel10 is not None and rhel10.driver_os_tag == "rhel10" and rhel10.openshift_version is None
    assert upgrade_preflight.stand_in_node("not-a-build") is None


# --- usePrecompiled: the target build's kernel, its image name, its pre-pull and its DaemonSet ahead

PRECOMPILED = images.ImageRef("nvcr.io/nvidia/driver:595")
KERNEL_NEW9 = "5.14.0-570.49.1.el9_6.x86_64"


def control_plane_node(build: str, kernel: str) -> NodeFacts:
    """A control-plane node without NFD labels (NFD's worker does not run there): only the
    kubelet's osImage and kernel say what it boots."""
    return NodeFacts(
        name=NodeName("master-0"),
        labels={},
        os_image=f"Red Hat Enterprise Linux CoreOS {build} (Plow)",
        kernel_version=kernel,
        unschedulable=False,
        gpus=0,
    )


def test_a_build_kernel_is_known_from_any_node_that_boots_it() -> None:
    gpu = NodeFacts(
        NodeName("gpu-0"),
        {labels.OSTREE_VERSION: OLD9, labels.KERNEL_VERSION_FULL: "5.14.0-570.1.1.el9_6.x86_64"},
        "",
        "",
        False,
        1,
    )
    kernels = upgrade_preflight.kernels_of_nodes([gpu, control_plane_node(NEW9, KERNEL_NEW9)])
    assert kernels == {OLD9: "5.14.0-570.1.1.el9_6.x86_64", NEW9: KERNEL_NEW9}
    # the most common kernel of a build's nodes (a realtime pool shows its own when it boots)
    assert upgrade_preflight.build_kernels([(NEW9, "a"), (NEW9, "b"), (NEW9, "b"), ("", "c")]) == {NEW9: "b"}


def test_the_precompiled_image_of_the_target_kernel_is_named_pulled_and_its_daemonset_made_ahead() -> None:
    tags = image_stream(OLD9, NEW9, latest=NEW9)
    known = {NEW9: KERNEL_NEW9}
    image = f"nvcr.io/nvidia/driver:595-{KERNEL_NEW9}-rhel9"  # <branch>-<kernel>-<os>
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [OLD9], PRECOMPILED, kernels=known)
    assert condition is not None and condition.status
    assert f"precompiled driver image {image} (kernel {KERNEL_NEW9})" in condition.message
    # only the precompiled image is pulled: no Driver Toolkit build runs
    (pull,) = upgrade_preflight.plan_prepulls(cluster_version(), tags, [OLD9], PRECOMPILED, kernels=known)
    assert pull.images == (image,) and pull.builds == (OLD9,)
    # its DaemonSet ahead selects the kernel and OS its nodes will carry
    ahead = upgrade_preflight.ahead_nodes(cluster_version(), tags, [OLD9], PRECOMPILED, kernels=known)
    gpu_old = dataclasses.replace(node_of("a", OLD9), kernel="5.14.0-570.1.1.el9_6.x86_64")
    snapshot = DriverSnapshot(nodes=(gpu_old,), stream=stream_with((OLD9, IMAGE[OLD9]), (NEW9, IMAGE[NEW9])))
    settings = driver_settings(Strategy.PRECOMPILED)
    result = driver_plan.plan_driver_daemonsets(snapshot, settings, ahead)
    (entry,) = [e for e in result.desired if not e.nodes]
    assert entry.driver_image == f"{settings.driver_image}-{KERNEL_NEW9}-rhel9"
    assert entry.node_selector == {
        labels.OS_ID: "rhel",
        labels.OS_VERSION_ID: "9.6",
        labels.KERNEL_VERSION_FULL: KERNEL_NEW9,
    }
    # the first node arrives: the same DaemonSet
    arrived = dataclasses.replace(node_of("b", NEW9), kernel=KERNEL_NEW9)
    then = driver_plan.plan_driver_daemonsets(
        dataclasses.replace(
            snapshot, nodes=(gpu_old, arrived), daemonsets=tuple(existing(e) for e in result.desired)
        ),
        settings,
        (),
    )
    (same,) = [e for e in then.desired if e.nodes == ("b",)]
    assert dataclasses.replace(same, nodes=(), exists=False) == entry and then.stale == ()


def test_a_target_kernel_no_node_runs_yet_is_said_and_nothing_is_pulled_or_made_for_it() -> None:
    tags = image_stream(OLD9, NEW9, latest=NEW9)
    condition = upgrade_preflight.plan_preflight(cluster_version(), tags, [OLD9], PRECOMPILED, kernels={})
    assert condition is not None and "precompiled driver image not named yet" in condition.message
    assert upgrade_preflight.plan_prepulls(cluster_version(), tags, [OLD9], PRECOMPILED, kernels={}) == ()
    assert upgrade_preflight.ahead_nodes(cluster_version(), tags, [OLD9], PRECOMPILED, kernels={}) == ()


def test_an_image_the_pre_pull_cannot_pull_is_said_before_any_node_moves() -> None:
    tags = image_stream(OLD9, NEW9, latest=NEW9)
    known = {NEW9: KERNEL_NEW9}
    image = f"nvcr.io/nvidia/driver:595-{KERNEL_NEW9}-rhel9"
    condition = upgrade_preflight.plan_preflight(
        cluster_version(), tags, iter([OLD9]), PRECOMPILED, kernels=known, unpullable={image}
    )
    assert condition is not None and not condition.status and condition.reason == "TargetImageMissing"
    assert f"GPU nodes cannot pull {image} (RHCOS {NEW9})" in condition.message
    # another image failing (an old build's) is not the target's
    other = upgrade_preflight.plan_preflight(
        cluster_version(), tags, [OLD9], PRECOMPILED, kernels=known, unpullable={"elsewhere:1"}
    )
    assert other is not None and other.status


def test_a_pre_pull_pod_names_the_image_its_kubelet_cannot_pull() -> None:
    body = {
        "metadata": {"name": "nvidia-driver-prepull-rhel9-x"},
        "spec": {
            "initContainers": [
                {"name": "pull-0", "image": "dtk@sha256:1"},
                {"name": "pull-1", "image": "drv:1"},
            ],
            "containers": [{"name": "hold", "image": "drv:1"}],
        },
        "status": {
            "initContainerStatuses": [
                {"name": "pull-0", "state": {"terminated": {"exitCode": 0}}},
                {"name": "pull-1", "state": {"waiting": {"reason": "ImagePullBackOff"}}},
            ]
        },
    }
    pull = reading.prepull_pod_pull(body)
    assert pull.pull_failing and pull.image == "drv:1" and pull.strategy == reading.PREPULL_PULL
    body["status"] = {}
    assert not reading.prepull_pod_pull(body).pull_failing
