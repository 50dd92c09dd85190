"""We test these aspects: which driver DaemonSets should exist and which may be deleted.

- keying: one DaemonSet per RHCOS build (DTK), per OS (vanilla), per kernel + OS (precompiled),
  with names, labels, selectors and images per strategy (named matrices: platforms × modes);
- Driver Toolkit tags: present, missing, only `latest`, only `latest-rhel-10`, broken stream,
  absent stream, unreadable stream (matrix `tag_situations`);
- findings: missing tags with versions and nodes, stale NFD labels against osImage, nodes
  without key labels, a broken or absent stream;
- GC: stale as soon as no GPU node in the view has the key, whatever the DaemonSet
  controller's counters say (pods left, misscheduled, a status older than the spec); a key
  that keeps a node (NFD lagging the reboot) keeps its DaemonSet; a key that comes back
  gets its DaemonSet again; mode switches hand nodes over before deleting;
- existing DaemonSets are identified by labels, never by names (names are reused);
- precompiled with DTK fallback (`plan_precompiled_fallback`) and its effect on the plan;
- invariants (hypothesis): a key with nodes never loses its DaemonSet, one DaemonSet per key,
  valid and stable names, order independence.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import re
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocp_gpu.model import apis, images, labels
from ocp_gpu.model.driver_snapshot import (
    DriverDaemonSet,
    DriverKey,
    DriverSnapshot,
    DriverToolkitStream,
    GpuNode,
    RhcosVersion,
    StreamState,
)
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import platforms as platform
from ocp_gpu.planning.drivers import (
    driver_fallback,
    driver_findings,
    driver_keys,
    driver_names,
    driver_plan,
    driver_strategy,
)
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from tests.unit._drivers import (
    DNS_1123_SUBDOMAIN,
    DTK_416,
    DTK_417,
    DTK_LATEST,
    FULL_STREAM,
    KERNEL_416,
    KERNEL_417,
    V416,
    V417,
    V419,
    applied,
    by_key,
    driver_settings,
    existing,
    plan,
    rhcos_node,
    stream_with,
    ubuntu_node,
)

# --- strategy selection ---------------------------------------------------------


@pytest.mark.parametrize(
    ("openshift", "use_dtk", "precompiled", "expected"),
    [
        (True, True, False, Strategy.DTK),
        (True, False, False, Strategy.VANILLA),
        (False, True, False, Strategy.VANILLA),
        (False, False, False, Strategy.VANILLA),
        (True, True, True, Strategy.PRECOMPILED),
        (False, True, True, Strategy.PRECOMPILED),
    ],
    ids=["ocp-dtk", "ocp-dtk-off", "k8s", "k8s-dtk-off", "ocp-precompiled", "k8s-precompiled"],
)
def test_select_strategy(openshift: bool, use_dtk: bool, precompiled: bool, expected: Strategy) -> None:
    detected = platform.detect_platform(
        {apis.CONFIG_GROUP, apis.IMAGE_GROUP} if openshift else {"apps", "batch"}
    )
    policy = policy_parser.parse_policy(
        {"operator": {"use_ocp_driver_toolkit": use_dtk}, "driver": {"usePrecompiled": precompiled}}
    )
    assert driver_strategy.select_strategy(detected, policy) is expected


# --- keying per strategy (named matrix) -----------------------------------------------------

# (strategy, nodes, expected {key: (name, image, node selector, nodes)})
KEYING = {
    "dtk-two-versions": (
        Strategy.DTK,
        [rhcos_node("a", V416), rhcos_node("b", V417, openshift="4.17"), rhcos_node("c", V416)],
        {
            V416: (
                f"nvidia-driver-daemonset-{V416}",
                "nvcr.io/nvidia/driver:570.124.06-rhcos4.16",
                {labels.OSTREE_VERSION: V416},
                ("a", "c"),
            ),
            V417: (
                f"nvidia-driver-daemonset-{V417}",
                "nvcr.io/nvidia/driver:570.124.06-rhcos4.17",
                {labels.OSTREE_VERSION: V417},
                ("b",),
            ),
        },
    ),
    "vanilla-two-os": (
        Strategy.VANILLA,
        [ubuntu_node("u1", "22.04"), ubuntu_node("u2", "24.04"), ubuntu_node("u3", "22.04")],
        {
            "ubuntu22.04": (
                "nvidia-driver-daemonset-ubuntu22.04",
                "nvcr.io/nvidia/driver:570.124.06-ubuntu22.04",
                {labels.OS_ID: "ubuntu", labels.OS_VERSION_ID: "22.04"},
                ("u1", "u3"),
            ),
            "ubuntu24.04": (
                "nvidia-driver-daemonset-ubuntu24.04",
                "nvcr.io/nvidia/driver:570.124.06-ubuntu24.04",
                {labels.OS_ID: "ubuntu", labels.OS_VERSION_ID: "24.04"},
                ("u2",),
            ),
        },
    ),
    "vanilla-on-openshift": (
        Strategy.VANILLA,
        [rhcos_node("a", V416), rhcos_node("b", V417)],
        {
            "rhcos4.16": (
                "nvidia-driver-daemonset-rhcos4.16",
                "nvcr.io/nvidia/driver:570.124.06-rhcos4.16",
                {labels.OS_ID: "rhcos", labels.OS_VERSION_ID: "4.16"},
                ("a", "b"),
            ),
        },
    ),
    "precompiled-ubuntu": (
        Strategy.PRECOMPILED,
        [ubuntu_node("u1"), ubuntu_node("u2", kernel="5.15.0-106-generic")],
        {
            "5.15.0-105-generic-ubuntu22.04": (
                "nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04",
                "nvcr.io/nvidia/driver:570-5.15.0-105-generic-ubuntu22.04",
                {
                    labels.OS_ID: "ubuntu",
                    labels.OS_VERSION_ID: "22.04",
                    labels.KERNEL_VERSION_FULL: "5.15.0-105-generic",
                },
                ("u1",),
            ),
            "5.15.0-106-generic-ubuntu22.04": (
                "nvidia-driver-daemonset-5.15.0-106-generic-ubuntu22.04",
                "nvcr.io/nvidia/driver:570-5.15.0-106-generic-ubuntu22.04",
                {
                    labels.OS_ID: "ubuntu",
                    labels.OS_VERSION_ID: "22.04",
                    labels.KERNEL_VERSION_FULL: "5.15.0-106-generic",
                },
                ("u2",),
            ),
        },
    ),
    "precompiled-rhcos": (
        Strategy.PRECOMPILED,
        [rhcos_node("a", V416)],
        {
            f"{KERNEL_416}-rhcos4.16": (
                "nvidia-driver-daemonset-5.14.0-427.22.1.el9-4.x86-64-rhcos4.16",
                f"nvcr.io/nvidia/driver:570-{KERNEL_416}-rhcos4.16",
                {
                    labels.OS_ID: "rhcos",
                    labels.OS_VERSION_ID: "4.16",
                    labels.KERNEL_VERSION_FULL: KERNEL_416,
                },
                ("a",),
            ),
        },
    ),
}
keying_cases = pytest.mark.parametrize(("strategy", "nodes", "expected"), KEYING.values(), ids=KEYING.keys())


@keying_cases
def test_one_daemonset_per_key(strategy: Strategy, nodes: list[GpuNode], expected: dict[str, Any]) -> None:
    result = plan(nodes, strategy)
    got = {
        entry.key: (entry.name, entry.driver_image, dict(entry.node_selector), entry.nodes)
        for entry in result.desired
    }
    assert got == expected
    assert result.stale == ()


@keying_cases
def test_identity_labels_and_selector(
    strategy: Strategy, nodes: list[GpuNode], expected: dict[str, Any]
) -> None:
    for entry in plan(nodes, strategy).desired:
        key_value = driver_names.key_label_value(entry.key)
        if strategy is Strategy.DTK:
            # NVIDIA's (transformOpenShiftDriverToolkitContainer, v26.7.0): its DaemonSet updates in place
            assert entry.selector == {labels.APP: entry.name}
        else:
            assert entry.selector == {
                labels.APP: labels.DRIVER_APP,
                labels.DRIVER_STRATEGY: strategy.value,
                labels.DRIVER_KEY: key_value,
            }
        assert entry.labels[labels.DRIVER_STRATEGY] == strategy.value
        assert entry.labels[labels.DRIVER_KEY] == key_value
        assert entry.labels[labels.PRECOMPILED] == ("true" if strategy is Strategy.PRECOMPILED else "false")
        is_dtk = strategy is Strategy.DTK
        assert (labels.DTK_DAEMONSET in entry.labels) == is_dtk
        assert (entry.labels.get(labels.DTK_RHCOS) == entry.key) == is_dtk
        assert (entry.dtk_image is not None) == is_dtk
        assert (entry.rhcos_version is not None and entry.rhcos_version == str(entry.key)) == is_dtk
        assert driver_keys.identify_daemonset(existing(entry)) == (strategy, key_value)


def test_openshift_419_rhel_based_rhcos() -> None:
    node = GpuNode.from_labels(
        "n",
        {labels.OSTREE_VERSION: V419, labels.OS_ID: "rhel", labels.OS_VERSION_ID: "9.6"},
        os_image=f"Red Hat Enterprise Linux CoreOS {V419} (Plow)",
    )
    result = plan([node], stream=stream_with((V419, DTK_416)))
    (entry,) = result.desired
    assert entry.name == f"nvidia-driver-daemonset-{V419}"
    assert entry.driver_image == "nvcr.io/nvidia/driver:570.124.06-rhel9"
    assert entry.dtk_image == DTK_416
    assert result.findings == ()


def test_openshift_version_comes_from_the_nodes() -> None:
    entries = by_key(plan([rhcos_node("a", V416), rhcos_node("b", V417, openshift="4.17")]))
    assert entries[V416].openshift_version == "4.16"
    assert entries[V417].openshift_version == "4.17"
    assert by_key(plan([ubuntu_node("u")], Strategy.VANILLA))["ubuntu22.04"].openshift_version is None


def test_rhcos_without_rhel_version_uses_its_own_os_tag() -> None:
    node = GpuNode.from_labels(
        "old", {labels.OSTREE_VERSION: V416, labels.OS_ID: "rhcos", labels.OS_VERSION_ID: "4.16"}
    )
    (entry,) = plan([node]).desired
    assert entry.driver_image == "nvcr.io/nvidia/driver:570.124.06-rhcos4.16"


def test_digest_pinned_driver_image_is_used_everywhere() -> None:
    pinned = images.ImageRef("nvcr.io/nvidia/driver@sha256:" + "c" * 64)
    result = plan([ubuntu_node("u1"), ubuntu_node("u2", "24.04")], Strategy.VANILLA, driver_image=pinned)
    assert {entry.driver_image for entry in result.desired} == {pinned}


def test_no_gpu_nodes_no_daemonsets() -> None:
    assert plan([]) == driver_plan.DriverPlan((), (), ())


# --- Driver Toolkit tag situations (named matrix) ------------------------------------

# (stream, expected dtk image for V416 or None when missing, expected stream finding state or None)
TAG_SITUATIONS = {
    "tag-present": (stream_with((V416, DTK_416)), DTK_416, None),
    "tag-missing": (stream_with((V417, DTK_417)), None, None),
    "latest-only": (
        # what the resolver leaves of a stream holding only `latest`: nothing
        stream_with(),
        None,
        None,
    ),
    "latest-rhel-10-only": (stream_with(), None, None),
    "broken-with-tag": (
        stream_with((V416, DTK_416), state=StreamState.BROKEN),
        DTK_416,
        StreamState.BROKEN,
    ),
    "broken-without-tag": (stream_with(state=StreamState.BROKEN), None, StreamState.BROKEN),
    "absent-stream": (DriverToolkitStream(StreamState.ABSENT, reason="gone"), None, StreamState.ABSENT),
}
tag_situations = pytest.mark.parametrize(
    ("stream", "image", "problem"), TAG_SITUATIONS.values(), ids=TAG_SITUATIONS.keys()
)


@tag_situations
def test_dtk_tag_situations(
    stream: DriverToolkitStream, image: str | None, problem: StreamState | None
) -> None:
    result = plan([rhcos_node("n1"), rhcos_node("n2")], stream=stream)
    (entry,) = result.desired
    # the DaemonSet exists either way: a missing tag never leaves the version without one
    assert entry.name == f"nvidia-driver-daemonset-{V416}"
    assert entry.dtk_image == image
    assert entry.image_missing == (image is None)
    assert (entry.labels.get(labels.DTK_IMAGE_MISSING) == "true") == (image is None)
    missing = result.findings_of(driver_findings.MissingDriverToolkitTag)
    if image is None:
        assert missing == (
            driver_findings.MissingDriverToolkitTag(RhcosVersion(V416), (NodeName("n1"), NodeName("n2"))),
        )
        assert V416 in missing[0].message and "n1, n2" in missing[0].message
    else:
        assert missing == ()
    problems = result.findings_of(driver_findings.DriverToolkitStreamProblem)
    assert [p.state for p in problems] == ([problem] if problem else [])


@pytest.mark.parametrize("floating", ["latest", "latest-rhel-10"])
def test_floating_tags_never_serve_a_version(floating: str) -> None:
    from ocp_gpu.kube import reading
    from ocp_gpu.planning.drivers import dtk_images

    body = {"spec": {"tags": [{"name": floating, "from": {"kind": "DockerImage", "name": DTK_LATEST}}]}}
    result = plan(
        [rhcos_node("n")], stream=dtk_images.resolve_driver_toolkit_stream(reading.image_stream(body))
    )
    (entry,) = result.desired
    assert entry.image_missing and entry.dtk_image is None
    assert DTK_LATEST not in repr(result)


def test_tag_appearing_updates_the_daemonset() -> None:
    nodes = [rhcos_node("n")]
    before = applied(nodes, Strategy.DTK, stream=stream_with())
    (entry,) = plan(nodes, daemonsets=before, stream=FULL_STREAM).desired
    assert entry.exists and not entry.image_missing and entry.dtk_image == DTK_416
    assert labels.DTK_IMAGE_MISSING not in entry.labels


def test_unreadable_stream_keeps_what_runs() -> None:
    nodes = [rhcos_node("a", V416), rhcos_node("b", V417)]
    running = applied([nodes[0]], Strategy.DTK)
    result = plan(nodes, daemonsets=running, stream=DriverToolkitStream(StreamState.UNREADABLE, reason="503"))
    (entry,) = result.desired
    # the existing version keeps its DTK image; the new one waits for a readable stream
    assert entry.key == V416 and entry.dtk_image == DTK_416 and not entry.image_missing
    (deferred,) = result.findings_of(driver_findings.DeferredDaemonSet)
    assert deferred.key == V417 and deferred.nodes == ("b",)
    # a failed read is not a missing tag
    assert result.findings_of(driver_findings.MissingDriverToolkitTag) == ()
    assert result.findings_of(driver_findings.DriverToolkitStreamProblem)[0].state is StreamState.UNREADABLE


def test_unreadable_stream_keeps_a_missing_image_missing() -> None:
    nodes = [rhcos_node("a")]
    running = applied(nodes, Strategy.DTK, stream=stream_with())
    (entry,) = plan(nodes, daemonsets=running, stream=DriverToolkitStream(StreamState.UNREADABLE)).desired
    assert entry.image_missing and entry.labels[labels.DTK_IMAGE_MISSING] == "true"


def test_stream_problems_do_not_matter_without_dtk() -> None:
    result = plan([ubuntu_node("u")], Strategy.VANILLA, stream=DriverToolkitStream(StreamState.ABSENT))
    assert result.findings == ()


# --- node findings ----------------------------------------------------------------------


def test_stale_nfd_label_is_reported_and_the_label_still_keys() -> None:
    result = plan([rhcos_node("n", V416, running=V417)])
    (finding,) = result.findings_of(driver_findings.StaleNfdLabel)
    assert finding == driver_findings.StaleNfdLabel(NodeName("n"), RhcosVersion(V416), RhcosVersion(V417))
    assert V416 in finding.message and V417 in finding.message and "n" in finding.message
    # the DaemonSet selector is the NFD label: it is what the DaemonSet controller matches on
    assert [entry.key for entry in result.desired] == [V416]


@pytest.mark.parametrize(
    "os_image",
    [
        f"Red Hat Enterprise Linux CoreOS {V416} (Plow)",
        f"Red Hat Enterprise Linux CoreOS {V416}",
        "Ubuntu 22.04.4 LTS",
        "",
    ],
    ids=["rhcos-match", "no-codename", "ubuntu", "empty"],
)
def test_no_stale_label_finding_without_a_mismatch(os_image: str) -> None:
    node = dataclasses.replace(rhcos_node("n"), os_image=os_image)
    assert plan([node]).findings_of(driver_findings.StaleNfdLabel) == ()


def test_os_image_parsing() -> None:
    from ocp_gpu.model.driver_snapshot import rhcos_version_from_os_image

    assert rhcos_version_from_os_image("Red Hat Enterprise Linux CoreOS 416.94.202407030122-0 (Plow)") == V416
    assert rhcos_version_from_os_image("Red Hat Enterprise Linux CoreOS 9.6.20250909-0 (Plow)") == V419
    assert rhcos_version_from_os_image("Red Hat Enterprise Linux 9.4 (Plow)") is None


MISSING_LABELS = {
    "dtk-no-nfd": (
        Strategy.DTK,
        rhcos_node("n", nfd=False),
        (labels.OSTREE_VERSION, labels.OS_ID, labels.OS_VERSION_ID),
    ),
    "vanilla-no-nfd": (Strategy.VANILLA, rhcos_node("n", nfd=False), (labels.OS_ID, labels.OS_VERSION_ID)),
    "precompiled-no-kernel": (
        Strategy.PRECOMPILED,
        GpuNode.from_labels("n", {labels.OS_ID: "ubuntu", labels.OS_VERSION_ID: "22.04"}),
        (labels.KERNEL_VERSION_FULL,),
    ),
    "dtk-only-ostree": (
        Strategy.DTK,
        GpuNode.from_labels("n", {labels.OSTREE_VERSION: V416}),
        (labels.OS_ID, labels.OS_VERSION_ID),
    ),
}


@pytest.mark.parametrize(("strategy", "node", "missing"), MISSING_LABELS.values(), ids=MISSING_LABELS.keys())
def test_nodes_lacking_key_labels(strategy: Strategy, node: GpuNode, missing: tuple[str, ...]) -> None:
    result = plan([node, rhcos_node("ok")], strategy)
    (finding,) = result.findings_of(driver_findings.NodeMissingKeyLabels)
    assert finding == driver_findings.NodeMissingKeyLabels(NodeName("n"), strategy, missing)
    assert all("n" not in entry.nodes for entry in result.desired)


def test_empty_label_values_count_as_missing() -> None:
    node = GpuNode.from_labels(
        "n", {labels.OSTREE_VERSION: "", labels.OS_ID: "rhcos", labels.OS_VERSION_ID: "4.16"}
    )
    assert node.ostree_version is None
    assert driver_keys.missing_key_labels(node, Strategy.DTK) == (labels.OSTREE_VERSION,)


# --- names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        V416,
        "ubuntu22.04",
        f"{KERNEL_416}-rhcos4.16",
        "5.15.0-1045-azure-fips-with-a-very-long-flavour-name-ubuntu22.04",
        "6.1.0+rt7-Custom_Kernel-debian12",
        "-.-",
        "",
        "a" * 300,
    ],
)
def test_names_are_valid_and_stable(key: str) -> None:
    name = driver_names.daemonset_name(DriverKey(key))
    assert len(name) <= 63
    assert DNS_1123_SUBDOMAIN.match(name), name
    assert name.startswith("nvidia-driver-daemonset-")
    assert driver_names.daemonset_name(DriverKey(key)) == name


def test_long_keys_sharing_a_prefix_get_distinct_names() -> None:
    prefix = "5.15.0-1045-azure-fips-with-a-very-long-flavour-name"
    first = driver_names.daemonset_name(DriverKey(prefix + "-ubuntu22.04"))
    second = driver_names.daemonset_name(DriverKey(prefix + "-ubuntu24.04"))
    assert first != second
    assert re.search(r"-[0-9a-f]{8}$", first)


@pytest.mark.parametrize("key", [V416, "x" * 70, "a+b c", "_lead", f"{KERNEL_416}-rhcos4.16"])
def test_key_label_values_are_valid(key: str) -> None:
    value = driver_names.key_label_value(DriverKey(key))
    assert len(value) <= 63
    assert re.match(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", value)
    assert value
    if len(key) <= 63 and key[0].isalnum() and " " not in key and "+" not in key:
        assert value == key


def test_a_name_taken_by_another_key_is_not_reused() -> None:
    # Two keys that sanitise to the same name: x86_64 and x86-64.
    one = ubuntu_node("u1", kernel="5.15.0-x86_64")
    two = ubuntu_node("u2", kernel="5.15.0-x86-64")
    result = plan([one, two], Strategy.PRECOMPILED)
    names = [entry.name for entry in result.desired]
    assert len(set(names)) == 2
    assert all(DNS_1123_SUBDOMAIN.match(n) and len(n) <= 63 for n in names)


def test_an_existing_name_belongs_to_its_key() -> None:
    one = ubuntu_node("u1", kernel="5.15.0-x86_64")
    two = ubuntu_node("u2", kernel="5.15.0-x86-64")
    # only the x86-64 key existed so far, under the shared name
    (entry,) = plan([two], Strategy.PRECOMPILED).desired
    result = plan([one, two], Strategy.PRECOMPILED, daemonsets=[existing(entry)])
    entries = by_key(result)
    assert entries["5.15.0-x86-64-ubuntu22.04"].name == entry.name
    assert entries["5.15.0-x86_64-ubuntu22.04"].name != entry.name


def test_existing_daemonsets_are_found_by_labels_not_names() -> None:
    nodes = [rhcos_node("n")]
    (entry,) = plan(nodes).desired
    renamed = existing(entry, name="driver-made-by-an-older-release")
    result = plan(nodes, daemonsets=[renamed])
    (kept,) = result.desired
    assert kept.name == "driver-made-by-an-older-release" and kept.exists
    assert result.stale == ()


def test_a_daemonset_named_like_ours_without_our_labels_is_not_ours() -> None:
    nodes = [rhcos_node("n")]
    (entry,) = plan(nodes).desired
    impostor = DriverDaemonSet(name=entry.name, labels={labels.MANAGED_BY: labels.MANAGED_BY_VALUE})
    result = plan(nodes, daemonsets=[impostor])
    assert result.stale == ()
    assert result.findings_of(driver_findings.UnidentifiedDaemonSet) == (
        driver_findings.UnidentifiedDaemonSet(entry.name),
    )


def test_dtk_daemonsets_from_labels_alone_are_identified() -> None:
    legacy = DriverDaemonSet(
        name="nvidia-driver-daemonset-old",
        labels={labels.DTK_DAEMONSET: "true", labels.DTK_RHCOS: V416},
    )
    assert driver_keys.identify_daemonset(legacy) == (Strategy.DTK, V416)


# --- garbage collection ----------------------------------------------------------------


def gone(strategy: Strategy = Strategy.DTK, **counters: Any) -> DriverDaemonSet:
    """A DaemonSet for a 4.17 node that no longer exists."""
    (entry,) = plan([rhcos_node("old", V417, openshift="4.17", kernel=KERNEL_417)], strategy).desired
    return existing(entry, **counters)


# The DaemonSet controller's counters for a DaemonSet none of whose nodes carries its key any more.
GC_CASES = {
    "no-pods": {"desired": 0},
    "pods-still-counted": {"desired": 1},
    "misscheduled": {"desired": 0, "misscheduled": 1},
    "status-older-than-spec": {"desired": 2, "misscheduled": 1, "current_status": False},
}


@pytest.mark.parametrize("counters", GC_CASES.values(), ids=GC_CASES.keys())
@pytest.mark.parametrize("strategy", list(Strategy))
def test_gc_of_a_key_no_node_has_decides_from_the_nodes(strategy: Strategy, counters: dict[str, Any]) -> None:
    # NB: any pod it still has runs on a node that left its key: misscheduled, deleted by the
    # DaemonSet controller anyway, so the counters are not waited for.
    old = gone(strategy, **counters)
    result = plan([rhcos_node("n", V416)], strategy, daemonsets=[old])
    assert [(s.name, s.superseded) for s in result.stale] == [(old.name, False)]


def test_a_key_that_comes_back_gets_its_daemonset_again() -> None:
    # The DaemonSet was deleted as its last node left; the node returns to the key before the
    # watch reported the deletion, or after: either way the key is desired, never stale.
    old = gone()
    back = rhcos_node("old", V417, openshift="4.17", kernel=KERNEL_417)
    while_deleting = plan([back], daemonsets=[old])
    assert [(d.name, d.exists) for d in while_deleting.desired] == [(old.name, True)]
    assert while_deleting.stale == ()
    after = plan([back])
    assert [(d.name, d.exists) for d in after.desired] == [(old.name, False)]


def test_nfd_lagging_a_reboot_keeps_the_old_key_and_its_daemonset() -> None:
    # The node already runs 4.17 but NFD still labels 4.16: it carries 4.16, its DaemonSet stays.
    cluster = applied([rhcos_node("a", V416)], Strategy.DTK)
    lagging = rhcos_node("a", V416, running=V417)
    result = plan([lagging], daemonsets=cluster)
    assert result.stale == ()
    assert [entry.key for entry in result.desired] == [V416]
    assert [f.node for f in result.findings_of(driver_findings.StaleNfdLabel)] == ["a"]


def test_a_node_without_key_labels_keeps_no_daemonset() -> None:
    # NFD dropped the node's OS labels: the DaemonSet's selector no longer matches it either.
    cluster = applied([rhcos_node("a", V416)], Strategy.DTK)
    result = plan([rhcos_node("a", nfd=False)], daemonsets=cluster)
    assert [s.name for s in result.stale] == [cluster[0].name]
    assert [f.node for f in result.findings_of(driver_findings.NodeMissingKeyLabels)] == ["a"]


def test_a_key_with_nodes_is_never_stale_even_with_odd_counters() -> None:
    nodes = [rhcos_node("n")]
    (entry,) = plan(nodes).desired
    result = plan(nodes, daemonsets=[existing(entry, desired=0, misscheduled=3)])
    assert result.stale == ()


def test_upgrade_walkthrough() -> None:
    """A cluster upgrade from 4.16 to 4.17, node by node, as the blog describes."""
    a, b = rhcos_node("a", V416), rhcos_node("b", V416)
    cluster = applied([a, b], Strategy.DTK)
    # a reboots into 4.17: the new version's DaemonSet appears at once, 4.16's stays
    a = rhcos_node("a", V417)
    step = plan([a, b], daemonsets=cluster)
    assert [entry.key for entry in step.desired] == [V416, V417] and step.stale == ()
    # b follows: the 4.16 DaemonSet goes at once, though the controller still counts b's old pod
    b = rhcos_node("b", V417)
    old = next(d for d in cluster if d.labels[labels.DTK_RHCOS] == V416)
    old = dataclasses.replace(old, desired_number_scheduled=0, number_misscheduled=1)
    new = existing(plan([a, b]).desired[0])
    step = plan([a, b], daemonsets=[old, new])
    assert [s.name for s in step.stale] == [old.name]


# --- mode switches: hand nodes over before deleting --------------------------------------

# (from strategy, to strategy, nodes)
SWITCHES = {
    "vanilla-to-precompiled": (
        Strategy.VANILLA,
        Strategy.PRECOMPILED,
        [ubuntu_node("u1"), ubuntu_node("u2")],
    ),
    "precompiled-to-vanilla": (
        Strategy.PRECOMPILED,
        Strategy.VANILLA,
        [ubuntu_node("u1"), ubuntu_node("u2")],
    ),
    "dtk-off": (Strategy.DTK, Strategy.VANILLA, [rhcos_node("a", V416), rhcos_node("b", V417)]),
    "dtk-on": (Strategy.VANILLA, Strategy.DTK, [rhcos_node("a", V416), rhcos_node("b", V417)]),
    "dtk-to-precompiled": (
        Strategy.DTK,
        Strategy.PRECOMPILED,
        [rhcos_node("a", V416), rhcos_node("b", V417, kernel=KERNEL_417)],
    ),
    "precompiled-to-dtk": (
        Strategy.PRECOMPILED,
        Strategy.DTK,
        [rhcos_node("a", V416), rhcos_node("b", V417, kernel=KERNEL_417)],
    ),
}
switches = pytest.mark.parametrize(("before", "after", "nodes"), SWITCHES.values(), ids=SWITCHES.keys())


@switches
def test_switch_keeps_the_old_daemonsets_until_the_new_ones_exist(
    before: Strategy, after: Strategy, nodes: list[GpuNode]
) -> None:
    old = applied(nodes, before)
    result = plan(nodes, after, daemonsets=old)
    assert {entry.strategy for entry in result.desired} == {after}
    assert result.stale == ()
    waiting = result.findings_of(driver_findings.WaitingForHandover)
    assert sorted(w.daemonset for w in waiting) == sorted(d.name for d in old)


@switches
@pytest.mark.parametrize(
    "not_ready",
    [{"current_status": False}, {"scheduled": 0}],
    ids=["status-not-observed", "pods-not-created"],
)
def test_switch_waits_for_every_new_daemonset_to_schedule(
    before: Strategy, after: Strategy, nodes: list[GpuNode], not_ready: dict[str, Any]
) -> None:
    old = applied(nodes, before)
    new = applied(nodes, after)
    # one new DaemonSet lags: the old DaemonSets serving its nodes stay
    lagging = [existing(entry, **not_ready) for entry in plan(nodes, after).desired[:1]]
    result = plan(nodes, after, daemonsets=old + lagging + new[1:])
    lagging_nodes = set(plan(nodes, after).desired[0].nodes)
    for stale in result.stale:
        stale_ds = next(d for d in old if d.name == stale.name)
        strategy, key = driver_keys.identify_daemonset(stale_ds) or (None, None)
        served = {n.name for n in nodes if driver_keys.node_key(n, strategy) == key}  # type: ignore[arg-type]
        assert not served & lagging_nodes
    assert result.findings_of(driver_findings.WaitingForHandover)


@switches
def test_switch_deletes_the_old_daemonsets_once_handed_over(
    before: Strategy, after: Strategy, nodes: list[GpuNode]
) -> None:
    old = applied(nodes, before)
    new = applied(nodes, after)
    result = plan(nodes, after, daemonsets=old + new)
    assert sorted(s.name for s in result.stale) == sorted(d.name for d in old)
    assert all(s.reason.startswith("superseded") for s in result.stale)
    assert all(entry.exists for entry in result.desired)


def test_switch_never_hands_over_to_a_missing_dtk_image() -> None:
    nodes = [rhcos_node("a", V416)]
    old = applied(nodes, Strategy.VANILLA)
    new = applied(nodes, Strategy.DTK, stream=stream_with())
    result = plan(nodes, Strategy.DTK, daemonsets=old + new, stream=stream_with())
    assert result.stale == ()
    assert result.findings_of(driver_findings.WaitingForHandover)[0].nodes == ("a",)


def test_switch_never_strands_a_node_the_new_mode_cannot_key() -> None:
    # u2 has no kernel label: precompiled cannot serve it, so its vanilla DaemonSet stays
    u1 = ubuntu_node("u1")
    u2 = GpuNode.from_labels("u2", {labels.OS_ID: "ubuntu", labels.OS_VERSION_ID: "22.04"})
    old = applied([u1, u2], Strategy.VANILLA)
    new = applied([u1], Strategy.PRECOMPILED)
    result = plan([u1, u2], Strategy.PRECOMPILED, daemonsets=old + new)
    assert result.stale == ()
    assert result.findings_of(driver_findings.WaitingForHandover)[0].nodes == ("u2",)
    assert result.findings_of(driver_findings.NodeMissingKeyLabels)[0].node == "u2"


def test_duplicate_daemonsets_for_one_key() -> None:
    nodes = [rhcos_node("n")]
    (entry,) = plan(nodes).desired
    canonical = existing(entry)
    duplicate = existing(entry, name="nvidia-driver-daemonset-copy")
    result = plan(nodes, daemonsets=[duplicate, canonical])
    assert [e.name for e in result.desired] == [canonical.name]
    assert [s.name for s in result.stale] == [duplicate.name]
    # while the canonical one has not scheduled, the duplicate stays
    result = plan(nodes, daemonsets=[duplicate, existing(entry, scheduled=0)])
    assert result.stale == ()


# --- precompiled with Driver Toolkit fallback ---------------------------------------------

T0 = datetime.datetime(2025, 1, 1, 12, 0, tzinfo=datetime.UTC)
GRACE = datetime.timedelta(minutes=15)
K1 = DriverKey(f"{KERNEL_416}-rhcos4.16")
K2 = DriverKey(f"{KERNEL_417}-rhcos4.17")
IMG1 = f"nvcr.io/nvidia/driver:570-{KERNEL_416}-rhcos4.16"
IMG2 = f"nvcr.io/nvidia/driver:570-{KERNEL_417}-rhcos4.17"


def fallback(
    failures: Iterable[driver_fallback.PullFailure] = (),
    *,
    current: dict[DriverKey, str] | None = None,
    wanted: dict[DriverKey, str] | None = None,
    now: datetime.datetime = T0,
) -> driver_fallback.FallbackPlan:
    return driver_fallback.plan_precompiled_fallback(
        wanted={K1: IMG1, K2: IMG2} if wanted is None else wanted,
        failures=failures,
        current=current or {},
        now=now,
        grace=GRACE,
    )


FALLBACK_CASES = {
    "no-failures": ([], {}, T0, {}, {}),
    "failing-within-grace": (
        [driver_fallback.PullFailure(K1, IMG1, T0)],
        {},
        T0 + GRACE / 2,
        {},
        {K1: T0 + GRACE},
    ),
    "failing-exactly-grace": ([driver_fallback.PullFailure(K1, IMG1, T0)], {}, T0 + GRACE, {K1: IMG1}, {}),
    "failing-past-grace": ([driver_fallback.PullFailure(K1, IMG1, T0)], {}, T0 + 2 * GRACE, {K1: IMG1}, {}),
    "failure-of-an-old-image": ([driver_fallback.PullFailure(K1, "old:1", T0)], {}, T0 + 2 * GRACE, {}, {}),
    "failure-of-a-key-without-nodes": (
        [driver_fallback.PullFailure(DriverKey("gone"), "x:1", T0)],
        {},
        T0 + 2 * GRACE,
        {},
        {},
    ),
    "sticky-while-the-image-is-the-same": ([], {K1: IMG1}, T0, {K1: IMG1}, {}),
    "retry-when-the-version-changes": ([], {K1: "nvcr.io/nvidia/driver:565-k-rhel9.4"}, T0, {}, {}),
    "earliest-observation-wins": (
        [driver_fallback.PullFailure(K2, IMG2, T0 + GRACE / 2), driver_fallback.PullFailure(K2, IMG2, T0)],
        {},
        T0 + GRACE / 4,
        {},
        {K2: T0 + GRACE},
    ),
    "one-key-falls-back-the-other-waits": (
        [driver_fallback.PullFailure(K1, IMG1, T0), driver_fallback.PullFailure(K2, IMG2, T0 + GRACE)],
        {},
        T0 + GRACE,
        {K1: IMG1},
        {K2: T0 + 2 * GRACE},
    ),
}


@pytest.mark.parametrize(
    ("failures", "current", "now", "keys", "pending"), FALLBACK_CASES.values(), ids=FALLBACK_CASES.keys()
)
def test_plan_precompiled_fallback(
    failures: list[driver_fallback.PullFailure],
    current: dict[DriverKey, str],
    now: datetime.datetime,
    keys: dict[DriverKey, str],
    pending: dict[DriverKey, datetime.datetime],
) -> None:
    result = fallback(failures, current=current, now=now)
    assert dict(result.keys) == keys
    assert dict(result.pending) == pending


def test_fallback_is_dropped_when_its_nodes_are_gone() -> None:
    assert fallback(current={K1: IMG1}, wanted={K2: IMG2}).keys == {}


@given(
    offsets=st.lists(st.integers(min_value=0, max_value=3600), max_size=5),
    now_offset=st.integers(min_value=0, max_value=7200),
)
def test_fallback_never_before_grace(offsets: list[int], now_offset: int) -> None:
    failures = [driver_fallback.PullFailure(K1, IMG1, T0 + datetime.timedelta(seconds=s)) for s in offsets]
    now = T0 + datetime.timedelta(seconds=now_offset)
    result = fallback(failures, now=now)
    if K1 in result.keys:
        assert any(now - f.since >= GRACE for f in failures)
    else:
        assert all(now - f.since < GRACE for f in failures)
        if failures:
            assert result.pending[K1] == min(f.since for f in failures) + GRACE


def test_fallbacks_in_effect_read_back_from_annotations() -> None:
    annotated = DriverDaemonSet(
        name="x",
        annotations={labels.PRECOMPILED_FALLBACK_KEY: K1, labels.PRECOMPILED_FALLBACK_IMAGE: IMG1},
    )
    assert driver_fallback.fallbacks_in_effect([annotated, DriverDaemonSet(name="y")]) == {K1: IMG1}


def test_precompiled_key_on_fallback_builds_with_dtk() -> None:
    a, b = rhcos_node("a", V416), rhcos_node("b", V417, kernel=KERNEL_417, openshift="4.17")
    fallback_image = images.ImageRef("nvcr.io/nvidia/driver:570.124.06")
    result = plan([a, b], Strategy.PRECOMPILED, dtk_fallback={K1: IMG1}, fallback_driver_image=fallback_image)
    entries = {(entry.strategy, entry.key): entry for entry in result.desired}
    dtk = entries[(Strategy.DTK, DriverKey(V416))]
    assert dtk.fallback_for == K1 and dtk.fallback_image == IMG1
    assert dtk.dtk_image == DTK_416
    assert dtk.driver_image == "nvcr.io/nvidia/driver:570.124.06-rhcos4.16"
    assert entries[(Strategy.PRECOMPILED, K2)].fallback_for is None
    assert result.findings_of(driver_findings.DriverToolkitFallback) == (
        driver_findings.DriverToolkitFallback(K1, IMG1, (NodeName("a"),)),
    )


def test_fallback_hands_over_from_the_precompiled_daemonset() -> None:
    nodes = [rhcos_node("a", V416)]
    old = applied(nodes, Strategy.PRECOMPILED)
    result = plan(nodes, Strategy.PRECOMPILED, daemonsets=old, dtk_fallback={K1: IMG1})
    assert result.stale == ()
    new = [existing(entry) for entry in result.desired]
    result = plan(nodes, Strategy.PRECOMPILED, daemonsets=old + new, dtk_fallback={K1: IMG1})
    assert [s.name for s in result.stale] == [old[0].name]


@pytest.mark.parametrize(
    ("dtk_available", "node", "why"),
    [
        (False, rhcos_node("a", V416), "no Driver Toolkit"),
        (
            True,
            GpuNode.from_labels(
                "a",
                {
                    labels.OS_ID: "rhcos",
                    labels.OS_VERSION_ID: "4.16",
                    labels.KERNEL_VERSION_FULL: KERNEL_416,
                },
            ),
            "OSTREE_VERSION",
        ),
    ],
    ids=["not-openshift", "no-ostree-label"],
)
def test_fallback_blocked(dtk_available: bool, node: GpuNode, why: str) -> None:
    result = plan([node], Strategy.PRECOMPILED, dtk_fallback={K1: IMG1}, dtk_available=dtk_available)
    (entry,) = result.desired
    assert entry.strategy is Strategy.PRECOMPILED
    (finding,) = result.findings_of(driver_findings.DriverToolkitFallback)
    assert why in finding.blocked and why in finding.message


def test_a_kernel_that_cannot_make_an_image_tag_is_deferred() -> None:
    node = ubuntu_node("u", kernel="6.1.0+rt7")
    result = plan([node], Strategy.PRECOMPILED)
    assert result.desired == ()
    (deferred,) = result.findings_of(driver_findings.DeferredDaemonSet)
    assert deferred.nodes == ("u",) and "tag" in deferred.message


def test_every_finding_has_a_reason_and_a_message() -> None:
    nodes = [
        rhcos_node("a", V416, running=V417),
        rhcos_node("missing-tag", "418.94.202501010000-0"),
        rhcos_node("no-nfd", nfd=False),
    ]
    result = plan(
        nodes,
        daemonsets=[DriverDaemonSet(name="nvidia-driver-daemonset-unlabelled")],
        stream=stream_with((V416, DTK_416), state=StreamState.BROKEN),
    )
    kinds = {type(f) for f in result.findings}
    assert len(kinds) >= 5
    for finding in result.findings:
        assert re.match(r"^[A-Z][A-Za-z]+$", finding.reason)
        assert finding.message


# --- invariants (hypothesis) ----------------------------------------------------------

VERSIONS = [V416, V417, V419, RhcosVersion("418.94.202501010000-0")]


@st.composite
def gpu_nodes(draw: st.DrawFn, index: int, kinds: tuple[str, ...] = ("rhcos", "ubuntu", "bare")) -> GpuNode:
    kind = draw(st.sampled_from(kinds))
    name = f"node-{index}"
    if kind == "rhcos":
        version = draw(st.sampled_from(VERSIONS))
        running = draw(st.sampled_from([*VERSIONS, None]))
        kernel = draw(st.sampled_from([KERNEL_416, KERNEL_417]))
        return rhcos_node(name, version, running=running, kernel=kernel)
    if kind == "ubuntu":
        return ubuntu_node(
            name,
            draw(st.sampled_from(["22.04", "24.04"])),
            draw(st.sampled_from(["5.15.0-105-generic", "6.8.0-40-generic", "a" * 60])),
        )
    return GpuNode.from_labels(name, {})


@st.composite
def clusters(draw: st.DrawFn) -> tuple[DriverSnapshot, driver_plan.DriverSettings]:
    count = draw(st.integers(min_value=0, max_value=8))
    # mostly one OS family per cluster, sometimes a mix with unlabelled nodes
    kinds = draw(st.sampled_from([("rhcos",), ("ubuntu",), ("rhcos", "ubuntu", "bare")]))
    nodes = [draw(gpu_nodes(i, kinds)) for i in range(count)]
    strategy = draw(st.sampled_from(list(Strategy)))
    # Existing DaemonSets: what some earlier plan (any strategy) produced for a mix of
    # today's nodes and nodes that have since changed or left.
    departed = [draw(gpu_nodes(100 + i, kinds)) for i in range(draw(st.integers(min_value=0, max_value=3)))]
    daemonsets: list[DriverDaemonSet] = []
    for earlier in draw(st.lists(st.sampled_from(list(Strategy)), max_size=2, unique=True)):
        subset = [n for n in nodes + departed if draw(st.booleans())]
        for entry in plan(subset, earlier).desired:
            if not draw(st.booleans()):
                continue
            if draw(st.booleans()):
                # the DaemonSet controller caught up (pods on every node it selects, or none left)
                wanted = draw(st.integers(0, 3))
                daemonsets.append(existing(entry, desired=wanted, scheduled=wanted))
            else:
                daemonsets.append(
                    existing(
                        entry,
                        desired=draw(st.integers(0, 3)),
                        scheduled=draw(st.integers(0, 3)),
                        misscheduled=draw(st.integers(0, 1)),
                        current_status=draw(st.booleans()),
                    )
                )
    strategy_settings = driver_settings(strategy)
    if draw(st.booleans()):
        # the previous pass of these very settings was applied and has (mostly) caught up
        earlier_snapshot = DriverSnapshot(
            nodes=tuple(nodes), daemonsets=tuple(daemonsets), stream=FULL_STREAM
        )
        taken = {d.name for d in daemonsets}
        for entry in driver_plan.plan_driver_daemonsets(earlier_snapshot, strategy_settings).desired:
            if entry.name not in taken and draw(st.integers(0, 4)):
                daemonsets.append(existing(entry, scheduled=len(entry.nodes) - draw(st.integers(0, 1))))
    stream = draw(
        st.sampled_from(
            [
                FULL_STREAM,
                stream_with(),
                stream_with((V416, DTK_416), state=StreamState.BROKEN),
                DriverToolkitStream(StreamState.ABSENT),
                DriverToolkitStream(StreamState.UNREADABLE),
            ]
        )
    )
    snapshot = DriverSnapshot(nodes=tuple(nodes), daemonsets=tuple(daemonsets), stream=stream)
    return snapshot, strategy_settings


def _served(snapshot: DriverSnapshot, daemonset: DriverDaemonSet) -> set[str]:
    identity = driver_keys.identify_daemonset(daemonset)
    assert identity is not None
    strategy, key_value = identity
    return {
        n.name
        for n in snapshot.nodes
        if (key := driver_keys.node_key(n, strategy)) is not None
        and driver_names.key_label_value(key) == key_value
    }


hypothesis_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@hypothesis_settings
@given(clusters())
def test_no_node_is_ever_left_without_a_driver_daemonset(
    cluster: tuple[DriverSnapshot, driver_plan.DriverSettings],
) -> None:
    snapshot, driver_settings_ = cluster
    result = driver_plan.plan_driver_daemonsets(snapshot, driver_settings_)
    by_name = {d.name: d for d in snapshot.daemonsets}
    desired_for: dict[str, driver_plan.DesiredDriverDaemonSet] = {
        node: entry for entry in result.desired for node in entry.nodes
    }
    for stale in result.stale:
        for node in _served(snapshot, by_name[stale.name]):
            # a stale DaemonSet whose key still has a node: its replacement runs there already
            entry = desired_for[node]
            live = by_name[entry.name]
            assert live.fully_scheduled and not entry.image_missing
            assert entry.name != stale.name


@hypothesis_settings
@given(clusters())
def test_same_strategy_daemonsets_with_nodes_are_never_stale(
    cluster: tuple[DriverSnapshot, driver_plan.DriverSettings],
) -> None:
    snapshot, driver_settings_ = cluster
    result = driver_plan.plan_driver_daemonsets(snapshot, driver_settings_)
    stale = {s.name for s in result.stale}
    desired_names = {entry.name for entry in result.desired}
    for daemonset in snapshot.daemonsets:
        identity = driver_keys.identify_daemonset(daemonset)
        same_strategy = identity is not None and identity[0] is driver_settings_.strategy
        # its key still has a node and it is the kept one for its key: never stale
        if same_strategy and _served(snapshot, daemonset) and daemonset.name in desired_names:
            assert daemonset.name not in stale


@hypothesis_settings
@given(clusters())
def test_plan_shape(cluster: tuple[DriverSnapshot, driver_plan.DriverSettings]) -> None:
    snapshot, driver_settings_ = cluster
    result = driver_plan.plan_driver_daemonsets(snapshot, driver_settings_)
    identities = [(entry.strategy, entry.key) for entry in result.desired]
    # exactly one desired DaemonSet per key, with distinct, valid names
    assert len(identities) == len(set(identities))
    names = [entry.name for entry in result.desired]
    assert len(names) == len(set(names))
    for name in names:
        assert len(name) <= 63 and DNS_1123_SUBDOMAIN.match(name), name
    # every node is in at most one desired DaemonSet
    placed = [node for entry in result.desired for node in entry.nodes]
    assert len(placed) == len(set(placed))
    # every keyable node is placed, or its key was deferred
    deferred = {n for d in result.findings_of(driver_findings.DeferredDaemonSet) for n in d.nodes}
    for node in snapshot.nodes:
        if driver_keys.node_key(node, driver_settings_.strategy) is not None:
            assert node.name in placed or node.name in deferred
    # nothing desired is also stale
    assert not {s.name for s in result.stale} & set(names)


@hypothesis_settings
@given(clusters(), st.randoms(use_true_random=False))
def test_plan_is_independent_of_input_order(
    cluster: tuple[DriverSnapshot, driver_plan.DriverSettings], shuffler: random.Random
) -> None:
    snapshot, driver_settings_ = cluster
    nodes, daemonsets = list(snapshot.nodes), list(snapshot.daemonsets)
    shuffler.shuffle(nodes)
    shuffler.shuffle(daemonsets)
    shuffled = dataclasses.replace(snapshot, nodes=tuple(nodes), daemonsets=tuple(daemonsets))
    first = driver_plan.plan_driver_daemonsets(snapshot, driver_settings_)
    again = driver_plan.plan_driver_daemonsets(shuffled, driver_settings_)
    assert first.desired == again.desired
    assert first.stale == again.stale
    assert sorted(map(repr, first.findings)) == sorted(map(repr, again.findings))


# --- settings from the policy ----------------------------------------------------------

OPENSHIFT_PLATFORM = platform.detect_platform({"config.openshift.io", "image.openshift.io"})
KUBERNETES_PLATFORM = platform.detect_platform(set())
DRIVER_ENV = {"DRIVER_IMAGE": "nvcr.io/nvidia/driver:570.124.06"}

SETTINGS_CASES = {
    "openshift-default": (OPENSHIFT_PLATFORM, {}, Strategy.DTK, "nvcr.io/nvidia/driver:570.124.06", False),
    "openshift-dtk-off": (
        OPENSHIFT_PLATFORM,
        {"operator": {"use_ocp_driver_toolkit": False}},
        Strategy.VANILLA,
        "nvcr.io/nvidia/driver:570.124.06",
        False,
    ),
    "kubernetes": (KUBERNETES_PLATFORM, {}, Strategy.VANILLA, "nvcr.io/nvidia/driver:570.124.06", False),
    "version-patched": (
        OPENSHIFT_PLATFORM,
        {"driver": {"version": "580.65.06"}},
        Strategy.DTK,
        "nvcr.io/nvidia/driver:580.65.06",
        False,
    ),
    "precompiled": (
        KUBERNETES_PLATFORM,
        {"driver": {"usePrecompiled": True, "version": "570"}},
        Strategy.PRECOMPILED,
        "nvcr.io/nvidia/driver:570",
        False,
    ),
    "precompiled-fallback": (
        OPENSHIFT_PLATFORM,
        {
            "driver": {
                "usePrecompiled": True,
                "version": "570",
                "precompiledFallback": {"enabled": True, "version": "570.124.06"},
            }
        },
        Strategy.PRECOMPILED,
        "nvcr.io/nvidia/driver:570",
        True,
    ),
    "fallback-without-version": (
        OPENSHIFT_PLATFORM,
        {"driver": {"usePrecompiled": True, "version": "570", "precompiledFallback": {"enabled": True}}},
        Strategy.PRECOMPILED,
        "nvcr.io/nvidia/driver:570",
        False,
    ),
    "fallback-off-kubernetes": (
        KUBERNETES_PLATFORM,
        {
            "driver": {
                "usePrecompiled": True,
                "version": "570",
                "precompiledFallback": {"enabled": True, "version": "570.1"},
            }
        },
        Strategy.PRECOMPILED,
        "nvcr.io/nvidia/driver:570",
        False,
    ),
}


@pytest.mark.parametrize(
    ("where", "spec", "strategy", "image", "fallback"), SETTINGS_CASES.values(), ids=SETTINGS_CASES.keys()
)
def test_settings_for_policy(
    where: platform.Platform, spec: dict[str, Any], strategy: Strategy, image: str, fallback: bool
) -> None:
    result = driver_plan.settings_for_policy(
        policy_parser.parse_policy(spec), where, DRIVER_ENV, dtk_fallback={DriverKey("k"): "img"}
    )
    assert isinstance(result, driver_plan.DriverSettings)
    assert result.strategy is strategy and result.driver_image == image
    assert result.dtk_available is fallback
    assert dict(result.dtk_fallback) == ({DriverKey("k"): "img"} if fallback else {})
    assert (result.fallback_driver_image == "nvcr.io/nvidia/driver:570.124.06") is fallback


def test_settings_for_an_unresolvable_image_is_the_problem() -> None:
    result = driver_plan.settings_for_policy(policy_parser.parse_policy({}), OPENSHIFT_PLATFORM, {})
    assert isinstance(result, PolicyProblem)
    assert result.field.startswith("spec.driver")


def test_fallback_grace_comes_from_the_policy() -> None:
    spec = {"driver": {"precompiledFallback": {"imagePullTimeoutSeconds": 90}}}
    assert driver_plan.fallback_grace(policy_parser.parse_policy(spec)) == datetime.timedelta(seconds=90)
