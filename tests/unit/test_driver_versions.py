"""We test these aspects of the no-silent-downgrade rule (planning/drivers/driver_plan.py):

- a node's running driver is what GFD labels (`nvidia.com/cuda.driver-version.full`, else the
  older major/minor/rev triple); unknown or unparsable labels give nothing;
- with `driver.version` unset, a DaemonSet whose nodes run a newer driver than the release
  default keeps the newest running version (same image name, that version's tag and OS suffix)
  and reports `DriverNewerThanDefault` naming the nodes, both versions and the fix;
- nodes at or below the default, precompiled keys and an unknown default change nothing;
- the kept version is sticky through the existing DaemonSet's image when the labels go;
- an explicit `driver.version` (or a full `driver.image`) is never overridden, and the
  DaemonSets roll as asked (the DriverDowngrade warning covers that path);
- the rule is wired into the desired driver manifests and their status condition and Event;
- the default version of a release digest is the release table's.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.desired import driver_manifests
from ocp_gpu.model import labels, nodes, releases
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_plan
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.planning.status import policy_status
from tests.unit._drivers import V416, V417, plan, rhcos_node, ubuntu_node

DEFAULT = "570.124.06"  # tests/unit/_drivers.DRIVER's tag


def gfd(full: str) -> dict[str, str]:
    return {labels.CUDA_DRIVER_VERSION_FULL: full}


@pytest.mark.parametrize(
    ("node_labels", "expected"),
    [
        (gfd("610.40.01"), "610.40.01"),
        (
            {
                "nvidia.com/cuda.driver.major": "580",
                "nvidia.com/cuda.driver.minor": "95",
                "nvidia.com/cuda.driver.rev": "05",
            },
            "580.95.05",
        ),
        ({"nvidia.com/cuda.driver.major": "580"}, None),  # incomplete
        (gfd("not-a-version"), None),
        ({}, None),
    ],
)
def test_running_version_from_gfd_labels(node_labels: dict[str, str], expected: str | None) -> None:
    assert driver_plan.running_version(node_labels) == expected


def test_newer_nodes_keep_their_driver_and_say_so() -> None:
    base = plan(
        [rhcos_node("gpu-1", V416), rhcos_node("gpu-2", V416), rhcos_node("gpu-3", V417, openshift="4.17")]
    )
    running = {NodeName("gpu-1"): "610.40.01", NodeName("gpu-2"): "595.91.07", NodeName("gpu-3"): "550.90.07"}
    kept, found = driver_plan.plan_keep_newer(base, running, {}, DEFAULT)
    by_key = {entry.rhcos_version: entry for entry in kept.desired}
    # V416: the newest running version (610 on gpu-1), same image name, its OS suffix
    assert by_key[V416].driver_image == "nvcr.io/nvidia/driver:610.40.01-rhcos4.16"
    # V417: older than the default: it rolls to the default as planned
    planned = {entry.rhcos_version: entry for entry in base.desired}
    assert by_key[V417] == planned[V417]
    (finding,) = found
    assert (finding.daemonset, finding.nodes, finding.running, finding.default) == (
        planned[V416].name,
        ("gpu-1",),
        "610.40.01",
        DEFAULT,
    )
    assert finding.reason == "DriverNewerThanDefault"
    assert (
        "610.40.01" in finding.message and DEFAULT in finding.message and "driver.version" in finding.message
    )
    assert finding in kept.findings


def test_equal_older_or_unknown_change_nothing() -> None:
    base = plan([rhcos_node("gpu-1", V416), rhcos_node("gpu-2", V416)])
    for running in ({}, {NodeName("gpu-1"): DEFAULT}, {NodeName("gpu-1"): "550.90.07"}):
        assert driver_plan.plan_keep_newer(base, running, {}, DEFAULT) == (base, ())
    # the default's version unknown (a mirror's digest): nothing to compare with
    assert driver_plan.plan_keep_newer(base, {NodeName("gpu-1"): "610.40.01"}, {}, None) == (base, ())


def test_precompiled_keys_are_left_alone() -> None:
    base = plan([ubuntu_node("u-1")], Strategy.PRECOMPILED)
    assert driver_plan.plan_keep_newer(base, {NodeName("u-1"): "610.40.01"}, {}, "570") == (base, ())


def test_vanilla_keys_keep_their_os_suffix() -> None:
    base = plan([ubuntu_node("u-1", "22.04"), ubuntu_node("u-2", "24.04")], Strategy.VANILLA)
    kept, found = driver_plan.plan_keep_newer(base, {NodeName("u-2"): "610.40.01"}, {}, DEFAULT)
    images = sorted(entry.driver_image for entry in kept.desired)
    assert images == [
        "nvcr.io/nvidia/driver:570.124.06-ubuntu22.04",
        "nvcr.io/nvidia/driver:610.40.01-ubuntu24.04",
    ]
    assert [finding.nodes for finding in found] == [("u-2",)]


def test_the_kept_version_is_sticky_through_the_existing_daemonset() -> None:
    base = plan([rhcos_node("gpu-1", V416)])
    (entry,) = base.desired
    existing = {entry.name: "nvcr.io/nvidia/driver:610.40.01-rhcos4.16"}
    kept, found = driver_plan.plan_keep_newer(base, {}, existing, DEFAULT)
    assert kept.desired[0].driver_image == "nvcr.io/nvidia/driver:610.40.01-rhcos4.16"
    assert found[0].nodes == ("gpu-1",)  # no label says which: every node of the DaemonSet


@pytest.mark.parametrize(
    ("driver", "pinned"),
    [
        ({}, False),
        ({"repository": "mirror.example/nvidia"}, False),
        ({"version": "550.90.07"}, True),
        ({"image": "nvcr.io/nvidia/driver:550.90.07"}, True),
        ({"image": "nvcr.io/nvidia/driver@sha256:" + "a" * 64}, True),
    ],
)
def test_what_pins_the_version(driver: dict[str, Any], pinned: bool) -> None:
    policy = policy_parser.parse_policy({"driver": driver})
    assert driver_plan.is_version_pinned(policy) is pinned


def test_default_version_of_a_tag_or_a_release_digest() -> None:
    assert driver_plan.default_version("nvcr.io/nvidia/driver:595.91.07") == "595.91.07"
    assert driver_plan.default_version(releases.RELEASE_DIGESTS["DRIVER_IMAGE"]) == "595.91.07"
    assert driver_plan.default_version("mirror.example/driver@sha256:" + "0" * 64) is None


# --- wired into the desired driver manifests (what the operator applies and render prints) ------


def _facts(name: str, version: str | None) -> nodes.NodeFacts:
    node_labels = {
        labels.NFD_NVIDIA_PCI: "true",
        labels.OS_ID: "ubuntu",
        labels.OS_VERSION_ID: "22.04",
        labels.KERNEL_VERSION_FULL: "5.15.0-105-generic",
    } | (gfd(version) if version else {})
    return nodes.NodeFacts(
        name=NodeName(name),
        labels=node_labels,
        os_image="Ubuntu 22.04.4 LTS",
        kernel_version="5.15.0-105-generic",
        unschedulable=False,
        gpus=1,
    )


def _desired(spec: dict[str, Any], running: str | None) -> driver_manifests.DriverManifests:
    view = driver_manifests.DriverView(
        namespace="nvidia-gpu-operator",
        env=releases.with_release_defaults({}, by_tag=True),
        node_facts=(_facts("gpu-1", running), _facts("gpu-2", None)),
        config_map_keys={},
    )
    platform = platforms.Platform(platforms.PlatformKind.KUBERNETES, "a test")
    found = driver_manifests.desired_driver_manifests(policy_parser.parse_policy(spec), platform, view)
    assert isinstance(found, driver_manifests.DriverManifests), found
    return found


def _images(found: driver_manifests.DriverManifests) -> list[str]:
    return [
        container["image"]
        for manifest in found.manifests
        if manifest["kind"] == "DaemonSet"
        for container in manifest["spec"]["template"]["spec"]["containers"]
        if container["name"] == "nvidia-driver-ctr"
    ]


def test_unset_version_keeps_a_newer_running_driver_and_reports_it() -> None:
    found = _desired({}, "610.40.01")
    assert all(":610.40.01-" in image for image in _images(found)), _images(found)
    conditions = {c.type: c for c in policy_status.finding_conditions(found.plan)}
    condition = conditions["DriverNewerThanDefault"]
    assert (
        condition.status
        and "gpu-1" in condition.message
        and releases.DEFAULT_DRIVER.version in condition.message
    )
    assert policy_status.EVENTED["DriverNewerThanDefault"] == ("DriverNewerThanDefault", "Warning")


def test_explicit_version_rolls_as_asked() -> None:
    found = _desired({"driver": {"version": "580.95.05"}}, "610.40.01")
    assert all(":580.95.05-" in image for image in _images(found)), _images(found)
    assert "DriverNewerThanDefault" not in {c.type for c in policy_status.finding_conditions(found.plan)}


def test_nodes_at_the_default_roll_to_it() -> None:
    found = _desired({}, releases.DEFAULT_DRIVER.version)
    assert all(f":{releases.DEFAULT_DRIVER.version}-" in image for image in _images(found)), _images(found)
    assert not [c for c in policy_status.finding_conditions(found.plan) if c.type == "DriverNewerThanDefault"]


def test_status_counts_the_nodes_on_a_newer_driver() -> None:
    by_node = {NodeName("a"): gfd("610.40.01"), NodeName("b"): gfd("595.91.07"), NodeName("c"): {}}
    assert driver_plan.newer_than_default_nodes(by_node, "595.91.07") == ("a",)
    assert driver_plan.newer_than_default_nodes(by_node, None) == ()


def test_ocp_gpu_status_counts_the_nodes_kept_on_a_newer_driver() -> None:
    import dataclasses as dc

    from ocp_gpu.commands import status_command
    from ocp_gpu.model.upgrade_observations import UpgradeNode, UpgradeSnapshot
    from tests.unit import test_status_command as builders

    views = {name: builders.node_view(name) for name in ("gpu-a", "gpu-b")}
    views["gpu-a"] = dc.replace(views["gpu-a"], labels={**views["gpu-a"].labels, **gfd("610.40.01")})
    snap = UpgradeSnapshot(nodes=tuple(UpgradeNode(name=NodeName(name)) for name in views))
    report = builders.report_of(snap, views=views)
    assert report.newer_than_default == ("gpu-a",)
    assert any("1 node(s) kept on theirs (gpu-a)" in line for line in status_command.header_lines(report))
    assert status_command.report_json(report)["newer_than_default"] == ["gpu-a"]
    # an explicit driver.version rolls as asked: nothing is kept, nothing counted
    assert builders.report_of(snap, views=views, driver={"version": "580.95.05"}).newer_than_default == ()
