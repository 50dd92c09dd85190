"""We test these aspects of RHCOS 9 and RHCOS 10 pools side by side (issue 24), planning only:

- nodes on RHCOS 9 (`9.6.<date>-0`), RHCOS 10 (`10.1.<date>-0`) and the old scheme
  (`416.94.<date>-0`) get one driver DaemonSet per build, each with its own DTK tag's image and
  the driver image tagged for its RHEL (`-rhel9`, `-rhel10`, `-rhcos4.16`: NVIDIA's tags);
- the floating tags (`latest`, `latest-rhel-10`) never serve a build, even when they are all the
  stream holds for RHCOS 10: the build's DaemonSet is created image-missing instead;
- migration within each stream (9.6 -> 9.6, 10.1 -> 10.1) and a pool moving from 9 to 10: the
  new build's DaemonSet appears with the first node, the old one is stale once no node runs it;
- the RHCOS build is read from the kubelet's osImage for both numbering schemes.
"""

from __future__ import annotations

import dataclasses

from ocp_gpu.kube import reading
from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import GpuNode, rhcos_version_from_os_image
from ocp_gpu.planning.drivers import dtk_images
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from tests.unit._drivers import V416, by_key, existing, plan, rhcos_node

RHCOS9_A = "9.6.20250909-0"
RHCOS9_B = "9.6.20251021-0"
RHCOS10_A = "10.1.20251015-0"
RHCOS10_B = "10.1.20251112-0"
ART = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
DTK = {
    build: ART + digit * 64
    for build, digit in ((RHCOS9_A, "1"), (RHCOS9_B, "2"), (RHCOS10_A, "3"), (RHCOS10_B, "4"))
}
DTK[V416] = ART + "5" * 64
LATEST, LATEST_RHEL10 = ART + "e" * 64, ART + "f" * 64


def rhel_node(name: str, build: str) -> GpuNode:
    """A GPU node on RHCOS from OpenShift 4.19 on, as NFD labels it (ID=rhel, VERSION_ID=9.6 or 10.1)."""
    major, minor = build.split(".")[:2]
    return GpuNode.from_labels(
        name,
        {
            labels.NFD_NVIDIA_PCI: "true",
            labels.OSTREE_VERSION: build,
            labels.OS_ID: "rhel",
            labels.OS_VERSION_ID: f"{major}.{minor}",
            labels.OS_RHEL_VERSION: f"{major}.{minor}",
            labels.KERNEL_VERSION_FULL: "6.12.0-55.9.1.el10_0.x86_64"
            if major == "10"
            else "5.14.0-570.el9_6.x86_64",
        },
        os_image=f"Red Hat Enterprise Linux CoreOS {build} (Coughlan)",
    )


def stream(*builds: str) -> dtk_images.ResolvedStream:
    """openshift/driver-toolkit as the CVO writes it: a tag per build, plus both floating tags."""
    tags = [{"name": b, "from": {"kind": "DockerImage", "name": DTK[b]}} for b in builds]
    tags += [
        {"name": "latest", "from": {"kind": "DockerImage", "name": LATEST}},
        {"name": "latest-rhel-10", "from": {"kind": "DockerImage", "name": LATEST_RHEL10}},
    ]
    return dtk_images.resolve_driver_toolkit_stream(reading.image_stream({"spec": {"tags": tags}}))


def test_rhcos_9_10_and_the_old_scheme_side_by_side() -> None:
    nodes = [rhel_node("r9", RHCOS9_A), rhel_node("r10", RHCOS10_A), rhcos_node("old", V416)]
    result = plan(nodes, stream=stream(RHCOS9_A, RHCOS10_A, V416))
    entries = by_key(result)
    assert set(entries) == {RHCOS9_A, RHCOS10_A, V416}
    for build, os_tag in ((RHCOS9_A, "rhel9"), (RHCOS10_A, "rhel10"), (V416, "rhcos4.16")):
        entry = entries[build]
        assert entry.name == f"nvidia-driver-daemonset-{build}"
        assert entry.labels[labels.DTK_RHCOS] == build
        assert entry.dtk_image == DTK[build] and not entry.image_missing
        assert entry.driver_image == f"nvcr.io/nvidia/driver:570.124.06-{os_tag}"
    assert [str(n) for n in entries[RHCOS10_A].nodes] == ["r10"]
    assert LATEST not in repr(result) and LATEST_RHEL10 not in repr(result)
    assert result.findings == ()


