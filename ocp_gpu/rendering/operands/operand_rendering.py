"""Render any operand of rendering/operands/operand_catalog.py: one common context plus the operand's own.

Every operand's templates (`templates/state-<name>/`) get the same common context:
the namespace, the DaemonSet's name and identity labels, its ServiceAccount and SCC
binding, the update strategy, the node selector on `nvidia.com/gpu.deploy.<name>`,
the tolerations (`nvidia.com/gpu` Exists NoSchedule first, then
`daemonsets.tolerations`), the priority class, the image and its pull settings, the
args, env and resources of the policy section, and the RuntimeClass to run under.
What an operand's templates need beyond that comes from its own module (its `RENDERING`).

Also the pre-requisites every operand shares (templates/state-pre-requisites): the
RuntimeClass `operator.runtimeClass`.

Pure: no I/O; every value reaches YAML through `templating.render_state`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ocp_gpu.model import images, labels, operand_types
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import api_values, policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import operand_catalog, operand_common
from ocp_gpu.rendering.operands.operand_common import OperandRenderInputs

# The `spec.updateStrategy` of a non-driver operand DaemonSet (operand_common.update_strategy).
update_strategy = operand_common.update_strategy


def component(operand: operand_types.Operand) -> str:
    """The app.kubernetes.io/component label of every object `operand` renders."""
    return operand_catalog.RENDERINGS[operand.name].identity.component


def named_config_maps(
    operand: operand_types.Operand, policy: policy_spec.Policy
) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's ConfigMaps an operand mounts (field -> name), and the key its pod reads (field -> key).

    The operator checks them before applying the operand (planning/config_maps).
    """
    # NB: the driver renders apart (its ConfigMaps: desired/driver_manifests.named_config_maps): none here.
    own = operand_catalog.RENDERINGS.get(operand.name)
    return own.named_config_maps(policy) if own is not None else ({}, {})


def operand_context(
    operand: operand_types.Operand, policy: policy_spec.Policy, inputs: OperandRenderInputs
) -> dict[str, Any]:
    """The template context of one operand: the common part, then its own."""
    own_rendering = operand_catalog.RENDERINGS[operand.name]
    identity, own = own_rendering.identity, own_rendering.context
    spec = policy.components()[operand.section]
    daemonsets = policy.daemonsets
    common_labels = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: identity.component}
    # Ours win over the policy's: the selector must stay what the DaemonSet was created with.
    # NB: app=<app> on every pod (the pod watch's), also where NVIDIA's selector is another label.
    pod_identity = {labels.APP: operand.app, **operand.selector, **common_labels}
    extra = own(policy, inputs)
    env = dict(extra.pop("default_env", {}))
    pod_annotations = {
        **daemonsets.annotations,
        **operand_common.nri_annotations(policy, identity.gpu_container),
        **extra.pop("pod_annotations", {}),
        operand_common.DEFAULT_CONTAINER_ANNOTATION: identity.container,
    }
    for item in spec.env if identity.section_env else ():
        if item.name not in identity.owned_env:
            env[item.name] = item.value
    return {
        "namespace": inputs.namespace,
        "openshift": inputs.openshift,
        "name": operand.daemonset,
        "service_account": identity.service_account,
        "scc_cluster_role": operand_common.SCC_CLUSTER_ROLE,
        "scc_role_binding": f"{identity.service_account}-privileged-scc",
        "common_labels": common_labels,
        "labels": {**daemonsets.labels, **pod_identity},
        "selector": operand.selector,
        "update_strategy": update_strategy(daemonsets),
        "pod_labels": {**daemonsets.labels, **pod_identity},
        "pod_annotations": pod_annotations,
        "priority_class_name": daemonsets.priority_class_name,
        "node_selector": operand.node_selector,
        "tolerations": operand_common.tolerations(policy),
        # NB: once each: server-side apply refuses a list with two entries of one name.
        "image_pull_secrets": [{"name": name} for name in dict.fromkeys(spec.image.pull_secrets)],
        "pod_security_context": dict(daemonsets.pod_security_context),
        "image": inputs.image,
        "wait_image": inputs.wait_image or inputs.image,
        "pull_policy": spec.image.pull_policy.value,
        "container": identity.container,
        "args": list(spec.args) if identity.section_env else [],
        "env": [{"name": name, "value": value} for name, value in env.items()],
        "resources": spec.resources.as_wire(),
        "runtime_class_name": operand_common.runtime_class_name(policy, inputs.openshift),
        "host_network": spec.host_network,
        "kubelet_root_dir": policy.host_paths.kubelet_root_dir,
        "validations_dir": operand_common.VALIDATIONS_DIR,
        **extra,
    }


