"""The container-toolkit state: the NVIDIA Container Toolkit DaemonSet, its ServiceAccount and SCC binding.

Input: the policy (`toolkit`, `daemonsets`, `operator`), the resolved image and the
platform.  Output: manifest dicts in apply order (templates/state-container-toolkit).
Every policy string reaches the YAML through `templating.yaml_value` only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from ocp_gpu.model import labels
from ocp_gpu.model import policy as policy_model
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import ContainerRuntime
from ocp_gpu.planning import operands
from ocp_gpu.rendering import templating

COMPONENT: Final = "state-container-toolkit"
DAEMONSET: Final = "nvidia-container-toolkit-daemonset"
APP: Final = DAEMONSET
TOOLKIT_COMPONENT: Final = "nvidia-container-toolkit"
SERVICE_ACCOUNT: Final = "nvidia-container-toolkit"
CONTAINER: Final = "nvidia-container-toolkit-ctr"
SCC_CLUSTER_ROLE: Final = "system:openshift:scc:privileged"
SCC_ROLE_BINDING: Final = "nvidia-container-toolkit-privileged-scc"
DEFAULT_CONTAINER_ANNOTATION: Final = "kubectl.kubernetes.io/default-container"
# The driver validation's marker (DESIGN §4): the runtime is configured once a driver is loaded.
DRIVER_READY_MARKER: Final = "/run/nvidia/validations/driver-ready"

# Where each runtime keeps its configuration and socket on the host (mounted at /runtime/...).
RUNTIME_PATHS: Final = {
    ContainerRuntime.CONTAINERD: ("/etc/containerd", "/run/containerd", "config.toml", "containerd.sock"),
    ContainerRuntime.CRIO: ("/etc/crio/crio.conf.d", "/var/run/crio", "99-nvidia.conf", "crio.sock"),
    ContainerRuntime.DOCKER: ("/etc/docker", "/var/run", "daemon.json", "docker.sock"),
}
# Env the template owns: a policy's toolkit.env never replaces them.
_OWNED_ENV: Final = frozenset({"RUNTIME", "RUNTIME_CONFIG", "RUNTIME_SOCKET", "ROOT"})


@dataclasses.dataclass(frozen=True)
class ToolkitRenderInputs:
    namespace: str
    openshift: bool
    # The resolved toolkit image (images.resolve_image for "toolkit").
    image: ImageRef


def render_toolkit_state(policy: policy_model.Policy, inputs: ToolkitRenderInputs) -> list[dict[str, Any]]:
    """Every state-container-toolkit manifest, in apply order."""
    return templating.render_state(COMPONENT, toolkit_state_context(policy, inputs))


def toolkit_state_context(policy: policy_model.Policy, inputs: ToolkitRenderInputs) -> dict[str, Any]:
    toolkit, daemonsets = policy.toolkit, policy.daemonsets
    runtime = operands.container_runtime(policy.operator.default_runtime, inputs.openshift)
    config_dir, socket_dir, config_file, socket_file = RUNTIME_PATHS[runtime]
    common_labels = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: TOOLKIT_COMPONENT}
    # Ours win over the policy's: the selector must stay what the DaemonSet was created with.
    identity = {labels.APP: APP, **common_labels}
    defaults = {
        "RUNTIME": runtime.value,
        "RUNTIME_CONFIG": f"/runtime/config-dir/{config_file}",
        "RUNTIME_SOCKET": f"/runtime/sock-dir/{socket_file}",
        "ROOT": toolkit.install_dir,
        "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver",
        "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
        "RUNTIME_CLASS": policy.operator.runtime_class,
    }
    env = dict(defaults)
    for item in toolkit.env:
        if item.name not in _OWNED_ENV:
            env[item.name] = item.value
    return {
        "namespace": inputs.namespace,
        "openshift": inputs.openshift,
        "name": DAEMONSET,
        "service_account": SERVICE_ACCOUNT,
        "scc_cluster_role": SCC_CLUSTER_ROLE,
        "scc_role_binding": SCC_ROLE_BINDING,
        "common_labels": common_labels,
        "labels": {**daemonsets.labels, **identity},
        "selector": {labels.APP: APP},
        "update_strategy": operands.update_strategy(daemonsets),
        "pod_labels": {**daemonsets.labels, **identity},
        "pod_annotations": {**daemonsets.annotations, DEFAULT_CONTAINER_ANNOTATION: CONTAINER},
        "priority_class_name": daemonsets.priority_class_name,
        "node_selector": {labels.deploy_label("container-toolkit"): "true"},
        "tolerations": [toleration.as_wire() for toleration in daemonsets.tolerations],
        "image_pull_secrets": [{"name": name} for name in toolkit.image.pull_secrets],
        "pod_security_context": dict(daemonsets.pod_security_context),
        "image": inputs.image,
        "pull_policy": toolkit.image.pull_policy.value,
        "wait_for_driver": (
            f"until [ -f {DRIVER_READY_MARKER} ]; do echo waiting for the driver validation; sleep 5; done"
        ),
        "container": CONTAINER,
        "args": list(toolkit.args),
        "env": [{"name": name, "value": value} for name, value in env.items()],
        "resources": toolkit.resources.as_wire(),
        "install_dir": toolkit.install_dir,
        "runtime_config_dir": config_dir,
        "runtime_socket_dir": socket_dir,
    }
