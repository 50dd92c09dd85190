"""Every operand, in deploy order: the list of the operand modules of this folder.

Each operand is declared in its own module (rendering/operands/<operand>.py: `OPERAND`, the
facts every layer may use, model/operand_types.Operand; `RENDERING`, what it adds to the common
rendering) beside its template folder (templates/state-<name>/), as NVIDIA's `internal/state`
has one `State` per operand.  Adding an operand is a template folder, a module declaring both,
and a row here.  The layers below rendering never see this list: planning judges the operands
handed to it, the pod watch watches the apps `watches.py` hands it, the node labels are the
deploy labels handed in (`DEPLOY_LABELS`).

Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ocp_gpu.model import operand_types
from ocp_gpu.model.operand_types import Operand
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.operands import node_labels
from ocp_gpu.rendering.operands import (
    dcgm,
    dcgm_exporter,
    device_plugin,
    dra_driver,
    driver_rendering,
    gfd,
    mig_manager,
    mps_control_daemon,
    node_status_exporter,
    operand_common,
    sandbox_device_plugin,
    sandbox_validator,
    toolkit,
    validator,
    vfio_manager,
    vgpu_device_manager,
    vgpu_manager,
)

DRIVER: Final = driver_rendering.OPERAND
CONTAINER_TOOLKIT: Final = toolkit.OPERAND
OPERATOR_VALIDATOR: Final = validator.OPERAND
DEVICE_PLUGIN: Final = device_plugin.OPERAND
MPS_CONTROL_DAEMON: Final = mps_control_daemon.OPERAND
DRA_DRIVER: Final = dra_driver.OPERAND
GPU_FEATURE_DISCOVERY: Final = gfd.OPERAND
DCGM: Final = dcgm.OPERAND
DCGM_EXPORTER: Final = dcgm_exporter.OPERAND
MIG_MANAGER: Final = mig_manager.OPERAND
NODE_STATUS_EXPORTER: Final = node_status_exporter.OPERAND
VFIO_MANAGER: Final = vfio_manager.OPERAND
SANDBOX_VALIDATOR: Final = sandbox_validator.OPERAND
SANDBOX_DEVICE_PLUGIN: Final = sandbox_device_plugin.OPERAND
VGPU_MANAGER: Final = vgpu_manager.OPERAND
VGPU_DEVICE_MANAGER: Final = vgpu_device_manager.OPERAND

# Deploy order (DESIGN §4).  NB: order decides apply order only; a not-ready operand never
# stops a later one from being applied (on each node, marker files order the pods).
OPERANDS: Final = (
    DRIVER,
    CONTAINER_TOOLKIT,
    OPERATOR_VALIDATOR,
    DEVICE_PLUGIN,
    MPS_CONTROL_DAEMON,
    DRA_DRIVER,
    DCGM,
    DCGM_EXPORTER,
    GPU_FEATURE_DISCOVERY,
    MIG_MANAGER,
    NODE_STATUS_EXPORTER,
    # The VM stacks (NVIDIA's order: VFIO manager, vGPU manager, then the sandbox validator,
    # the vGPU device manager and the sandbox device plugin).
    VFIO_MANAGER,
    VGPU_MANAGER,
    SANDBOX_VALIDATOR,
    VGPU_DEVICE_MANAGER,
    SANDBOX_DEVICE_PLUGIN,
)
# The operands whose `nvidia.com/gpu.deploy.<name>` label every GPU node gets
# (planning/operands/node_labels.py).
# NB: not the MIG manager's: only MIG-capable GPU nodes get that one; the MPS control daemon has
# none of its own (the device plugin's, and nvidia.com/mps.capable from GFD).
EVERY_GPU_NODE: Final = tuple(o for o in OPERANDS if o.deploy_on is operand_types.DeployOn.EVERY_GPU_NODE)
# The deploy labels the operator sets, as planning/operands/node_labels.plan_node_labels takes them.
DEPLOY_LABELS: Final = node_labels.DeployLabels(
    every_gpu_node=tuple(operand.deploy_label for operand in EVERY_GPU_NODE),
    mig_capable=tuple(o.deploy_label for o in OPERANDS if o.deploy_on is operand_types.DeployOn.MIG_CAPABLE),
    while_enabled=tuple(
        o.deploy_label for o in OPERANDS if o.deploy_on is operand_types.DeployOn.WHILE_ENABLED
    ),
    # Per node either the DRA driver or the device plugin has the GPUs, never both.
    exclusive=((DRA_DRIVER.deploy_label, DEVICE_PLUGIN.deploy_label),),
    # Each VM workload's stack (planning/operands/workloads.py), from each VM operand's deploy_on.
    vm={
        workload: tuple(
            o.deploy_label for o in OPERANDS if workload in operand_types.VM_DEPLOY_ON.get(o.deploy_on, ())
        )
        for workload in (policy_spec.GpuWorkload.VM_PASSTHROUGH, policy_spec.GpuWorkload.VM_VGPU)
    },
)
# The operands rendered by the generic mechanism from templates/state-<name>/.
GENERIC: Final = tuple(operand for operand in OPERANDS if operand.generic)
# The `app` label values of every operand pod (a DTK driver pod's is its DaemonSet's name:
# operand_types.pod_app): what the pod watch passes on (watches.py).
POD_APPS: Final = tuple(operand.app for operand in OPERANDS)
# What each generic operand's module adds to the common rendering, by operand name.
RENDERINGS: Final[Mapping[str, operand_common.OwnRendering]] = {
    toolkit.OPERAND.name: toolkit.RENDERING,
    validator.OPERAND.name: validator.RENDERING,
    device_plugin.OPERAND.name: device_plugin.RENDERING,
    mps_control_daemon.OPERAND.name: mps_control_daemon.RENDERING,
    dra_driver.OPERAND.name: dra_driver.RENDERING,
    gfd.OPERAND.name: gfd.RENDERING,
    dcgm.OPERAND.name: dcgm.RENDERING,
    dcgm_exporter.OPERAND.name: dcgm_exporter.RENDERING,
    mig_manager.OPERAND.name: mig_manager.RENDERING,
    node_status_exporter.OPERAND.name: node_status_exporter.RENDERING,
    vfio_manager.OPERAND.name: vfio_manager.RENDERING,
    sandbox_validator.OPERAND.name: sandbox_validator.RENDERING,
    sandbox_device_plugin.OPERAND.name: sandbox_device_plugin.RENDERING,
    vgpu_device_manager.OPERAND.name: vgpu_device_manager.RENDERING,
}


def by_name(name: str) -> Operand:
    """The operand declared with this name; KeyError names the known ones."""
    for operand in OPERANDS:
        if operand.name == name:
            return operand
    raise KeyError(f"no operand {name!r}; known: {', '.join(o.name for o in OPERANDS)}")
