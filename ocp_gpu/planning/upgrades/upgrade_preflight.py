"""Whether the GPU nodes are ready for the OpenShift upgrade in progress: the `UpgradePreflight` condition.

While the Cluster Version Operator applies a new release (ClusterVersion's newest history
entry is `Partial`), it updates the `openshift/driver-toolkit` ImageStream before the Machine
Config Operator reboots any node into the new RHCOS: the floating tags (`latest` for RHCOS 9,
`latest-rhel-10` for RHCOS 10; only those of streams the GPU nodes run count) then point at the
new payload's Driver Toolkit images, each of which should also carry a tag named after its
RHCOS build.  Those builds that no GPU node runs
yet are the upgrade's targets.  For each the condition says whether its DTK tag is there and
which driver image its nodes will run (`-rhel9`, `-rhel10`), before any node moves; a
floating tag whose image has no build tag is the problem the admin must hear about then
(reason `DriverToolkitTagMissing`, also an Event), not when the first GPU node has rebooted.
It also says whether the driver branch supports the target OpenShift release, by the release's
support table (`model.releases.DRIVER_BRANCH_OPENSHIFT`): a branch that does not is reason
`DriverBranchUnsupported` (an Event too); a branch the table does not know is said, not judged.

Also decides which driver DaemonSets go ahead of their nodes (`ahead_nodes`): while the upgrade
is applied, each target build gets its driver DaemonSet before any node carries it, so the
first GPU node that reboots into it gets its driver pod at once; it goes with the upgrade if
the upgrade is abandoned (driver_plan collects a DaemonSet no node and no target keeps).

Decides from ClusterVersion's JSON, the ImageStream record and the nodes' builds; it never
reads, writes or looks at a clock.  No condition when no upgrade is in progress.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

from ocp_gpu.model import images, labels, releases
from ocp_gpu.model.driver_snapshot import GpuNode, RhcosVersion, rhcos_version_from_os_image
from ocp_gpu.model.imagestream_tags import ImageStream
from ocp_gpu.model.nodes import NodeFacts, NodeName
from ocp_gpu.planning.drivers import dtk_images
from ocp_gpu.planning.status import conditions

CONDITION: Final = "UpgradePreflight"
# every target build has its DTK tag
READY: Final = "TargetReady"
# a floating tag's image has no build tag: nodes rebooting into it would get no driver build
TAG_MISSING: Final = "DriverToolkitTagMissing"
# the driver branch does not support the target OpenShift release (the release's support table)
BRANCH_UNSUPPORTED: Final = "DriverBranchUnsupported"
# a target's image cannot be pulled where the pre-pull pulls it (the kubelet says so)
IMAGE_MISSING: Final = "TargetImageMissing"
# ClusterVersion's history entry of an update being applied
PARTIAL: Final = "Partial"

# 416.94.202407030122-0: RHEL 9.4; 9.6.20250909-0 and 10.1.20251015-0: RHEL 9.6, 10.1
_LEGACY_BUILD = re.compile(r"^4\d+\.(\d)(\d+)\.")
_RHEL_BUILD = re.compile(r"^(\d+)\.(\d+)\.\d{8}")
# 417.94.…: OpenShift 4.17
_LEGACY_OPENSHIFT = re.compile(r"^4(\d+)\.\d+\.")


@dataclasses.dataclass(frozen=True)
class TargetBuild:
    """An RHCOS build the upgrade brings and no GPU node runs yet."""

    build: str
    dtk_image: str
    # `<version>-<os>`; with `usePrecompiled` `<branch>-<kernel>-<os>`, None while the kernel is unknown
    driver_image: str | None
    # usePrecompiled: the kernel the build boots, as the first node of any pool on it reports it
    kernel: str | None = None
    precompiled: bool = False

    def describe(self) -> str:
        """What the condition says of this target."""
        found = f"RHCOS {self.build}: Driver Toolkit tag present"
        if not self.precompiled:
            return f"{found}, driver image {self.driver_image}"
        if self.driver_image is None:
            return (
                f"{found}, precompiled driver image not named yet: no node runs the build, so its kernel "
                "is not known (named when the first node of any pool boots it)"
            )
        return f"{found}, precompiled driver image {self.driver_image} (kernel {self.kernel})"


def rhel_of_build(build: str) -> str | None:
    """The RHEL release an RHCOS build is based on (`416.94.…` -> 9.4, `10.1.…` -> 10.1)."""
    if match := _LEGACY_BUILD.match(build):
        return f"{match[1]}.{match[2]}"
    if match := _RHEL_BUILD.match(build):
        return f"{match[1]}.{match[2]}"
    return None


def _stream_major(floating_tag: str) -> str:
    """The RHEL major a floating tag follows: `latest` RHCOS 9's, `latest-rhel-10` RHCOS 10's."""
    return (
        floating_tag.removeprefix(dtk_images.LATEST_PREFIX + "rhel-")
        if floating_tag != dtk_images.LATEST
        else "9"
    )


def upgrading_to(cluster_version: Mapping[str, Any] | None) -> str | None:
    """The release the CVO is applying now (its newest history entry is Partial), else None."""
    status = (cluster_version or {}).get("status") or {}
    history = status.get("history") or []
    if not history or history[0].get("state") != PARTIAL:
        return None
    return str(history[0].get("version") or (status.get("desired") or {}).get("version") or "?")


def plan_preflight(
    cluster_version: Mapping[str, Any] | None,
    stream: ImageStream | None,
    node_builds: Iterable[str],
    driver_image: images.ImageRef,
    *,
    kernels: Mapping[str, str] | None = None,
    unpullable: Collection[str] = (),
) -> conditions.Condition | None:
    """The `UpgradePreflight` condition, or None when no OpenShift upgrade is in progress.

    ``kernels``: with `usePrecompiled`, each RHCOS build's kernel as far as nodes show it
    (`build_kernels`); None: the Driver Toolkit builds the driver.  ``unpullable``: the images
    the pre-pull pods' kubelets cannot pull (ErrImagePull, ImagePullBackOff)."""
    target = upgrading_to(cluster_version)
    if target is None or stream is None:
        # no upgrade running (or no Driver Toolkit stream: not OpenShift's DTK mode)
        return None
    builds = list(node_builds)  # NB: read twice, and callers pass generators
    condition = _plan_tags(target, stream, builds, driver_image, kernels)
    targets, _ = upgrade_targets(stream, builds, driver_image, kernels=kernels)
    gaps = [
        (t.build, image)
        for t in targets
        for image in (t.dtk_image, t.driver_image)
        if image is not None and image in unpullable
    ]
    if gaps and condition.status:
        # the kubelets cannot pull what the nodes will run after the reboot: say it before they move
        named = "; ".join(f"{image} (RHCOS {build})" for build, image in gaps)
        return conditions.Condition(
            CONDITION,
            False,
            IMAGE_MISSING,
            f"OpenShift {target} is being applied; GPU nodes cannot pull {named}: nodes rebooting into "
            "that build would get no driver. Publish or mirror the image, or set driver.version (or "
            "driver.usePrecompiled) to one that exists, before the Machine Config Operator reaches the "
            f"GPU nodes. {condition.message}",
        )
    support = releases.driver_branch_support(releases.driver_branch_of(str(driver_image)), target)
    if support.supported is False and condition.status:
        # the tags are there, but the driver cannot follow: say so before any node moves
        return conditions.Condition(
            CONDITION,
            False,
            BRANCH_UNSUPPORTED,
            f"OpenShift {target} is being applied; {support.note}: set driver.version to a branch that "
            f"supports it before the Machine Config Operator reaches the GPU nodes. {condition.message}",
        )
    return dataclasses.replace(condition, message=f"{condition.message}; {support.note}")


