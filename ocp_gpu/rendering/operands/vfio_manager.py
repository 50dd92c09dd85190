"""The VFIO manager operand: binds a vm-passthrough node's GPUs to vfio-pci.

NVIDIA's `state-vfio-manager` at v26.7.0: DaemonSet `nvidia-vfio-manager` (selector
name=nvidia-vfio-manager, NVIDIA's; its pods also carry app= the same for our pod watch)
on the nodes labelled nvidia.com/gpu.deploy.vfio-manager=true, which are the vm-passthrough
nodes while spec.sandboxWorkloads.enabled (planning/operands/workloads.py).  Its image is
k8s-driver-manager (VFIO_MANAGER_IMAGE): an init container `driver-manager uninstall_driver`
unloads the NVIDIA driver, then `vfio-manage bind --all` binds every NVIDIA GPU to vfio-pci;
the preStop unbinds them.  The init container runs vfioManager.driverManager's image (its default
DRIVER_MANAGER_IMAGE, the driver's k8s-driver-manager), pull policy, pull secrets and env, and
vfioManager's resources, as NVIDIA's TransformVFIOManager / transformDriverManagerInitContainer
(controllers/object_controls.go at v26.7.0).  Pure.
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
    images=("vfioManager", "vfioManager.driverManager"),
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


# k8s-driver-manager's env from the pod (NVIDIA's): vfioManager.driverManager.env never replaces them.
_MANAGER_FIELD_ENV: Final = {"NODE_NAME": "spec.nodeName", "OPERATOR_NAMESPACE": "metadata.namespace"}
# k8s-driver-manager's values (NVIDIA's template): it leaves eviction and draining to nobody here, as
# NVIDIA's VFIO manager does (the node moved to vm-passthrough without GPU pods); the policy's
# vfioManager.driverManager.env replaces them by name and adds to them (NVIDIA's setContainerEnv).
MANAGER_ENV: Final = (
    ("NVIDIA_VISIBLE_DEVICES", "void"),
    ("ENABLE_GPU_POD_EVICTION", "false"),
    ("ENABLE_AUTO_DRAIN", "false"),
)


def _manager_env(spec: policy_spec.VfioManagerSpec) -> list[dict[str, Any]]:
    values = dict(MANAGER_ENV)
    added: dict[str, str] = {}
    for item in spec.driver_manager.env:
        # NB: NVIDIA's setContainerEnv would give NODE_NAME a value beside its valueFrom, which the
        # API server refuses: the pod's fields are kept.
        if item.name in values:
            values[item.name] = item.value
        elif item.name not in _MANAGER_FIELD_ENV:
            added[item.name] = item.value
    node_name, namespace = (
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in _MANAGER_FIELD_ENV.items()
    )
    # NVIDIA's order: NODE_NAME, the values, OPERATOR_NAMESPACE (its template), then the policy's others.
    return [
        node_name,
        *({"name": n, "value": v} for n, v in values.items()),
        namespace,
        *({"name": n, "value": v} for n, v in added.items()),
    ]


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    spec = policy.vfio_manager
    manager_image = spec.driver_manager.image
    return {
        "default_env": {"HOST_ROOT": "/host"},
        "resources": spec.resources.as_wire() or DEFAULT_RESOURCES,
        # NB: once each: server-side apply refuses a list with two entries of one name.
        "image_pull_secrets": [
            {"name": name} for name in dict.fromkeys((*spec.image.pull_secrets, *manager_image.pull_secrets))
        ],
        "manager": {
            "image": inputs.driver_manager_image or inputs.image,
            "pull_policy": manager_image.pull_policy.value,
            "env": _manager_env(spec),
        },
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
