"""The sandbox validator operand: checks a VM node's stack and leaves NVIDIA's markers.

NVIDIA's `state-sandbox-validation` at v26.7.0: DaemonSet `nvidia-sandbox-validator` (its
selector app= the same and app.kubernetes.io/part-of=gpu-operator, NVIDIA's) on the nodes
labelled nvidia.com/gpu.deploy.sandbox-validator=true (vm-passthrough and vm-vgpu).  It runs
our validator, as the operator validator does: `ocp-gpu validate vfio-pci` writes the node's
workload (marker workload-type) and, on a vm-passthrough node, checks that every NVIDIA GPU
is bound to vfio-pci (marker vfio-pci-ready), which the sandbox device plugin waits for;
`ocp-gpu validate vgpu-manager` and `vgpu-devices` check, on a vm-vgpu node, that the vGPU
manager runs (marker vgpu-manager-ready, which the vGPU device manager waits for) and that vGPU
devices exist (marker vgpu-devices-ready, the sandbox device plugin's).
Image: spec.validator's (VALIDATOR_IMAGE, the operator's own).  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "sandbox-validator",
    "validator",
    "nvidia-sandbox-validator",
    reads=("sandboxWorkloads", "vfioManager", "vgpuManager", "vgpuDeviceManager", "hostPaths"),
    images=("validator",),
    deploy_on=operand_types.DeployOn.EVERY_VM,
    kinds=(*operand_types.BASE_KINDS, *operand_types.CLUSTER_RBAC),
    nvidia_selector_extra=((labels.PART_OF, "gpu-operator"),),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-sandbox-validator",
    service_account="nvidia-sandbox-validator",
    container="nvidia-sandbox-validator",
)


def _validation(
    container: str, command: str, policy: policy_spec.Policy, env: tuple[policy_spec.EnvVar, ...]
) -> dict[str, Any]:
    return {
        "container": container,
        "command": command,
        "env": [
            # NVIDIA's validator's name for sandboxWorkloads.defaultWorkload.
            {"name": "DEFAULT_GPU_WORKLOAD_CONFIG", "value": policy.sandbox_workloads.default_workload.value},
            *({"name": e.name, "value": e.value} for e in env),
        ],
        # The vGPU manager's root, where its nvidia-smi runs (NVIDIA's driver-install-path mount).
        "driver_root": policy.host_paths.driver_install_dir if command == "vgpu-manager" else "",
    }


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    validator = policy.validator
    # NVIDIA's order and names; NB: NVIDIA leaves a validation out when its operand is disabled, as here.
    validations = [
        _validation(container, command, policy, env)
        for container, command, env, wanted in (
            ("vfio-pci-validation", "vfio-pci", validator.vfio_pci_env, policy.vfio_manager.enabled),
            (
                "vgpu-manager-validation",
                "vgpu-manager",
                validator.vgpu_manager_env,
                policy.vgpu_manager.enabled,
            ),
            (
                "vgpu-devices-validation",
                "vgpu-devices",
                validator.vgpu_devices_env,
                policy.vgpu_device_manager.enabled,
            ),
        )
        if wanted
    ]
    return {
        "validations": validations,
        # NVIDIA's preStop: the markers go with the pod, so nothing waits on a stale one.
        "pre_stop": ["sh", "-c", f"rm -f {operand_common.VALIDATIONS_DIR}/*"],
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
