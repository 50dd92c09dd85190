"""Whether GPU nodes run a driver newer than the release's default, and what to keep then.

Decides, for each driver DaemonSet the plan wants, whether its nodes already run a driver
newer than the one the policy would roll them to by default (`driver.version` unset, so the
version is the release's, DRIVER_IMAGE): a cluster taken over from NVIDIA's operator, or
nodes an admin moved on by hand.  Such a DaemonSet keeps the newest running version (the
same image name with that version's tag) instead of rolling its nodes back, and the finding
`DriverNewerThanDefault` names the nodes, both versions and the fix (set `driver.version`).
An explicit `driver.version` is never second-guessed here: it rolls as asked
(planning/downgrades warns when that is a downgrade).  Precompiled keys (tagged by driver
branch) are left alone.  Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from packaging import version as versions

from ocp_gpu.model import images, labels, releases
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.drivers import driver_downgrades
from ocp_gpu.planning.drivers.driver_findings import DriverNewerThanDefault
from ocp_gpu.planning.drivers.driver_plan import DesiredDriverDaemonSet, DriverPlan
from ocp_gpu.planning.drivers.driver_strategy import Strategy


def running_version(node_labels: Mapping[str, str]) -> str | None:
    """The driver version a node runs, as GPU feature discovery labels it; None when unknown.

    `nvidia.com/cuda.driver-version.full` (GFD v0.15+), else the older
    `nvidia.com/cuda.driver.major/minor/rev` triple.  NB: GFD reads it from the loaded kernel
    module, so it is what runs, whoever installed it (NVIDIA's operator, ours, the host).
    """
    full = node_labels.get(labels.CUDA_DRIVER_VERSION_FULL, "").strip()
    if not full:
        parts = [node_labels.get(key, "").strip() for key in labels.CUDA_DRIVER_VERSION_PARTS]
        full = ".".join(parts) if all(parts) else ""
    return full if full and _comparable(full) is not None else None


def default_version(base_image: str) -> str | None:
    """The driver version of the default image: its tag, or the release table's for its digest."""
    tagged = driver_downgrades.driver_version(base_image)
    if tagged is not None:
        return tagged[0]
    return releases.driver_version_of(base_image)


def is_version_pinned(policy: policy_spec.Policy) -> bool:
    """The admin chose the driver's version: `driver.version`, or a full reference in `driver.image`."""
    image = policy.driver.image
    name = image.name.strip()
    return bool(image.version.strip()) or "@" in name or ":" in name.rpartition("/")[2]


def plan_keep_newer(
    plan: DriverPlan,
    running: Mapping[NodeName, str],
    existing_images: Mapping[str, str],
    default: str | None,
) -> tuple[DriverPlan, tuple[DriverNewerThanDefault, ...]]:
    """`plan` with each DaemonSet whose nodes run a newer driver than `default` kept on it.

    `running`: each GPU node's running version (`running_version`); `existing_images`: the
    driver image of each DaemonSet that exists now, by name (it keeps a version this rule
    chose after its nodes' labels go, e.g. GFD disabled).  The caller applies this only when
    the policy does not pin a version (`is_version_pinned`).
    """
    default_key = _comparable(default or "")
    if default is None or default_key is None:
        # the default's version is unknown (a mirror's digest): nothing to compare with
        return plan, ()
    desired: list[DesiredDriverDaemonSet] = []
    found: list[DriverNewerThanDefault] = []
    for entry in plan.desired:
        kept = _kept(entry, running, existing_images.get(entry.name), default, default_key)
        if kept is None:
            desired.append(entry)
            continue
        replaced, finding = kept
        desired.append(replaced)
        found.append(finding)
    findings = (*plan.findings, *found)
    return dataclasses.replace(plan, desired=tuple(desired), findings=findings), tuple(found)


def _kept(
    entry: DesiredDriverDaemonSet,
    running: Mapping[NodeName, str],
    existing_image: str | None,
    default: str,
    default_key: versions.Version,
) -> tuple[DesiredDriverDaemonSet, DriverNewerThanDefault] | None:
    if entry.strategy is Strategy.PRECOMPILED or entry.fallback_for is not None:
        # precompiled images are tagged by branch: a version cannot be kept by tag
        return None
    candidates: dict[str, list[NodeName]] = {}
    for node in entry.nodes:
        found = running.get(node)
        if found is not None:
            candidates.setdefault(found, []).append(node)
    existing = driver_downgrades.driver_version(existing_image) if existing_image else None
    if existing is not None:
        # the version this rule kept before: sticky, even when no node label says so any more
        candidates.setdefault(existing[0], [])
    newer = [text for text in candidates if (_comparable(text) or default_key) > default_key]
    if not newer:
        # no node runs anything newer than the default: it rolls as planned
        return None
    newest = max(newer, key=lambda text: _comparable(text) or default_key)
    reference = images.parse_reference(entry.driver_image)
    if reference is None:
        return None
    prefix = f"{reference.repository}/" if reference.repository else ""
    try:
        image = images.driver_image_for(images.ImageRef(f"{prefix}{reference.name}:{newest}"), entry.os_tag)
    except ValueError:
        # the version cannot make a valid tag with this OS: leave the plan as it is
        return None
    nodes = tuple(sorted(candidates[newest])) or entry.nodes
    return (
        dataclasses.replace(entry, driver_image=image),
        DriverNewerThanDefault(entry.name, nodes, newest, default),
    )


def _comparable(text: str) -> versions.Version | None:
    try:
        return versions.Version(text)
    except versions.InvalidVersion:
        return None


def newer_than_default_nodes(
    node_labels: Mapping[NodeName, Mapping[str, str]], default: str | None
) -> tuple[NodeName, ...]:
    """The nodes whose running driver is newer than `default` (for `ocp-gpu status`'s count)."""
    default_key = _comparable(default or "")
    if default_key is None:
        return ()
    return tuple(
        sorted(
            name
            for name, found in node_labels.items()
            if (text := running_version(found)) is not None
            and (_comparable(text) or default_key) > default_key
        )
    )


def versions_of(nodes: Sequence[tuple[NodeName, Mapping[str, str]]]) -> dict[NodeName, str]:
    """Each node's running driver version, for the nodes GFD labelled."""
    return {name: found for name, node_labels in nodes if (found := running_version(node_labels)) is not None}
