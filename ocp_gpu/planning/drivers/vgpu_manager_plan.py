"""Which vGPU manager DaemonSets should exist: the driver's per-key plan, for the vm-vgpu nodes.

NVIDIA builds its vGPU manager (the vGPU host driver) the way it builds the driver: on OpenShift
one DaemonSet per RHCOS build with the Driver Toolkit sidecar (controllers/object_controls.go at
v26.7.0: TransformVGPUManager calls transformOpenShiftDriverToolkitContainer, and
cleanupUnusedVGPUManagerDaemonsets collects the builds no node runs).  ocp-gpu reuses its driver
mechanism (driver_plan.plan_driver_daemonsets: keys, DTK tags, the DaemonSets ahead of an
OpenShift upgrade, garbage collection), fed with the nodes labelled
nvidia.com/gpu.deploy.vgpu-manager=true and the existing vGPU manager DaemonSets, and this module
turns the driver's plan into the vGPU manager's:

- the strategy is the Driver Toolkit on OpenShift (unless use_ocp_driver_toolkit is false), else
  vanilla (one DaemonSet per OS); never precompiled (NVIDIA publishes no precompiled vGPU manager);
- names `nvidia-vgpu-manager-daemonset-<key>` (NVIDIA's for DTK), selectors NVIDIA's for DTK
  (app=<name>), else app=nvidia-vgpu-manager-daemonset plus strategy and key;
- the image: `vgpuManager.repository/image/version`, which NVIDIA does not publish.  Unset while a
  vm-vgpu node exists, it is an Error naming the field and the fix, and nothing is planned (so
  nothing running is deleted).

Never does: read the cluster, render, delete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping

from ocp_gpu.model import images, labels
from ocp_gpu.model.driver_snapshot import DriverKey
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_names, driver_plan, driver_strategy
from ocp_gpu.planning.drivers.driver_strategy import Strategy

PREFIX = f"{labels.VGPU_MANAGER_APP}-"
_MAX_NAME = 63
_HASH_LENGTH = 8
IMAGE_FIELD = "spec.vgpuManager"


def image_problem(problem: PolicyProblem) -> PolicyProblem:
    """The unresolvable vGPU manager image, said as what it is: an image the admin must build."""
    return dataclasses.replace(
        problem,
        message=f"the vGPU manager image cannot be resolved ({problem.message}); NVIDIA does not publish it",
        fix=(
            "build NVIDIA's vGPU manager image from the vGPU host driver of the NVIDIA Licensing"
            " Portal (NVIDIA/gpu-driver-container, vgpu-manager/), push it to a registry the nodes"
            " pull from, and set "
            f"{IMAGE_FIELD}.repository, {IMAGE_FIELD}.image and {IMAGE_FIELD}.version"
        ),
    )


def settings_for_policy(
    policy: policy_spec.Policy, platform: platforms.Platform, env: Mapping[str, str]
) -> driver_plan.DriverSettings | PolicyProblem:
    """The driver planner's settings for the vGPU manager, or the image problem (for status)."""
    image = images.resolve_image(policy.vgpu_manager.image, component="vgpuManager", env=env)
    if isinstance(image, PolicyProblem):
        return image_problem(image)
    # the Driver Toolkit where the driver would use it; no precompiled vGPU manager exists
    strategy = Strategy.DTK if driver_strategy.driver_toolkit_allowed(platform, policy) else Strategy.VANILLA
    return driver_plan.DriverSettings(strategy=strategy, driver_image=image)


def daemonset_name(key: str) -> str:
    """`nvidia-vgpu-manager-daemonset-<key>` (NVIDIA's for an RHCOS build), at most 63 characters."""
    body = re.sub(r"[^a-z0-9.-]", "-", key.lower()).strip(".-")
    if len(PREFIX) + len(body) <= _MAX_NAME:
        return PREFIX + body
    # too long: cut, and the hash of the whole key keeps two long keys apart
    room = _MAX_NAME - len(PREFIX) - 1 - _HASH_LENGTH
    return f"{PREFIX}{body[:room].rstrip('.-')}-{hashlib.sha256(key.encode()).hexdigest()[:_HASH_LENGTH]}"


def pod_selector(strategy: Strategy, key: DriverKey, name: str) -> dict[str, str]:
    """NVIDIA's selector for a DTK DaemonSet (app=<its name>); else app plus strategy and key, so
    the selectors of two OS keys never overlap."""
    if strategy is Strategy.DTK:
        return {labels.APP: name}
    return {
        labels.APP: labels.VGPU_MANAGER_APP,
        labels.DRIVER_STRATEGY: strategy.value,
        labels.DRIVER_KEY: driver_names.key_label_value(key),
    }


def for_vgpu_manager(plan: driver_plan.DriverPlan) -> driver_plan.DriverPlan:
    """The driver planner's plan (for the vm-vgpu nodes) as the vGPU manager's DaemonSets.

    New DaemonSets get the vGPU manager's names (existing ones keep theirs); the driver's
    `nvidia.com/precompiled` label is left off (there is no precompiled vGPU manager).
    """
    desired: list[driver_plan.DesiredDriverDaemonSet] = []
    for entry in plan.desired:
        name = entry.name if entry.exists else daemonset_name(entry.key)
        kept = {key: value for key, value in entry.labels.items() if key != labels.PRECOMPILED}
        desired.append(
            dataclasses.replace(
                entry, name=name, labels=kept, selector=pod_selector(entry.strategy, entry.key, name)
            )
        )
    return dataclasses.replace(plan, desired=tuple(sorted(desired, key=lambda d: d.name)))
