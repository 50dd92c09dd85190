"""Every label, annotation and well-known name other components read.

The strings are the upstream ones (NFD, NVIDIA's GPU operator, OpenShift), so
runbooks, dashboards and `kubectl -l` habits keep working.  Each is defined once.
"""

from collections.abc import Mapping
from typing import Final

# --- written by Node Feature Discovery -------------------------------------
# The node has an NVIDIA PCI device (vendor 10de).
NFD_NVIDIA_PCI: Final = "feature.node.kubernetes.io/pci-10de.present"
# The RHCOS build, e.g. 416.94.202407030122-0; matches a driver-toolkit ImageStream tag.
OSTREE_VERSION: Final = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
# The OS id (rhcos, ubuntu, rhel) and its version, for vanilla and precompiled keys.
OS_ID: Final = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION_ID: Final = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
# The running kernel, for precompiled driver images.
KERNEL_VERSION_FULL: Final = "feature.node.kubernetes.io/kernel-version.full"
# RHCOS's RHEL base (9.4). NVIDIA's driver image tags do not use it: `rhcos4.16` (images.nvidia_os_tag).
OS_RHEL_VERSION: Final = "feature.node.kubernetes.io/system-os_release.RHEL_VERSION"
# The OpenShift minor (4.16) an RHCOS node belongs to; the driver's OPENSHIFT_VERSION env.
OS_OPENSHIFT_VERSION: Final = "feature.node.kubernetes.io/system-os_release.OPENSHIFT_VERSION"

# --- written by the operator on GPU nodes -----------------------------------
# The node is a GPU node (mirrors the NFD PCI label).
GPU_PRESENT: Final = "nvidia.com/gpu.present"
# Prefix of the per-operand opt-in labels the operand DaemonSets select on.
GPU_DEPLOY_PREFIX: Final = "nvidia.com/gpu.deploy."
# The workload a GPU node runs (NVIDIA's, set by the admin): container, vm-passthrough, vm-vgpu.
GPU_WORKLOAD_CONFIG: Final = "nvidia.com/gpu.workload.config"
# `nvidia.com/gpu.deploy.operands=false` opts a node out of every operand.
GPU_DEPLOY_OPERANDS: Final = "nvidia.com/gpu.deploy.operands"
# The node's driver upgrade state (see planning/upgrade).
UPGRADE_STATE: Final = "nvidia.com/gpu-driver-upgrade-state"
# --- MIG (NVIDIA's names: GFD, the operator's node labelling and the MIG manager) ---
# GFD: the node's GPUs support MIG ("true"/"false").
MIG_CAPABLE: Final = "nvidia.com/mig.capable"
# GFD: "true" when the node's plugin config shares its GPUs with MPS (and they can be); the MPS
# control daemon's DaemonSet selects on it (NVIDIA's assets/state-mps-control-daemon).
MPS_CAPABLE: Final = "nvidia.com/mps.capable"
# GFD: per GPU, how many pods may share it and how (none, time-slicing, mps).
GPU_REPLICAS: Final = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY: Final = "nvidia.com/gpu.sharing-strategy"
# GFD: the MIG strategy the node's GPUs are advertised under (none, single, mixed).
MIG_STRATEGY: Final = "nvidia.com/mig.strategy"
# GFD: the node's GPU model (MIG-capable when it names an A100, A30 or H100, as NVIDIA reads it).
GPU_PRODUCT: Final = "nvidia.com/gpu.product"
# NVIDIA's vGPU host driver: such a node is never MIG-managed by the operator.
VGPU_HOST_DRIVER_VERSION: Final = "nvidia.com/vgpu.host-driver-version"
# The admin (or the operator, with migManager.config.default): the MIG config the node should have.
MIG_CONFIG: Final = "nvidia.com/mig.config"
# The MIG manager: where applying nvidia.com/mig.config stands (pending, success, failed).
MIG_CONFIG_STATE: Final = "nvidia.com/mig.config.state"
# The admin (or none: the device manager's default config): the vGPU config a vm-vgpu node should have.
VGPU_CONFIG: Final = "nvidia.com/vgpu.config"
# The vGPU device manager: where applying nvidia.com/vgpu.config stands (pending, success, failed).
VGPU_CONFIG_STATE: Final = "nvidia.com/vgpu.config.state"
# The value the MIG manager gives the GPU operands' deploy labels while it repartitions.
PAUSED_FOR_MIG_CHANGE: Final = "paused-for-mig-change"
# Set by the admin: never upgrade this node.
UPGRADE_SKIP: Final = "nvidia.com/gpu-driver-upgrade.skip"
# Node annotation: the upgrade controller, not k8s-driver-manager, owns eviction here.
UPGRADE_ENABLED_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-enabled"
# The NVIDIADriver whose driver DaemonSets run on this GPU node (NVIDIA's name); with
# driver.useNvidiaDriverCRD the pool DaemonSets select on it, so a node has one owner.
NVIDIA_DRIVER_OWNER: Final = "nvidia.com/gpu-operator.driver.owner"

