"""The checks on a ClusterPolicy the CRD schema cannot make.

`validate_policy` finds selectors that do not parse, upgrade budgets that can never
let a node through, images that cannot be resolved, contradictory options.  Each
problem names the field and the fix.  Pure: no I/O, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from ocp_gpu.model import images
from ocp_gpu.model.policy import api_values, resource_config, selectors
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.model.policy.policy_spec import (
    DEFAULT_DCGM_HOST_PORT,
    INT_OR_PERCENT_RE,
    KernelModuleType,
    Policy,
    UpdateStrategy,
    UpgradePolicy,
    scaled_max_unavailable,
)

# --- validation -------------------------------------------------------------------


def _duplicate_env(policy: Policy) -> Iterator[PolicyProblem]:
    for field, env in api_values.env_lists(policy):
        names = [variable.name for variable in env]
        for name in sorted({name for name in names if names.count(name) > 1}):
            # The container would get one value and silently drop the other.
            yield PolicyProblem(
                field=field,
                message=f"the environment variable {name!r} is listed {names.count(name)} times",
                fix=f"keep one entry named {name!r}",
            )


def _pod_selectors(upgrade: UpgradePolicy) -> Iterator[PolicyProblem]:
    base = "spec.driver.upgradePolicy"
    for field, selector in (
        (f"{base}.waitForCompletion.podSelector", upgrade.wait_for_completion.pod_selector),
        (f"{base}.drain.podSelector", upgrade.drain.pod_selector),
    ):
        try:
            selectors.parse_label_selector(selector)
        except ValueError as error:
            # The upgrade would stop at this node's wait or drain step.
            yield PolicyProblem(
                field=field,
                message=f"{selector!r} is not a label selector: {error}",
                fix='use kubectl -l syntax, e.g. "app=training" or "job-type in (batch,train)"; "" for none',
            )


def _max_unavailable(policy: Policy) -> Iterator[PolicyProblem]:
    upgrade = policy.driver.upgrade_policy
    for field, value, zero_matters, zero_message in (
        (
            "spec.driver.upgradePolicy.maxUnavailable",
            upgrade.max_unavailable,
            upgrade.auto_upgrade,
            "with autoUpgrade on, no node may ever become unavailable, so no driver can ever upgrade",
        ),
        (
            "spec.daemonsets.rollingUpdate.maxUnavailable",
            policy.daemonsets.max_unavailable,
            policy.daemonsets.update_strategy is UpdateStrategy.ROLLING_UPDATE,
            "a RollingUpdate DaemonSet with maxUnavailable 0 is rejected by Kubernetes",
        ),
    ):
        if (isinstance(value, int) and value < 0) or (
            isinstance(value, str) and not INT_OR_PERCENT_RE.match(value)
        ):
            # Only a file can hold this: the CRD rejects it.
            yield PolicyProblem(
                field=field,
                message=f"{value!r} is neither a count nor a percentage",
                fix='use e.g. 1 or "25%"',
            )
        elif zero_matters and scaled_max_unavailable(value, 100) == 0:
            yield PolicyProblem(
                field=field, message=f"{value!r}: {zero_message}", fix='set it to at least 1 or "1%"'
            )


def _negative_numbers(policy: Policy) -> Iterator[PolicyProblem]:
    upgrade = policy.driver.upgrade_policy
    base = "spec.driver.upgradePolicy"
    for field, value in (
        (f"{base}.maxParallelUpgrades", upgrade.max_parallel_upgrades),
        (f"{base}.waitForCompletion.timeoutSeconds", upgrade.wait_for_completion.timeout_seconds),
        (f"{base}.gpuPodDeletion.timeoutSeconds", upgrade.gpu_pod_deletion.timeout_seconds),
        (f"{base}.drain.timeoutSeconds", upgrade.drain.timeout_seconds),
        (
            "spec.driver.precompiledFallback.imagePullTimeoutSeconds",
            policy.driver.precompiled_fallback.image_pull_timeout_seconds,
        ),
    ):
        if value < 0:
            # Only a file can hold this: the CRD's minimum rejects it.
            yield PolicyProblem(field=field, message=f"{value} is negative", fix="use 0 (no limit) or more")


def _images(policy: Policy, env: Mapping[str, str]) -> Iterator[PolicyProblem]:
    for key, component in policy.components().items():
        if not policy.deploys(key):
            # A disabled component's image is never used.
            continue
        if key == "vgpuManager":
            # NB: no release default (NVIDIA does not publish it): unset, it matters only where a
            # vm-vgpu node needs it, which planning decides (planning/drivers/vgpu_manager_plan.py);
            # a spec error here would stop every other operand too.
            continue
        resolved = images.resolve_image(component.image, component=key, env=env)
        if isinstance(resolved, PolicyProblem):
            yield resolved
    if policy.driver.enabled:
        resolved = images.resolve_image(policy.driver.manager.image, component="driver.manager", env=env)
        if isinstance(resolved, PolicyProblem):
            yield resolved
        for key, module in (("gds", policy.gds), ("gdrcopy", policy.gdrcopy)):
            # containers of the driver pods: their images matter only with the driver
            if not module.enabled:
                continue
            module_image = images.resolve_image(module.image, component=key, env=env)
            if isinstance(module_image, PolicyProblem):
                yield module_image


def _driver_options(policy: Policy) -> Iterator[PolicyProblem]:
    driver = policy.driver
    if not driver.enabled:
        dependants = [
            name
            for name, spec in (("toolkit", policy.toolkit), ("devicePlugin", policy.device_plugin))
            if spec.enabled
        ]
        if dependants:
            # Fine with a driver preinstalled on the hosts; otherwise they wait forever.
            yield PolicyProblem(
                field="spec.driver.enabled",
                message=f"the driver is not deployed but {' and '.join(dependants)} "
                f"{'need' if len(dependants) > 1 else 'needs'} one: "
                "they will wait for a driver installed on the hosts",
                fix="set spec.driver.enabled to true, unless the hosts have the NVIDIA driver preinstalled",
                severity=Severity.WARNING,
            )
    if driver.use_precompiled and driver.image.version.startswith("sha256:"):
        # Precompiled images are found by tag (<branch>-<kernel>-<os>); a digest has no tag to extend.
        yield PolicyProblem(
            field="spec.driver.version",
            message="usePrecompiled needs a driver branch to build tags from, not a digest",
            fix="set spec.driver.version to the driver branch, e.g. 570",
        )
    if driver.use_precompiled and driver.kernel_module_type is KernelModuleType.PROPRIETARY:
        # The image was built with one module type; the setting may be ignored.
        yield PolicyProblem(
            field="spec.driver.kernelModuleType",
            message="precompiled driver images ship the kernel modules they were built with; "
            "proprietary may not be honoured",
            fix="use kernelModuleType auto with usePrecompiled, or build the driver on the node",
            severity=Severity.WARNING,
        )
    for key, module in (("gds", policy.gds), ("gdrcopy", policy.gdrcopy)):
        if module.enabled and driver.use_precompiled:
            # Their modules are built on the node against the driver's sources, which precompiled images lack.
            yield PolicyProblem(
                field=f"spec.{key}.enabled",
                message=f"{key} builds its kernel module on the node; precompiled driver images cannot",
                fix=f"set spec.driver.usePrecompiled to false, or spec.{key}.enabled to false",
            )
    for kind, probe in (("startupProbe", driver.startup_probe), ("livenessProbe", driver.liveness_probe)):
        if probe is not None and probe.success_threshold not in (None, 0, 1):
            # Kubernetes rejects the pod template: the DaemonSet could not be applied.
            yield PolicyProblem(
                field=f"spec.driver.{kind}.successThreshold",
                message=f"{probe.success_threshold}: Kubernetes allows only 1 for a {kind}",
                fix=f"remove spec.driver.{kind}.successThreshold or set it to 1",
            )
    fallback = driver.precompiled_fallback
    field = "spec.driver.precompiledFallback"
    if fallback.enabled and not fallback.version:
        yield PolicyProblem(
            field=f"{field}.version",
            message="the fallback is enabled but has no driver version to build",
            fix=f"set {field}.version to a full driver version, e.g. 570.124.06",
        )
    elif fallback.enabled and images.parse_reference(f"x:{fallback.version}") is None:
        yield PolicyProblem(
            field=f"{field}.version",
            message=f"{fallback.version!r} is not a valid image tag",
            fix=f"set {field}.version to a full driver version, e.g. 570.124.06",
        )
    elif fallback.enabled and not driver.use_precompiled:
        # Nothing to fall back from.
        yield PolicyProblem(
            field=f"{field}.enabled",
            message="the fallback only applies with spec.driver.usePrecompiled",
            fix=f"set spec.driver.usePrecompiled to true, or {field}.enabled to false",
            severity=Severity.WARNING,
        )
    elif (
        fallback.enabled
        and driver.image.version
        and not driver.image.version.startswith("sha256:")
        and fallback.version.split(".")[0] != driver.image.version.split(".")[0]
    ):
        # Nodes that fall back would run another branch than their neighbours.
        yield PolicyProblem(
            field=f"{field}.version",
            message=f"{fallback.version!r} is not on the driver branch {driver.image.version!r} "
            "of the precompiled images",
            fix=f"set {field}.version to a release of the same branch",
            severity=Severity.WARNING,
        )


def _device_plugin_options(policy: Policy) -> Iterator[PolicyProblem]:
    plugin = policy.device_plugin
    # Each problem names the entry at fault (model/policy/resource_config.py).
    yield from resource_config.config_problems(plugin.resource_config, plugin.mig_strategy.value)
    if plugin.config_name and not plugin.config_default:
        # The config-manager would not know which of the ConfigMap's configs an unlabelled node uses.
        yield PolicyProblem(
            field="spec.devicePlugin.config.default",
            message=f"devicePlugin.config.name {plugin.config_name!r} is set but no default config is named",
            fix="set spec.devicePlugin.config.default to one of the ConfigMap's keys",
        )
    if plugin.config_name and plugin.resource_config.text:
        # The admin's ConfigMap is used as is; resourceConfig only shapes the operator's own.
        yield PolicyProblem(
            field="spec.devicePlugin.resourceConfig",
            message=f"ignored: devicePlugin.config.name {plugin.config_name!r} supplies the plugin's configs",
            fix="put the sharing settings in that ConfigMap, or unset devicePlugin.config.name",
            severity=Severity.WARNING,
        )
    if policy.nvidia_mig_strategy is not None and plugin.mig_strategy is not policy.nvidia_mig_strategy:
        # Both places name a strategy and they disagree.
        yield PolicyProblem(
            field="spec.devicePlugin.migStrategy",
            message=f"{plugin.mig_strategy.value!r} contradicts spec.mig.strategy "
            f"{policy.nvidia_mig_strategy.value!r}",
            fix="set the strategy in one place (spec.devicePlugin.migStrategy wins)",
        )


def _cdi_options(policy: Policy) -> Iterator[PolicyProblem]:
    """NVIDIA's validateClusterPolicySpec (controllers/state_manager.go, v26.7.0): the NRI plugin is
    the toolkit's and injects CDI devices, so it needs both.  NB: rendered anyway, operand pods
    would run with neither a runtime class nor an NRI plugin to give them GPUs."""
    if not policy.cdi.nri_plugin_enabled:
        return
    if not policy.cdi.enabled:
        yield PolicyProblem(
            field="spec.cdi.nriPluginEnabled",
            message="the NRI plugin injects CDI devices, but cdi.enabled is false",
            fix="set spec.cdi.enabled to true, or spec.cdi.nriPluginEnabled to false",
        )
    if not policy.toolkit.enabled:
        yield PolicyProblem(
            field="spec.cdi.nriPluginEnabled",
            message="the NRI plugin is the container toolkit's, but toolkit.enabled is false",
            fix="set spec.toolkit.enabled to true, or spec.cdi.nriPluginEnabled to false",
        )


def _alias_conflicts(policy: Policy) -> Iterator[PolicyProblem]:
    # NB: NVIDIA's podDeletion alone, or the seed's gpuPodDeletion alone, is no problem.
    for conflict in policy.alias_conflicts:
        # Both names of one setting are written, with different values: one is silently unused.
        yield PolicyProblem(
            field=conflict.used,
            message=f"{_wire(conflict.used_value)} is used; {conflict.ignored} says "
            f"{_wire(conflict.ignored_value)} and is ignored (podDeletion is NVIDIA's name for "
            "gpuPodDeletion: the same settings)",
            fix=f"set {conflict.used.rsplit('.', 1)[-1]} under one of the two names, "
            "or to the same value under both",
            severity=Severity.WARNING,
        )


def _wire(value: bool | int) -> str:
    """A setting's value as written in YAML (true, not True)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def validate_policy(policy: Policy, env: Mapping[str, str]) -> list[PolicyProblem]:
    """Every semantic problem of `policy`, errors and warnings, in spec order.

    `env` is the operator's environment (image defaults such as DRIVER_IMAGE).
    """
    return [
        *_images(policy, env),
        *_driver_options(policy),
        *_pod_selectors(policy.driver.upgrade_policy),
        *_max_unavailable(policy),
        *_negative_numbers(policy),
        *_device_plugin_options(policy),
        *_cdi_options(policy),
        *_duplicate_env(policy),
        *_alias_conflicts(policy),
        *_monitoring_options(policy),
        # what the API server would refuse in the rendered objects (bug C of issue 8)
        *api_values.problems(policy),
    ]


