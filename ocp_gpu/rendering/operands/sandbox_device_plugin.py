"""The sandbox device plugin operand: NVIDIA's KubeVirt GPU device plugin on the VM nodes.

NVIDIA's `state-sandbox-device-plugin` at v26.7.0: DaemonSet
`nvidia-sandbox-device-plugin-daemonset` (pods app= the same) on the nodes labelled
nvidia.com/gpu.deploy.sandbox-device-plugin=true (vm-passthrough and vm-vgpu), image
kubevirt-gpu-device-plugin (SANDBOX_DEVICE_PLUGIN_IMAGE).  It advertises each GPU model
bound to vfio-pci as `nvidia.com/<PCI device name>` (e.g. nvidia.com/GA102GL_A10) and each
vGPU type as `nvidia.com/<type>`, for KubeVirt's permittedHostDevices.  Its init containers
wait for the sandbox validator's markers (rendering/operands/sandbox_validator.py), as
NVIDIA's: the node's workload-type, then vfio-pci-ready on vm-passthrough, or
vgpu-devices-ready on vm-vgpu.  NB: NVIDIA also sets NODE_NAME and POD_NAMESPACE on the
plugin, which nvidia-kubevirt-gpu-device-plugin v1.6.0 never reads (model/image_contracts.py):
not set here.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "sandbox-device-plugin",
    "sandboxDevicePlugin",
    "nvidia-sandbox-device-plugin-daemonset",
    images=("sandboxDevicePlugin", "validator"),
    deploy_on=operand_types.DeployOn.EVERY_VM,
    kinds=operand_types.BASE_KINDS,
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-sandbox-device-plugin",
    service_account="nvidia-sandbox-device-plugin",
    container="nvidia-sandbox-device-plugin-ctr",
)
# The sandbox validator's markers (NVIDIA's names, cmd/nvidia-validator).
WORKLOAD_TYPE_MARKER: Final = "workload-type"
VFIO_PCI_MARKER: Final = "vfio-pci-ready"
VGPU_DEVICES_MARKER: Final = "vgpu-devices-ready"


def _wait(workload: policy_spec.GpuWorkload, marker: str, what: str, waiting: str) -> str:
    """NVIDIA's wait, word for word: for the workload file, then (on `workload` nodes only) for the marker."""
    directory = operand_common.VALIDATIONS_DIR
    return (
        f"until [ -f {directory}/{WORKLOAD_TYPE_MARKER} ]; do echo waiting for workload type status file;"
        f' sleep 5; done; if [ "$(cat {directory}/{WORKLOAD_TYPE_MARKER})" != "{workload.value}" ];'
        f" then echo {what} not needed, skipping validation; exit 0; fi;"
        f" until [ -f {directory}/{marker} ]; do echo {waiting}; sleep 5; done;"
    )


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    return {
        # The kubelet's device plugin directory (hostPaths.kubeletRootDir).
        "device_plugins_dir": f"{policy.host_paths.kubelet_root_dir}/device-plugins",
        "waits": [
            {
                "container": "vfio-pci-validation",
                "script": _wait(
                    policy_spec.GpuWorkload.VM_PASSTHROUGH,
                    VFIO_PCI_MARKER,
                    "vfio-pci",
                    "waiting for vfio-pci driver ...",
                ),
            },
            {
                "container": "vgpu-devices-validation",
                "script": _wait(
                    policy_spec.GpuWorkload.VM_VGPU,
                    VGPU_DEVICES_MARKER,
                    "vgpu-devices",
                    "waiting for vGPU devices...",
                ),
            },
        ],
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
