"""The vGPU manager operand: NVIDIA's vGPU host driver on the vm-vgpu nodes; its manifests.

NVIDIA's `state-vgpu-manager` at v26.7.0 (assets/state-vgpu-manager, controllers/object_controls.go
TransformVGPUManager): DaemonSet `nvidia-vgpu-manager-daemonset` on the nodes labelled
nvidia.com/gpu.deploy.vgpu-manager=true (the vm-vgpu nodes, while spec.sandboxWorkloads.enabled).
Like the driver it is built per RHCOS build with the Driver Toolkit on OpenShift: one DaemonSet per
build, `nvidia-vgpu-manager-daemonset-<build>` (selector app=<its name>, labels
openshift.driver-toolkit=true and openshift.driver-toolkit.rhcos=<build>, NVIDIA's), its main
container started by `ocp_dtk_entrypoint nv-ctr-run-with-dtk` and the sidecar
`openshift-driver-toolkit-ctr` building it; elsewhere `nvidia-driver init`, one DaemonSet per OS.
The DaemonSets are planned by the driver's mechanism (planning/drivers/vgpu_manager_plan.py);
this module declares the operand and renders them.  Its image (`vgpuManager.repository/image/version`,
tagged `<version>-<os>` as the driver's) is not public: the admin builds it.  The init container
k8s-driver-manager (`vgpuManager.driverManager`, DRIVER_MANAGER_IMAGE) unloads a loaded NVIDIA
driver first, as NVIDIA's.  Each key of `vgpuManager.kernelModuleConfig.name`'s ConfigMap (module
parameters, e.g. nvidia.conf) is mounted at /drivers/<key>, where the vGPU manager's `nvidia-driver`
reads them, as NVIDIA's.  NB: unlike NVIDIA, ocp-gpu names its vanilla DaemonSets per OS
(`nvidia-vgpu-manager-daemonset-<os>`), as its drivers: a cluster mixing OS versions gets an
image per OS.  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.drivers.driver_plan import DesiredDriverDaemonSet
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).  NB: `daemonset` is
# the name the per-key DaemonSets' names start from; not generic: planned per key as the driver.
OPERAND: Final = operand_types.Operand(
    "vgpu-manager",
    "vgpuManager",
    labels.VGPU_MANAGER_APP,
    images=("vgpuManager", "vgpuManager.driverManager"),
    deploy_on=operand_types.DeployOn.VM_VGPU,
    kinds=(*operand_types.BASE_KINDS, *operand_types.CLUSTER_RBAC),
    generic=False,
)
COMPONENT: Final = OPERAND.component
SERVICE_ACCOUNT: Final = "nvidia-vgpu-manager"
CONTAINER: Final = "nvidia-vgpu-manager-ctr"
# Env the template or the operator own: the policy's env never replaces them.
_OWNED_ENV: Final = frozenset({"RHCOS_VERSION", "RHCOS_IMAGE_MISSING", "OPENSHIFT_VERSION"})
# k8s-driver-manager's env in NVIDIA's vGPU manager pods: it evicts and drains nothing.
MANAGER_ENV: Final = (
    ("NVIDIA_VISIBLE_DEVICES", "void"),
    ("ENABLE_GPU_POD_EVICTION", "false"),
    ("ENABLE_AUTO_DRAIN", "false"),
)
DAEMONSET_TEMPLATE: Final = f"{COMPONENT}/0500_daemonset.yaml.j2"
# Where the vGPU manager's nvidia-driver reads kernelModuleConfig's files (NVIDIA's driversDir).
DRIVERS_DIR: Final = "/drivers"


@dataclasses.dataclass(frozen=True)
class VgpuManagerRenderInputs:
    namespace: str
    openshift: bool
    # The resolved k8s-driver-manager image (vgpuManager.driverManager, DRIVER_MANAGER_IMAGE).
    manager_image: str
    # ClusterVersion's major.minor, for OPENSHIFT_VERSION when the nodes lack NFD's label.
    openshift_version: str = ""
    # The data keys of vgpuManager.kernelModuleConfig.name's ConfigMap, as read: each is mounted as
    # /drivers/<key> in the vGPU manager container (NVIDIA's TransformVGPUManager).  (): none.
    kernel_module_config_keys: tuple[str, ...] = ()


def _env(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]


def _daemonset(
    entry: DesiredDriverDaemonSet, policy: policy_spec.Policy, inputs: VgpuManagerRenderInputs
) -> dict[str, Any]:
    spec = policy.vgpu_manager
    dtk = entry.strategy is Strategy.DTK
    common = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: labels.VGPU_MANAGER_COMPONENT}
    identity = {labels.APP: labels.VGPU_MANAGER_APP, **common, **entry.labels, **entry.selector}
    env: dict[str, str] = {}
    openshift_version = entry.openshift_version or inputs.openshift_version
    if inputs.openshift and openshift_version:
        env["OPENSHIFT_VERSION"] = openshift_version
    rhcos = str(entry.rhcos_version or entry.key)
    if dtk and entry.image_missing:
        # NVIDIA's fallback: no DTK tag for this build, both containers told so.
        env.update({"RHCOS_IMAGE_MISSING": "true", "RHCOS_VERSION": rhcos})
    for item in spec.env:
        if item.name not in _OWNED_ENV:
            env[item.name] = item.value
    sidecar = None
    if dtk:
        sidecar_env = [("RHCOS_VERSION", rhcos), ("NVIDIA_VISIBLE_DEVICES", "void")]
        if entry.image_missing:
            sidecar_env.append(("RHCOS_IMAGE_MISSING", "true"))
        # NB: with the tag missing the sidecar runs the vGPU manager image, as NVIDIA's.
        sidecar = {"image": entry.dtk_image or entry.driver_image, "env": _env(sidecar_env)}
    return {
        "name": entry.name,
        "labels": identity,
        "selector": dict(entry.selector),
        "pod_labels": {**policy.daemonsets.labels, **identity},
        "node_selector": {OPERAND.deploy_label: "true", **entry.node_selector},
        "image": entry.driver_image,
        "env": _env(list(env.items())),
        "dtk": sidecar,
    }


def _kernel_module_config(name: str, keys: Sequence[str]) -> dict[str, Any] | None:
    """The kernelModuleConfig volume: each key one file under /drivers; None when unset or empty."""
    if not name or not keys:
        return None
    # NB: sorted, as NVIDIA's createConfigMapVolumeMounts; subPath keeps the image's other files.
    ordered = sorted(keys)
    return {
        "config_map": name,
        "files": [{"key": key, "path": key} for key in ordered],
        "mounts": [{"path": f"{DRIVERS_DIR}/{key}", "key": key} for key in ordered],
    }


def render_vgpu_manager_state(
    desired: Sequence[DesiredDriverDaemonSet], policy: policy_spec.Policy, inputs: VgpuManagerRenderInputs
) -> list[dict[str, Any]]:
    """Every state-vgpu-manager manifest (RBAC, then one DaemonSet per entry), in apply order."""
    spec = policy.vgpu_manager
    daemonsets = policy.daemonsets
    common_labels = {
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.COMPONENT: labels.VGPU_MANAGER_COMPONENT,
    }
    manager_env = [*MANAGER_ENV, *((item.name, item.value) for item in spec.driver_manager.env)]
    context = {
        "namespace": inputs.namespace,
        "openshift": inputs.openshift,
        "service_account": SERVICE_ACCOUNT,
        "scc_cluster_role": operand_common.SCC_CLUSTER_ROLE,
        "scc_role_binding": f"{SERVICE_ACCOUNT}-privileged-scc",
        "common_labels": common_labels,
        "container": CONTAINER,
        "dtk_container": operand_types.DTK_CONTAINER,
        "update_strategy": operand_common.update_strategy(daemonsets),
        "pod_annotations": {
            **daemonsets.annotations,
            operand_common.DEFAULT_CONTAINER_ANNOTATION: CONTAINER,
        },
        "priority_class_name": daemonsets.priority_class_name,
        "tolerations": operand_common.tolerations(policy),
        "host_network": spec.host_network,
        # NB: once each: server-side apply refuses a list with two entries of one name.
        "image_pull_secrets": [
            {"name": name}
            for name in dict.fromkeys((*spec.image.pull_secrets, *spec.driver_manager.image.pull_secrets))
        ],
        "pod_security_context": dict(daemonsets.pod_security_context),
        "pull_policy": spec.image.pull_policy.value,
        "args": list(spec.args),
        "resources": spec.resources.as_wire(),
        "host_root": policy.host_paths.root_fs,
        "manager": {
            "image": inputs.manager_image,
            "pull_policy": spec.driver_manager.image.pull_policy.value,
            "env": _env(list(dict(manager_env).items())),
        },
        "daemonsets": [_daemonset(entry, policy, inputs) for entry in desired],
        # NB: sorted, as NVIDIA's createConfigMapVolumeMounts; subPath keeps the image's other files.
        "kernel_module_config": _kernel_module_config(
            spec.kernel_module_config_map, inputs.kernel_module_config_keys
        ),
    }
    return templating.render_state(COMPONENT, context)
