"""The container-toolkit operand's own context: runtime paths, install dir, the driver marker wait.

The common context (DaemonSet identity, tolerations, image, env, ...) comes from
rendering/operands/operand_rendering.py; this module adds what only the toolkit's templates
(templates/state-container-toolkit) use.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_spec import ContainerRuntime
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "container-toolkit",
    "toolkit",
    "nvidia-container-toolkit-daemonset",
    images=("toolkit", "validator"),
    kinds=operand_types.BASE_KINDS,
)
DAEMONSET: Final = OPERAND.daemonset
APP: Final = OPERAND.app
IDENTITY: Final = operand_common.Identity(
    component="nvidia-container-toolkit",
    service_account="nvidia-container-toolkit",
    container="nvidia-container-toolkit-ctr",
    owned_env=frozenset({"RUNTIME", "RUNTIME_CONFIG", "RUNTIME_SOCKET", "ROOT"}),
)
# The driver validation's marker (DESIGN §4): the runtime is configured once a driver is loaded.
DRIVER_READY_MARKER: Final = "driver-ready"

# Where each runtime keeps its configuration and socket on the host (mounted at /runtime/...).
RUNTIME_PATHS: Final = {
    ContainerRuntime.CONTAINERD: ("/etc/containerd", "/run/containerd", "config.toml", "containerd.sock"),
    ContainerRuntime.CRIO: ("/etc/crio/crio.conf.d", "/var/run/crio", "99-nvidia.conf", "crio.sock"),
    ContainerRuntime.DOCKER: ("/etc/docker", "/var/run", "daemon.json", "docker.sock"),
}


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    toolkit = policy.toolkit
    runtime = policy_spec.container_runtime(policy.operator.default_runtime, inputs.openshift)
    config_dir, socket_dir, config_file, socket_file = RUNTIME_PATHS[runtime]
    return {
        "default_env": {
            "RUNTIME": runtime.value,
            "RUNTIME_CONFIG": f"/runtime/config-dir/{config_file}",
            "RUNTIME_SOCKET": f"/runtime/sock-dir/{socket_file}",
            "ROOT": toolkit.install_dir,
            "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver",
            "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
            # NB: the installer's name for it (NVIDIA_RUNTIME_NAME's alias, NVIDIA's operator sets
            # this one): NVIDIA/nvidia-container-toolkit@v1.20.0 cmd/nvidia-ctk-installer/container/
            # runtime/runtime.go.  No program reads RUNTIME_CLASS (model/image_contracts.py).
            "CONTAINERD_RUNTIME_CLASS": policy.operator.runtime_class,
        },
        "wait_for_driver": operand_common.marker_wait(DRIVER_READY_MARKER, "the driver validation"),
        "install_dir": toolkit.install_dir,
        "runtime_config_dir": config_dir,
        "runtime_socket_dir": socket_dir,
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
