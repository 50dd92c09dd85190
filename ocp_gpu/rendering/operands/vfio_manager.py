"""The VFIO manager operand: binds a vm-passthrough node's GPUs to vfio-pci.

NVIDIA's `state-vfio-manager` at v26.7.0: DaemonSet `nvidia-vfio-manager` (selector
name=nvidia-vfio-manager, NVIDIA's; its pods also carry app= the same for our pod watch)
on the nodes labelled nvidia.com/gpu.deploy.vfio-manager=true, which are the vm-passthrough
nodes while spec.sandboxWorkloads.enabled (planning/operands/workloads.py).  Its image is
k8s-driver-manager (VFIO_MANAGER_IMAGE): an init container `driver-manager uninstall_driver`
unloads the NVIDIA driver, then `vfio-manage bind --all` binds every NVIDIA GPU to vfio-pci;
the preStop unbinds them.  NB: NVIDIA runs the init container from vfioManager.driverManager,
whose default is the same k8s-driver-manager image; ocp-gpu runs it from vfioManager's image
(model/policy/fields.py says so).  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "vfio-manager",
    "vfioManager",
    "nvidia-vfio-manager",
    images=("vfioManager",),
    deploy_on=operand_types.DeployOn.VM_PASSTHROUGH,
    kinds=(*operand_types.BASE_KINDS, *operand_types.CLUSTER_RBAC),
    nvidia_selector=((labels.NAME, "nvidia-vfio-manager"),),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-vfio-manager",
    service_account="nvidia-vfio-manager",
    container="nvidia-vfio-manager",
    owned_env=frozenset({"HOST_ROOT"}),
)
# NVIDIA's resources of the VFIO manager when vfioManager.resources is unset.
DEFAULT_RESOURCES: Final = {"limits": {"memory": "200Mi"}, "requests": {"cpu": "100m", "memory": "200Mi"}}


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    spec = policy.vfio_manager
    field_ref = {"valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    namespace_ref = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    return {
        "default_env": {"HOST_ROOT": "/host"},
        "resources": spec.resources.as_wire() or DEFAULT_RESOURCES,
        # k8s-driver-manager's env (NVIDIA's): it leaves eviction and draining to nobody here, as
        # NVIDIA's VFIO manager does (the node moved to vm-passthrough without GPU pods).
        "driver_manager_env": [
            {"name": "NODE_NAME", **field_ref},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
            {"name": "ENABLE_GPU_POD_EVICTION", "value": "false"},
            {"name": "ENABLE_AUTO_DRAIN", "value": "false"},
            {"name": "OPERATOR_NAMESPACE", **namespace_ref},
        ],
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
