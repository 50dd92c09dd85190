"""We test these aspects of the target build's driver DaemonSet ahead of its nodes
(planning/upgrades/upgrade_preflight.ahead_nodes, planning/drivers/driver_plan's `ahead`), no server:

- while an OpenShift upgrade is applied, each target build with its DTK tag (RHCOS 9, RHCOS 10,
  the old `4xx.9x` scheme) gets a driver DaemonSet with no nodes, its DTK image and its driver
  image for its RHEL; none without an upgrade, none for a build some node runs already (that
  one is planned from its nodes), none in vanilla or precompiled mode;
- the DaemonSet ahead is planned exactly as it is once nodes carry the build (same name, labels,
  selector, images, OPENSHIFT_VERSION), so the first node's pod is never restarted by a change;
- it is never collected while the upgrade goes on, and collected (no GPU node has its key) once
  the upgrade is abandoned.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverSnapshot, GpuNode
from ocp_gpu.model.imagestream_tags import ImageStream, SpecTag
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
        ([OLD9], image_stream(OLD9, NEW9, latest=NEW9), NEW9, "rhel9.6"),
        ([OLD10], image_stream(OLD10, NEW10, latest_rhel_10=NEW10), NEW10, "rhel10.1"),
        ([OLD_LEGACY], image_stream(OLD_LEGACY, NEW_LEGACY, latest=NEW_LEGACY), NEW_LEGACY, "rhel9.4"),
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
    assert legacy is not None and legacy.driver_os_tag == "rhel9.4" and legacy.openshift_version == "4.17"
    rhel10 = upgrade_preflight.stand_in_node(NEW10)
    assert rhel10 is not None and rhel10.driver_os_tag == "rhel10.1" and rhel10.openshift_version is None
    assert upgrade_preflight.stand_in_node("not-a-build") is None
