"""The vGPU device manager operand: creates a vm-vgpu node's vGPU devices (mediated devices).

NVIDIA's `state-vgpu-device-manager` at v26.7.0: DaemonSet `nvidia-vgpu-device-manager`
(selector app= the same, NVIDIA's) on the nodes labelled
nvidia.com/gpu.deploy.vgpu-device-manager=true (the vm-vgpu nodes, while
spec.sandboxWorkloads.enabled), image vgpu-device-manager (VGPU_DEVICE_MANAGER_IMAGE).  Its init
container waits for the vGPU manager's validation (marker vgpu-manager-ready, or
host-vgpu-manager-ready); the manager then applies the config its node's
`nvidia.com/vgpu.config` names (else DEFAULT_VGPU_CONFIG, from vgpuDeviceManager.config.default)
from CONFIG_FILE, the ConfigMap `vgpuDeviceManager.config.name` or ours,
`default-vgpu-devices-config` (model/vgpu_catalog.py), and reports in
`nvidia.com/vgpu.config.state` (pending, success, failed).  Env and flags as vgpu-device-manager
v0.5.0's cmd/nvidia-k8s-vgpu-dm reads them (NODE_NAME, NAMESPACE, CONFIG_FILE,
DEFAULT_VGPU_CONFIG).  Pure.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from ocp_gpu.model import operand_types, vgpu_catalog
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "vgpu-device-manager",
    "vgpuDeviceManager",
    "nvidia-vgpu-device-manager",
    reads=("hostPaths",),
    images=("vgpuDeviceManager", "validator"),
    deploy_on=operand_types.DeployOn.VM_VGPU,
    kinds=(*operand_types.BASE_KINDS, "ConfigMap", "Role", *operand_types.CLUSTER_RBAC),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-vgpu-device-manager",
    service_account="nvidia-vgpu-device-manager",
    container="nvidia-vgpu-device-manager",
    owned_env=frozenset({"NAMESPACE", "NODE_NAME", "CONFIG_FILE", "DEFAULT_VGPU_CONFIG"}),
)
# NVIDIA's name for the ConfigMap the operator creates when the policy names none.
CONFIG_MAP: Final = policy_spec.DEFAULT_VGPU_DEVICES_CONFIG
CONFIG_FIELD: Final = "spec.vgpuDeviceManager.config.name"
# Where the container finds it (NVIDIA's mount).
CONFIG_DIR: Final = "/vgpu-config"
# The vGPU manager's markers the init container waits for, either (NVIDIA's, cmd/nvidia-validator).
VGPU_MANAGER_MARKER: Final = "vgpu-manager-ready"
HOST_VGPU_MANAGER_MARKER: Final = "host-vgpu-manager-ready"


def named_config_maps(policy: policy_spec.Policy) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's ConfigMap of vGPU configs (field -> name) and the key the manager reads."""
    name = policy.vgpu_device_manager.config_name
    return ({CONFIG_FIELD: str(name)} if name else {}), {CONFIG_FIELD: vgpu_catalog.CONFIG_KEY}


def config_text() -> str:
    """Our vGPU devices config file (ConfigMap default-vgpu-devices-config, key config.yaml)."""
    return yaml.safe_dump(vgpu_catalog.default_configs(), sort_keys=False)


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    manager = policy.vgpu_device_manager
    directory = operand_common.VALIDATIONS_DIR
    return {
        "default_env": {
            "CONFIG_FILE": f"{CONFIG_DIR}/{vgpu_catalog.CONFIG_KEY}",
            "DEFAULT_VGPU_CONFIG": manager.config_default,
        },
        # NVIDIA's wait, word for word.
        "wait_for_vgpu_manager": (
            f"until [ -f {directory}/{VGPU_MANAGER_MARKER} ] ||"
            f" [ -f {directory}/{HOST_VGPU_MANAGER_MARKER} ];"
            " do echo waiting for NVIDIA vGPU Manager to be setup; sleep 5; done"
        ),
        # Ours only when the policy names none; the DaemonSet mounts whichever applies.
        "config_map": CONFIG_MAP if not manager.config_name else "",
        "config_data": {vgpu_catalog.CONFIG_KEY: config_text()},
        "mounted_config_map": manager.config_name or CONFIG_MAP,
        "config_dir": CONFIG_DIR,
        "driver_root": policy.host_paths.driver_install_dir,
        "host_root": policy.host_paths.root_fs,
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context, named_config_maps=named_config_maps)
