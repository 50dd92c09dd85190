"""The shape of an operand's declaration, and of its pods: what every layer may know of operands.

An operand is a node agent the operator deploys as one DaemonSet (the driver as one per
key).  Each one is declared once, in its own module under `rendering/operands/` (as
NVIDIA's `internal/state` has one `State` per operand): its name and template folder
(`templates/state-<name>/`), the ClusterPolicy sections it reads, its deploy label, its
images, its readiness and its watch sources, beside its template context.  The ordered
list of them is `rendering/operands/operand_catalog.py`.  This module holds only the types
(and the names the layers below rendering need: the driver's containers, the validator's
app in model/labels.py), so that planning and kube judge any operand handed to them
without knowing which ones exist.

Pure data: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Final

from ocp_gpu.model import images, labels
from ocp_gpu.model.policy import policy_spec


class Readiness(enum.StrEnum):
    """How an operand's readiness is judged."""

    # A Ready pod (label app=<app>) on every GPU node labelled nvidia.com/gpu.deploy.<name>=true.
    POD_ON_EVERY_NODE = "pod-on-every-node"


class DeployOn(enum.StrEnum):
    """Which GPU nodes the operator gives the operand's deploy label (planning/operands/node_labels.py)."""

    EVERY_GPU_NODE = "every-gpu-node"
    # NB: only MIG-capable GPU nodes, and never taken back when the GPU stops looking so.
    MIG_CAPABLE = "mig-capable"
    # Every GPU node while the operand is enabled (taken back when it is not): the DRA driver,
    # which then owns the node's GPUs instead of the device plugin.
    WHILE_ENABLED = "while-enabled"
    # None of its own: it selects on another operand's deploy label (`deploy_as`) and on labels
    # others set (the MPS control daemon: the device plugin's, and GFD's nvidia.com/mps.capable).
    ANOTHER_OPERANDS = "another-operands"
    # The GPU nodes whose workload (nvidia.com/gpu.workload.config) is vm-passthrough, vm-vgpu,
    # or either (planning/operands/workloads.py): the VM operands, deployed only while
    # spec.sandboxWorkloads.enabled is true, as NVIDIA's.
    VM_PASSTHROUGH = "vm-passthrough"
    VM_VGPU = "vm-vgpu"
    EVERY_VM = "every-vm"


# The workloads whose nodes each VM DeployOn labels (the values of nvidia.com/gpu.workload.config).
VM_DEPLOY_ON: Final[Mapping[DeployOn, tuple[policy_spec.GpuWorkload, ...]]] = {
    DeployOn.VM_PASSTHROUGH: (policy_spec.GpuWorkload.VM_PASSTHROUGH,),
    DeployOn.VM_VGPU: (policy_spec.GpuWorkload.VM_VGPU,),
    DeployOn.EVERY_VM: (policy_spec.GpuWorkload.VM_PASSTHROUGH, policy_spec.GpuWorkload.VM_VGPU),
}