def test_latest_rhel_10_never_stands_in_for_an_rhcos_10_build() -> None:
    # the CVO has not tagged the 10.1 build yet: only the floating tags could serve it
    result = plan([rhel_node("r9", RHCOS9_A), rhel_node("r10", RHCOS10_A)], stream=stream(RHCOS9_A))
    entries = by_key(result)
    assert entries[RHCOS10_A].image_missing and entries[RHCOS10_A].dtk_image is None
    assert entries[RHCOS10_A].labels[labels.DTK_IMAGE_MISSING] == "true"
    assert entries[RHCOS9_A].dtk_image == DTK[RHCOS9_A]
    assert LATEST_RHEL10 not in repr(result) and LATEST not in repr(result)


def test_migration_within_each_stream() -> None:
    every = stream(RHCOS9_A, RHCOS9_B, RHCOS10_A, RHCOS10_B)
    nodes = {n: rhel_node(n, RHCOS9_A) for n in ("a9", "b9")} | {
        n: rhel_node(n, RHCOS10_A) for n in ("a10", "b10")
    }
    cluster = [existing(entry) for entry in plan(nodes.values(), stream=every).desired]
    # the MCO rolls one node of each pool to its stream's next build
    nodes["a9"], nodes["a10"] = rhel_node("a9", RHCOS9_B), rhel_node("a10", RHCOS10_B)
    step = plan(nodes.values(), daemonsets=cluster, stream=every)
    assert set(by_key(step)) == {RHCOS9_A, RHCOS9_B, RHCOS10_A, RHCOS10_B} and step.stale == ()
    assert by_key(step)[RHCOS10_B].driver_image.endswith("-rhel10")
    assert by_key(step)[RHCOS10_B].dtk_image == DTK[RHCOS10_B]
    # the rest follow: the old builds' DaemonSets are stale, the new ones stay
    nodes["b9"], nodes["b10"] = rhel_node("b9", RHCOS9_B), rhel_node("b10", RHCOS10_B)
    cluster += [existing(by_key(step)[b]) for b in (RHCOS9_B, RHCOS10_B)]
    done = plan(nodes.values(), daemonsets=cluster, stream=every)
    assert set(by_key(done)) == {RHCOS9_B, RHCOS10_B}
    assert sorted(d.name for d in done.stale) == [
        f"nvidia-driver-daemonset-{b}" for b in (RHCOS10_A, RHCOS9_A)
    ]


def test_a_pool_moving_from_rhcos_9_to_10() -> None:
    every = stream(RHCOS9_A, RHCOS10_A)
    a, b = rhel_node("a", RHCOS9_A), rhel_node("b", RHCOS9_A)
    cluster = [existing(entry) for entry in plan([a, b], stream=every).desired]
    a = rhel_node("a", RHCOS10_A)
    step = plan([a, b], daemonsets=cluster, stream=every)
    assert {k: e.driver_image.rsplit("-", 1)[1] for k, e in by_key(step).items()} == {
        RHCOS9_A: "rhel9",
        RHCOS10_A: "rhel10",
    }
    assert step.stale == ()
    b = rhel_node("b", RHCOS10_A)
    old = dataclasses.replace(cluster[0], desired_number_scheduled=0)
    done = plan([a, b], daemonsets=[old, existing(by_key(step)[RHCOS10_A])], stream=every)
    assert [e.key for e in done.desired] == [RHCOS10_A]
    assert [d.name for d in done.stale] == [f"nvidia-driver-daemonset-{RHCOS9_A}"]


def test_the_running_build_is_read_for_both_schemes() -> None:
    for build in (RHCOS9_A, RHCOS10_A, V416):
        assert rhcos_version_from_os_image(f"Red Hat Enterprise Linux CoreOS {build} (Coughlan)") == build


def test_precompiled_and_vanilla_strategies_are_not_keyed_by_build() -> None:
    # DTK keys per build; the other strategies key per OS (and kernel): still one per RHEL
    entries = by_key(plan([rhel_node("r9", RHCOS9_A), rhel_node("r10", RHCOS10_A)], Strategy.VANILLA))
    assert set(entries) == {"rhel9.6", "rhel10.1"}