def os_tag_of_build(build: str) -> str | None:
    """The driver image's OS suffix for an RHCOS build, as the driver DaemonSets tag it
    (`model.driver_snapshot.GpuNode.driver_os_tag`): `rhcos4.16` for the old `416.94.…` scheme,
    `rhel9` for `9.6.…`, `rhel10` for `10.1.…`."""
    node = stand_in_node(build)
    return node.driver_os_tag if node else None


def upgrade_targets(
    stream: ImageStream,
    node_builds: Iterable[str],
    driver_image: images.ImageRef,
    *,
    running_too: bool = False,
    kernels: Mapping[str, str] | None = None,
) -> tuple[list[TargetBuild], list[str]]:
    """The builds the floating tags point at that no GPU node runs yet (``running_too``: also
    those some already run), with their DTK and driver images; and the floating tags whose image
    has no build tag.  ``kernels`` (usePrecompiled): each build's kernel, for NVIDIA's precompiled
    tag `<branch>-<kernel>-<os>` (api/nvidia/v1alpha1 GetPrecompiledImagePath, v26.7.0)."""
    tags = {tag.name: tag.from_name for tag in stream.spec_tags if tag.from_kind == "DockerImage"}
    running = set(node_builds)
    # the RHEL majors the GPU nodes run: only their streams' floating tags are theirs to move to
    majors = {rhel.split(".")[0] for rhel in map(rhel_of_build, running) if rhel}
    floating = {
        name: image
        for name, image in tags.items()
        if not dtk_images.is_version_tag(name) and _stream_major(name) in majors
    }
    targets: list[TargetBuild] = []
    missing: list[str] = []
    for name, image in sorted(floating.items()):
        builds = sorted(b for b, i in tags.items() if i == image and dtk_images.is_version_tag(b))
        if not builds:
            # the payload's DTK image has no build tag: its nodes would get no DTK build
            missing.append(name)
            continue
        for build in builds:
            os_tag = os_tag_of_build(build)
            if (build in running and not running_too) or os_tag is None:
                continue  # a build the GPU nodes already run is no target
            if kernels is None:
                targets.append(TargetBuild(build, image, str(images.driver_image_for(driver_image, os_tag))))
                continue
            kernel = kernels.get(build)
            targets.append(
                TargetBuild(build, image, _precompiled(driver_image, kernel, os_tag), kernel, True)
            )
    return targets, missing