# --- on objects the operator creates ----------------------------------------
MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "ocp-gpu"
# Identifies a versioned (Driver Toolkit) driver DaemonSet and its pods.
DTK_DAEMONSET: Final = "openshift.driver-toolkit"
DTK_RHCOS: Final = "openshift.driver-toolkit.rhcos"
# No driver-toolkit ImageStream tag exists for this RHCOS version.
DTK_IMAGE_MISSING: Final = "openshift.driver-toolkit.rhcos-image-missing"
# A vanilla or precompiled driver pod carries app=nvidia-driver-daemonset (the seed's `-lapp=`);
# a DTK one app=<its DaemonSet's name>, as NVIDIA's, whose selector that is (select every driver
# pod on COMPONENT=DRIVER_COMPONENT).
APP: Final = "app"
# The pod label NVIDIA's VFIO manager DaemonSet selects on (name=nvidia-vfio-manager).
NAME: Final = "name"
# The hash of the manifest as rendered, on every object the operator applies (kube/applying.py):
# the watched object carries the same one -> nothing to apply (kube/owning.is_current).
APPLIED_HASH: Final = "ocp-gpu.io/applied-hash"
DRIVER_APP: Final = "nvidia-driver-daemonset"
# The validator's DaemonSet and pods' app (rendering/operands/validator.py): the driver upgrade
# waits for its pods (model/upgrade_observations.py), below the layer that declares operands.
VALIDATOR_APP: Final = "nvidia-operator-validator"
# The component a DaemonSet belongs to, e.g. nvidia-driver.
COMPONENT: Final = "app.kubernetes.io/component"
# NVIDIA's selectors of the validator and GPU feature discovery include it
# (rendering/operands/validator.py, gfd.py).
PART_OF: Final = "app.kubernetes.io/part-of"
# The driver key (RHCOS version, OS, kernel+OS) of a driver DaemonSet.
DRIVER_KEY: Final = "ocp-gpu.io/driver-key"
# How a driver DaemonSet gets its driver: dtk, vanilla or precompiled (planning/drivers.Strategy).
DRIVER_STRATEGY: Final = "ocp-gpu.io/driver-strategy"
# NVIDIA's marker for precompiled driver DaemonSets ("true"/"false"), kept for their dashboards.
PRECOMPILED: Final = "nvidia.com/precompiled"
# app.kubernetes.io/component of every driver DaemonSet; driver pods repel each other on it.
DRIVER_COMPONENT: Final = "nvidia-driver"
# app.kubernetes.io/component of every vGPU manager DaemonSet (one per RHCOS build, as the driver's).
VGPU_MANAGER_COMPONENT: Final = "nvidia-vgpu-manager"
# The `app` of every vGPU manager pod outside DTK mode (a DTK one's is its DaemonSet's name, NVIDIA's).
VGPU_MANAGER_APP: Final = "nvidia-vgpu-manager-daemonset"
# The pre-pull DaemonSets of an OpenShift upgrade (rendering/prepull_rendering.py) and their pods.
PREPULL_COMPONENT: Final = "nvidia-driver-prepull"
# The NVIDIADriver a pool driver DaemonSet (and its pods) belongs to; absent on the ClusterPolicy's.
NVIDIA_DRIVER: Final = "ocp-gpu.io/nvidia-driver"
# Prefix of every driver DaemonSet name: nvidia-driver-daemonset-<key>.
DRIVER_DAEMONSET_PREFIX: Final = "nvidia-driver-daemonset-"
# Annotations on a DTK driver DaemonSet standing in for a precompiled key whose image cannot be
# pulled: the precompiled key and the image that failed (so the fallback survives restarts).
PRECOMPILED_FALLBACK_KEY: Final = "ocp-gpu.io/precompiled-fallback-key"
PRECOMPILED_FALLBACK_IMAGE: Final = "ocp-gpu.io/precompiled-fallback-image"
# Operator-managed ConfigMap that OpenShift's network operator fills with the cluster's trusted CAs.
TRUSTED_CA_CONFIGMAP: Final = "ocp-gpu-trusted-ca"
# Label asking the network operator to inject the trusted CA bundle into a ConfigMap.
INJECT_TRUSTED_CABUNDLE: Final = "config.openshift.io/inject-trusted-cabundle"