# Kubernetes' Service types and internal traffic policies (core/v1 Service).
SERVICE_TYPES: Final = ("ClusterIP", "NodePort", "LoadBalancer")
TRAFFIC_POLICIES: Final = ("Cluster", "Local")


def _monitoring_options(policy: Policy) -> list[PolicyProblem]:
    """The DCGM hostengine's port and the exporter's Service must be ones Kubernetes accepts."""
    found = []
    exporter = policy.dcgm_exporter
    if exporter.enabled and exporter.service_type not in SERVICE_TYPES:
        found.append(
            PolicyProblem(
                field="spec.dcgmExporter.service.type",
                message=f"{exporter.service_type!r} is not a Service type",
                fix=f"use one of {', '.join(SERVICE_TYPES)} (ExternalName cannot serve metrics)",
            )
        )
    if exporter.enabled and exporter.internal_traffic_policy not in TRAFFIC_POLICIES:
        found.append(
            PolicyProblem(
                field="spec.dcgmExporter.service.internalTrafficPolicy",
                message=f"{exporter.internal_traffic_policy!r} is not an internal traffic policy",
                fix=f"use one of {', '.join(TRAFFIC_POLICIES)}",
            )
        )
    if policy.dcgm.enabled and not 1 <= policy.dcgm.host_port <= 65535:
        found.append(
            PolicyProblem(
                field="spec.dcgm.hostPort",
                message=f"{policy.dcgm.host_port} is not a port number",
                fix=f"use a port from 1 to 65535 (unset: {DEFAULT_DCGM_HOST_PORT})",
            )
        )
    return found