def wait_image(policy: policy_spec.Policy, env: Mapping[str, str]) -> ImageRef | None:
    """The image of the validation-marker waits: the validator's (the operator's own); None
    when it cannot be resolved (the operand's own image then, and the validator reports why)."""
    resolved = images.resolve_image(policy.validator.image, component="validator", env=env)
    return None if isinstance(resolved, PolicyProblem) else resolved


def driver_manager_image(
    operand: operand_types.Operand, policy: policy_spec.Policy, env: Mapping[str, str]
) -> ImageRef | PolicyProblem | None:
    """The image of the operand's own k8s-driver-manager init container (`<section>.driverManager`,
    its default DRIVER_MANAGER_IMAGE: the driver's), the problem resolving it, or None (it has none)."""
    section = f"{operand.section}.driverManager"
    spec = policy.components()[operand.section]
    manager = getattr(spec, "driver_manager", None)
    if section not in operand.images or not isinstance(manager, policy_spec.DriverManagerSpec):
        return None
    return images.resolve_image(manager.image, component=section, env=env)


def shared_host_namespaces(
    operand: operand_types.Operand, policy: policy_spec.Policy
) -> dict[str, str | None]:
    """The host namespaces (NET, IPC) the operand's pods share, as its template renders them,
    each with the ClusterPolicy field that turns it on (None: the template always does).

    NB: tests/unit/test_host_sysctls.py renders every operand to keep this in step with the
    templates (hostPID is not here: no sysctl belongs to the PID namespace).
    """
    shared: dict[str, str | None] = {}
    if policy.components()[operand.section].host_network:
        # every operand's template: hostNetwork from <section>.hostNetwork
        shared[api_values.NET] = f"spec.{operand.section}.hostNetwork"
    # and what its own templates share besides (the MIG manager: hostIPC); the driver renders apart
    own = operand_catalog.RENDERINGS.get(operand.name)
    return {**shared, **(own.shared_host_namespaces(policy) if own is not None else {})}


def covered() -> frozenset[str]:
    """The operands this module renders (a unit test checks: every generic one)."""
    return frozenset(operand_catalog.RENDERINGS)


# NB: every reconcile pass renders every operand, and most passes (an operand pod became
# Ready, a node joined) render exactly what the previous one did; rendering is most of a
# pass's CPU.  One slot per operand, compared by equality (the policy holds dicts: not hashable).
_last_render: dict[str, tuple[object, tuple[dict[str, Any], ...]]] = {}


def render_operand(
    operand: operand_types.Operand, policy: policy_spec.Policy, inputs: OperandRenderInputs
) -> list[dict[str, Any]]:
    """Every manifest of one generic operand, in apply (file name) order (a copy: the caller's own)."""
    key = (policy, inputs, templating.templates_dir())
    last = _last_render.get(operand.name)
    if last is None or last[0] != key:
        context = operand_context(operand, policy, inputs)
        last = (key, tuple(templating.render_state(operand.component, context)))
        _last_render[operand.name] = last
    # NB: a deep copy costs a fraction of a render (jinja2 + YAML parsing).
    return copy.deepcopy(list(last[1]))


def runtime_classes(policy: policy_spec.Policy) -> list[tuple[str, str]]:
    """The RuntimeClasses (name, handler) NVIDIA's pre-requisites state creates for this policy.

    `operator.runtimeClass` (handler nvidia); with CDI also `nvidia-cdi` and `nvidia-legacy`,
    the runtimes the toolkit registers for each mode (NVIDIA deletes them with CDI off); none
    with the NRI plugin, which needs no runtime (NVIDIA disables the state).
    """
    if policy.cdi.nri_plugin_enabled:
        return []
    classes = [(policy.operator.runtime_class, operand_common.RUNTIME_HANDLER)]
    if policy.cdi.enabled:
        classes += [(name, name) for name in operand_common.CDI_RUNTIME_CLASSES]
    return classes


def render_prerequisites(policy: policy_spec.Policy, namespace: str) -> list[dict[str, Any]]:
    """The objects every operand needs first: the RuntimeClasses."""
    common_labels = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: "nvidia-runtime"}
    manifests: list[dict[str, Any]] = []
    for name, handler in runtime_classes(policy):
        manifests += templating.render_state(
            operand_common.PREREQUISITES,
            {
                "namespace": namespace,
                "runtime_class": name,
                "handler": handler,
                "common_labels": common_labels,
            },
        )
    return manifests
