"""The vGPU manager manifests the operator would apply for one view of the cluster: plan, then render.

Pure, as desired/driver_manifests.py (whose `DriverView` it reads): the vm-vgpu nodes (those
labelled nvidia.com/gpu.deploy.vgpu-manager=true) and the existing vGPU manager DaemonSets go
through the driver planner (planning/drivers/vgpu_manager_plan.py), then
rendering/operands/vgpu_manager.py renders them.  No I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from ocp_gpu.desired import driver_manifests
from ocp_gpu.kube import reading
from ocp_gpu.model import driver_snapshot, images, imagestream_tags, labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import config_maps, delivery, platforms
from ocp_gpu.planning.drivers import driver_plan, dtk_images, vgpu_manager_plan
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.planning.upgrades import upgrade_preflight
from ocp_gpu.rendering.operands import vgpu_manager

KERNEL_MODULE_CONFIG_FIELD: Final = "spec.vgpuManager.kernelModuleConfig.name"


@dataclasses.dataclass(frozen=True)
class VgpuManagerManifests:
    plan: driver_plan.DriverPlan
    # Apply order; without ownership metadata (kube.applying.owned adds it at apply time).
    manifests: tuple[dict[str, Any], ...]


def vgpu_nodes(view: driver_manifests.DriverView) -> tuple[driver_snapshot.GpuNode, ...]:
    """The GPU nodes the operator gave the vGPU manager's deploy label (the vm-vgpu nodes)."""
    deploy = vgpu_manager.OPERAND.deploy_label
    return tuple(
        driver_snapshot.GpuNode.from_facts(facts)
        for facts in view.node_facts
        if facts.is_gpu_node and facts.labels.get(deploy) == "true"
    )


def desired_vgpu_manager_manifests(
    policy: policy_spec.Policy, platform: platforms.Platform, view: driver_manifests.DriverView
) -> VgpuManagerManifests | PolicyProblem:
    """The vGPU manager's manifests on `view` (its `daemonsets`: the vGPU manager's), or the problem
    that prevents any while a vm-vgpu node exists: an image that cannot be resolved, or the
    kernelModuleConfig ConfigMap missing (or unreadable offline: its keys decide the mounts)."""
    nodes = vgpu_nodes(view)
    settings = vgpu_manager_plan.settings_for_policy(policy, platform, view.env)
    if isinstance(settings, PolicyProblem):
        # No vm-vgpu node: nothing to plan, nothing to say (the leftovers, if any, have no node).
        return settings if nodes else VgpuManagerManifests(driver_plan.DriverPlan((), (), ()), ())
    manager_image = images.resolve_image(
        policy.vgpu_manager.driver_manager.image, component="vgpuManager.driverManager", env=view.env
    )
    if isinstance(manager_image, PolicyProblem):
        return manager_image
    named = named_config_maps(policy)
    missing = config_maps.missing_config_map_problem(named, view.config_map_keys, view.namespace)
    if missing is not None and nodes:
        # NB: nothing is applied or deleted: what runs keeps running until the ConfigMap exists.
        # Without a vm-vgpu node nothing is planned and nothing said (as for the image above).
        return missing
    module_config = policy.vgpu_manager.kernel_module_config_map
    stream = (
        dtk_images.resolve_driver_toolkit_stream(reading.image_stream_singleton(view.dtk_imagestream))
        if platform.is_openshift
        else driver_snapshot.DriverToolkitStream(driver_snapshot.StreamState.ABSENT, reason="not OpenShift")
    )
    ahead: tuple[driver_snapshot.GpuNode, ...] = ()
    if settings.strategy is Strategy.DTK:
        # an OpenShift upgrade in progress: its target builds' DaemonSets before their nodes (as the driver's)
        record = reading.image_stream_singleton(view.dtk_imagestream)
        ahead = upgrade_preflight.ahead_nodes(
            delivery.present(view.cluster_version),
            record if isinstance(record, imagestream_tags.ImageStream) else None,
            (str(node.ostree_version) for node in nodes if node.ostree_version),
            settings.driver_image,
        )
    observed = driver_snapshot.DriverSnapshot(nodes=nodes, daemonsets=view.daemonsets, stream=stream)
    plan = vgpu_manager_plan.for_vgpu_manager(driver_plan.plan_driver_daemonsets(observed, settings, ahead))
    manifests = vgpu_manager.render_vgpu_manager_state(
        plan.desired,
        policy,
        vgpu_manager.VgpuManagerRenderInputs(
            namespace=view.namespace,
            openshift=platform.is_openshift,
            manager_image=manager_image,
            openshift_version=reading.openshift_version(delivery.present(view.cluster_version) or {}),
            kernel_module_config_keys=((view.config_map_keys or {}).get(module_config) or ())
            if module_config
            else (),
        ),
    )
    return VgpuManagerManifests(plan, tuple(manifests))


def named_config_maps(policy: policy_spec.Policy) -> dict[str, str]:
    """The ConfigMaps the vgpuManager section names: field path -> name (unset fields left out)."""
    name = policy.vgpu_manager.kernel_module_config_map
    return {KERNEL_MODULE_CONFIG_FIELD: name} if name else {}


def is_vgpu_manager_daemonset(daemonset: driver_snapshot.DriverDaemonSet) -> bool:
    """A DaemonSet of ours that runs the vGPU manager (by its component label, never its name)."""
    return daemonset.labels.get(labels.COMPONENT) == labels.VGPU_MANAGER_COMPONENT