# --- well-known names -------------------------------------------------------
OPENSHIFT_NAMESPACE: Final = "nvidia-gpu-operator"
HELM_NAMESPACE: Final = "gpu-operator"
OPERATOR_DEPLOYMENT: Final = "gpu-operator"
CLUSTER_POLICY_NAME: Final = "cluster-policy"
FIELD_MANAGER: Final = "ocp-gpu"
UPGRADE_LOGGER: Final = "controllers.Upgrade"
DTK_IMAGESTREAM_NAMESPACE: Final = "openshift"
DTK_IMAGESTREAM_NAME: Final = "driver-toolkit"


# ocp-gpu cordoned the node to move it to another stack (value: the workload it moves to);
# the cordon is lifted once the move is done (planning/operands/workload_moves.py).
WORKLOAD_MOVE_CORDON: Final = "ocp-gpu.io/workload-move-cordon"
# When the drain of a node's move started (unix seconds); removing it restarts a drain that timed out.
WORKLOAD_MOVE_DRAIN_START: Final = "ocp-gpu.io/workload-move-drain-start-time"
# The workload label's values that take a node off the container stack (with sandboxWorkloads on).
VM_WORKLOADS: Final = frozenset({"vm-passthrough", "vm-vgpu"})


# The deploy labels' operands only a VM stack has (NVIDIA's gpuStateLabels, state_manager.go).
VM_STACK_OPERANDS: Final = ("vfio-manager", "sandbox-device-plugin", "vgpu-manager", "vgpu-device-manager")


def runs_vm_stack(node_labels: Mapping[str, str]) -> bool:
    """A node the operator moved to a VM stack: labelled for a VM workload, or still running a VM
    stack's operands (a move back to containers held by its VMs), and without the driver's deploy
    label (which the move took away; with sandboxWorkloads off, or a label the operator cannot
    follow, the node keeps it).  No driver runs there: no upgrade, no stale upgrade state."""
    # NB: first the driver's label, which a node running containers has: at thousands of nodes the
    # upgrade loop asks this of every node at each wake-up.
    if DRIVER_DEPLOY_LABEL in node_labels:
        return False
    return node_labels.get(GPU_WORKLOAD_CONFIG) in VM_WORKLOADS or any(
        node_labels.get(key) == "true" for key in _VM_STACK_DEPLOY_LABELS
    )


def deploy_label(operand: str) -> str:
    """The `nvidia.com/gpu.deploy.<operand>` label key for one operand."""
    return GPU_DEPLOY_PREFIX + operand


DRIVER_DEPLOY_LABEL: Final = deploy_label("driver")
_VM_STACK_DEPLOY_LABELS: Final = tuple(deploy_label(operand) for operand in VM_STACK_OPERANDS)


# --- monitoring (operator metrics, alerts, dashboard) ---------------------------
# On a namespace: OpenShift's platform Prometheus scrapes its ServiceMonitors.
CLUSTER_MONITORING: Final = "openshift.io/cluster-monitoring"
# On a ConfigMap in openshift-config-managed: the OpenShift console shows it as a dashboard.
CONSOLE_DASHBOARD: Final = "console.openshift.io/dashboard"
# On a ConfigMap: the Grafana sidecar (kube-prometheus-stack) loads it as a dashboard.
GRAFANA_DASHBOARD: Final = "grafana_dashboard"

# GPU feature discovery's labels of the driver a node runs (NVIDIA/k8s-device-plugin
# internal/lm/nvml.go): the full version (GFD v0.15+), and the older major/minor/rev triple.
CUDA_DRIVER_VERSION_FULL: Final = "nvidia.com/cuda.driver-version.full"
CUDA_DRIVER_VERSION_PARTS: Final = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