def _precompiled(driver_image: images.ImageRef, kernel: str | None, os_tag: str) -> str | None:
    """NVIDIA's precompiled image for a kernel (`<branch>-<kernel>-<os>`); None: no kernel yet, or
    one that makes no valid tag."""
    if kernel is None:
        return None
    try:
        return str(images.driver_image_for(driver_image, images.precompiled_os_tag(kernel, os_tag)))
    except ValueError:
        return None


def build_kernels(nodes: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each RHCOS build's kernel, from (build, kernel) of every node that runs one, of any pool
    (the control plane's nodes often move first): the most common kernel of the build's nodes
    (NB: a pool with another kernel type, realtime, shows its own once its first node boots)."""
    seen: dict[str, Counter[str]] = {}
    for build, kernel in nodes:
        if build and kernel:
            seen.setdefault(build, Counter())[kernel] += 1
    return {build: min(counts, key=lambda k: (-counts[k], k)) for build, counts in seen.items()}


def kernels_of_nodes(node_facts: Iterable[NodeFacts]) -> dict[str, str]:
    """`build_kernels` of every node, GPU or not: its build from NFD's OSTREE_VERSION, else from
    the kubelet's osImage (NFD often runs on no control-plane node), its kernel from NFD's
    kernel-version.full, else the kubelet's (both `uname -r`)."""
    return build_kernels(
        (
            str(facts.labels.get(labels.OSTREE_VERSION) or rhcos_version_from_os_image(facts.os_image) or ""),
            str(facts.labels.get(labels.KERNEL_VERSION_FULL) or facts.kernel_version),
        )
        for facts in node_facts
    )


def _plan_tags(
    target: str,
    stream: ImageStream,
    node_builds: Iterable[str],
    driver_image: images.ImageRef,
    kernels: Mapping[str, str] | None,
) -> conditions.Condition:
    """What the Driver Toolkit stream holds for the upgrade to ``target``."""
    targets, missing = upgrade_targets(stream, node_builds, driver_image, kernels=kernels)
    described = "; ".join(t.describe() for t in targets)
    if missing:
        # say it before the MCO reboots the first GPU node into it
        gaps = ", ".join(f"`{name}`" for name in missing)
        message = (
            f"OpenShift {target} is being applied; the Driver Toolkit image of {gaps} has no tag named "
            "after its RHCOS build in ImageStream openshift/driver-toolkit: GPU nodes rebooting into it "
            "get a driver DaemonSet without a Driver Toolkit image"
        )
        return conditions.Condition(CONDITION, False, TAG_MISSING, f"{message}. {described}".strip(". "))
    if not targets:
        # the upgrade brings no new RHCOS build for the GPU nodes (or they already run it)
        return conditions.Condition(
            CONDITION, True, READY, f"OpenShift {target}: no new RHCOS build for GPU nodes"
        )
    return conditions.Condition(CONDITION, True, READY, f"OpenShift {target}: {described}")


# --- pulling the target's images ahead of the MCO ----------------------------------------------


@dataclasses.dataclass(frozen=True)
class PrePull:
    """One pre-pull DaemonSet: the GPU nodes of one RHEL major still on a build the upgrade
    replaces pull that stream's target Driver Toolkit and driver images, so that the driver
    build after the reboot into the new RHCOS waits for no download (the images stay in the
    node's container storage across the reboot)."""

    # `rhel9`, `rhel10`: the DaemonSet's name suffix
    stream: str
    # the RHCOS builds whose GPU nodes pull (those still to move), sorted
    builds: tuple[str, ...]
    # each target's DTK image, then its driver image, without repeats
    images: tuple[str, ...]


def plan_prepulls(
    cluster_version: Mapping[str, Any] | None,
    stream: ImageStream | None,
    node_builds: Iterable[str],
    driver_image: images.ImageRef,
    *,
    kernels: Mapping[str, str] | None = None,
) -> tuple[PrePull, ...]:
    """The pre-pull DaemonSets that should exist now: one per RHEL major that has a target build
    and GPU nodes still on another build; none when no OpenShift upgrade is being applied (so
    they go once ClusterVersion says Completed), and none for a major whose nodes have all moved.
    With ``kernels`` (usePrecompiled) only the precompiled images are pulled (no Driver Toolkit
    build runs), each once its build's kernel is known."""
    if upgrading_to(cluster_version) is None or stream is None:
        return ()
    running = sorted(set(node_builds))
    # NB: a target stays one when the first nodes have moved to it: the others still pull it
    targets, _ = upgrade_targets(stream, running, driver_image, running_too=True, kernels=kernels)
    found: list[PrePull] = []
    for major in sorted({_major(t.build) for t in targets} - {None}, key=lambda m: int(m or 0)):
        aimed = [t for t in targets if _major(t.build) == major]
        to_move = tuple(b for b in running if _major(b) == major and b not in {t.build for t in aimed})
        if not to_move:
            continue  # every GPU node of this stream runs a target build already
        wanted = (
            image
            for t in aimed
            for image in ((t.driver_image,) if t.precompiled else (t.dtk_image, t.driver_image))
        )
        pulled = tuple(dict.fromkeys(image for image in wanted if image))
        if pulled:
            found.append(PrePull(f"rhel{major}", to_move, pulled))
    return tuple(found)


# --- the target's driver DaemonSet ahead of its nodes ------------------------------------------


def ahead_nodes(
    cluster_version: Mapping[str, Any] | None,
    stream: ImageStream | None,
    node_builds: Iterable[str],
    driver_image: images.ImageRef,
    *,
    kernels: Mapping[str, str] | None = None,
) -> tuple[GpuNode, ...]:
    """Stand-ins for the GPU nodes each target build will have, for the driver plan: one per
    build the floating tags point at, that carries its DTK tag and no GPU node runs yet, while
    an upgrade is being applied; none otherwise (the DaemonSet is then collected as empty).

    Each carries the NFD labels a node of that build has (so its DaemonSet renders exactly as
    it will once nodes arrive: the first one's pod is not restarted by a template change).  With
    ``kernels`` (usePrecompiled) only builds whose kernel is known, the stand-in carrying it."""
    if upgrading_to(cluster_version) is None or stream is None:
        return ()
    targets, _ = upgrade_targets(stream, node_builds, driver_image, kernels=kernels)
    found = (stand_in_node(t.build, t.kernel) for t in targets if not t.precompiled or t.driver_image)
    return tuple(node for node in found if node is not None)


def stand_in_node(build: str, kernel: str | None = None) -> GpuNode | None:
    """A nameless GPU node of an RHCOS build, with NFD's os_release labels for it: the old scheme
    (`417.94.…`) says ID=rhcos, VERSION_ID and OPENSHIFT_VERSION 4.17, RHEL_VERSION 9.4; a
    RHEL-numbered build (`9.6.…`, `10.1.…`) says ID=rhel and VERSION_ID=RHEL_VERSION."""
    rhel = rhel_of_build(build)
    if rhel is None:
        return None
    if match := _LEGACY_OPENSHIFT.match(build):
        openshift = f"4.{match[1]}"
        return GpuNode(
            name=NodeName(""),
            ostree_version=RhcosVersion(build),
            os_id="rhcos",
            os_version_id=openshift,
            rhel_version=rhel,
            openshift_version=openshift,
            kernel=kernel,
        )
    return GpuNode(
        name=NodeName(""),
        ostree_version=RhcosVersion(build),
        os_id="rhel",
        os_version_id=rhel,
        rhel_version=rhel,
        kernel=kernel,
    )


def _major(build: str) -> str | None:
    rhel = rhel_of_build(build)
    return rhel.split(".")[0] if rhel else None