@dataclasses.dataclass(frozen=True)
class Operand:
    # The deploy label suffix and template folder (state-<name>), e.g. "device-plugin".
    name: str
    # Its field under `spec`, e.g. "devicePlugin": its `enabled` switches it; its image, env,
    # args and resources are the operand's.
    section: str
    # The DaemonSet's name; its pods carry app=<daemonset>.
    daemonset: str
    # The other `spec` sections its templates read (besides `section` and what every operand
    # reads: `daemonsets`, `operator`), e.g. the DCGM exporter reads `dcgm`.
    reads: tuple[str, ...] = ()
    # The images its pods run, as keys of `images.DEFAULT_IMAGE_ENV` (the section whose image it
    # is): its own section's, and "validator" when its init containers wait for a validation
    # marker (they run the validator's image: rendering/operands/operand_common.OperandRenderInputs).
    images: tuple[str, ...] = ()
    readiness: Readiness = Readiness.POD_ON_EVERY_NODE
    deploy_on: DeployOn = DeployOn.EVERY_GPU_NODE
    # Its watch sources: the kinds its templates render (kube/owning.OWNED_KINDS watches each of
    # them by the managed-by label); its pods are the pod watch's (`app`).
    kinds: tuple[str, ...] = ()
    # False for the driver: it plans its own DaemonSets (one per key, planning/drivers/driver_plan.py).
    generic: bool = True
    # Pod labels NVIDIA's DaemonSet selects on besides app=<app> (its assets/*/0500_daemonset.yaml
    # at the release we pin): the selector is immutable, so an equal one updates NVIDIA's in place.
    nvidia_selector_extra: tuple[tuple[str, str], ...] = ()
    # The deploy label it shares with another operand ("": its own, nvidia.com/gpu.deploy.<name>),
    # e.g. the MPS control daemon's is the device plugin's (NVIDIA's nodeSelector).
    deploy_as: str = ""
    # Node labels it needs besides its deploy label (NVIDIA's nodeSelector), e.g. the MPS control
    # daemon's nvidia.com/mps.capable=true, which GFD sets.
    node_selector_extra: tuple[tuple[str, str], ...] = ()
    # NVIDIA's whole selector where it is not app=<app> (the VFIO manager's: name=<daemonset>);
    # the pods carry app=<app> besides, for the pod watch.  () : app=<app> plus the extra above.
    nvidia_selector: tuple[tuple[str, str], ...] = ()

    @property
    def component(self) -> str:
        """The template folder."""
        return f"state-{self.name}"

    @property
    def app(self) -> str:
        """The `app` label of its pods."""
        return labels.DRIVER_APP if self.name == "driver" else self.daemonset

    @property
    def selector(self) -> dict[str, str]:
        """The DaemonSet's pod selector: NVIDIA's for the same DaemonSet (DESIGN §4)."""
        if self.nvidia_selector:
            return dict(self.nvidia_selector)
        return {labels.APP: self.app, **dict(self.nvidia_selector_extra)}

    @property
    def for_vms(self) -> bool:
        """A VM operand: deployed only while spec.sandboxWorkloads.enabled, on VM nodes."""
        return self.deploy_on in VM_DEPLOY_ON

    def is_enabled(self, policy: policy_spec.Policy) -> bool:
        """Whether the policy deploys it: its section's `enabled`, and for a VM operand also
        spec.sandboxWorkloads.enabled (NVIDIA's isStateEnabled)."""
        on = policy.components()[self.section].enabled
        return on and (policy.sandbox_workloads.enabled or not self.for_vms)

    @property
    def deploy_label(self) -> str:
        return labels.deploy_label(self.deploy_as or self.name)

    @property
    def node_selector(self) -> dict[str, str]:
        """The node labels a node needs for this operand to run there (its DaemonSet's nodeSelector)."""
        return {self.deploy_label: "true", **dict(self.node_selector_extra)}

    @property
    def image_env(self) -> str:
        """The operator's environment variable holding its default image."""
        return images.DEFAULT_IMAGE_ENV[self.section]


# What every operand's templates render (the `kinds` of each declaration start with these): its
# ServiceAccount, the RoleBinding of it to the privileged SCC, and its DaemonSet(s).
BASE_KINDS: Final = ("ServiceAccount", "RoleBinding", "DaemonSet")
# A cluster-scoped read (nodes, ...) for its ServiceAccount.
CLUSTER_RBAC: Final = ("ClusterRole", "ClusterRoleBinding")

# The driver pods' containers: the driver image's (`kubectl logs`/`exec` pick it by default)
# and the Driver Toolkit sidecar's, which builds the driver on DTK keys.
# NB: here, not in rendering/operands/driver_rendering.py: kube/reading.py reads driver pods by them.
DRIVER_CONTAINER: Final = "nvidia-driver-ctr"
DTK_CONTAINER: Final = "openshift-driver-toolkit-ctr"

# A label selector that every operand pod matches, for the pod watches: NB not `app in (<apps>)`,
# since a DTK driver pod's app is its DaemonSet's name (NVIDIA's selector); `pod_app` sorts them.
OPERAND_POD_SELECTOR: Final = labels.APP


def pod_app(pod_labels: Mapping[str, str]) -> str:
    """The operand app of a pod's labels: DRIVER_APP for every driver pod (app.kubernetes.io/
    component=nvidia-driver, whatever its app), VGPU_MANAGER_APP for every vGPU manager pod, else
    its `app` label ("" without one)."""
    if pod_labels.get(labels.COMPONENT) == labels.DRIVER_COMPONENT:
        return labels.DRIVER_APP
    if pod_labels.get(labels.COMPONENT) == labels.VGPU_MANAGER_COMPONENT:
        # NB: a DTK vGPU manager pod's app is its DaemonSet's name (NVIDIA's), as a driver pod's.
        return labels.VGPU_MANAGER_APP
    return str(pod_labels.get(labels.APP, ""))


@dataclasses.dataclass(frozen=True, slots=True)
class OperandPod:
    """One operand pod as the status needs it: whose it is, where, and whether it is Ready."""

    name: str
    # Its `app` label (Operand.app).
    app: str
    node: str
    ready: bool = False
    # The DaemonSet generation its template came from (the DaemonSet controller's
    # `pod-template-generation` label; 0 without one).
    template_generation: int = 0
