"""Whether the GPU nodes are ready for the OpenShift upgrade in progress: the `UpgradePreflight` condition.

While the Cluster Version Operator applies a new release (ClusterVersion's newest history
entry is `Partial`), it updates the `openshift/driver-toolkit` ImageStream before the Machine
Config Operator reboots any node into the new RHCOS: the floating tags (`latest` for RHCOS 9,
`latest-rhel-10` for RHCOS 10; only those of streams the GPU nodes run count) then point at the
new payload's Driver Toolkit images, each of which should also carry a tag named after its
RHCOS build.  Those builds that no GPU node runs
yet are the upgrade's targets.  For each the condition says whether its DTK tag is there and
which driver image its nodes will run (`-rhel9.6`, `-rhel10.1`), before any node moves; a
floating tag whose image has no build tag is the problem the admin must hear about then
(reason `DriverToolkitTagMissing`, also an Event), not when the first GPU node has rebooted.

Decides from ClusterVersion's JSON, the ImageStream record and the nodes' builds; it never
reads, writes or looks at a clock.  No condition when no upgrade is in progress.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ocp_gpu.model import images
from ocp_gpu.model.imagestream_tags import ImageStream
from ocp_gpu.planning.drivers import dtk_images
from ocp_gpu.planning.status import conditions

CONDITION: Final = "UpgradePreflight"
# every target build has its DTK tag
READY: Final = "TargetReady"
# a floating tag's image has no build tag: nodes rebooting into it would get no driver build
TAG_MISSING: Final = "DriverToolkitTagMissing"
# ClusterVersion's history entry of an update being applied
PARTIAL: Final = "Partial"

# 416.94.202407030122-0: RHEL 9.4; 9.6.20250909-0 and 10.1.20251015-0: RHEL 9.6, 10.1
_LEGACY_BUILD = re.compile(r"^4\d+\.(\d)(\d+)\.")
_RHEL_BUILD = re.compile(r"^(\d+)\.(\d+)\.\d{8}")


@dataclasses.dataclass(frozen=True)
class TargetBuild:
    """An RHCOS build the upgrade brings and no GPU node runs yet."""

    build: str
    dtk_image: str
    driver_image: str


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
) -> conditions.Condition | None:
    """The `UpgradePreflight` condition, or None when no OpenShift upgrade is in progress."""
    target = upgrading_to(cluster_version)
    if target is None or stream is None:
        # no upgrade running (or no Driver Toolkit stream: not OpenShift's DTK mode)
        return None
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
            rhel = rhel_of_build(build)
            if build in running or rhel is None:
                continue  # a build the GPU nodes already run is no target
            driver = images.driver_image_for(driver_image, f"rhel{rhel}")
            targets.append(TargetBuild(build, image, str(driver)))
    described = "; ".join(
        f"RHCOS {t.build}: Driver Toolkit tag present, driver image {t.driver_image}" for t in targets
    )
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
