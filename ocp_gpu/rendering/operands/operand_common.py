"""What every operand's rendering shares: its inputs, its names, tolerations, RuntimeClass, marker waits,
and the shape of what an operand's own module adds to the common rendering (`OwnRendering`).

Used by rendering/operands/operand_rendering.py (the generic renderer) and by each operand's own
module (rendering/operands/toolkit.py, validator.py, device_plugin.py, gfd.py, ...).  Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_spec import ContainerRuntime

PREREQUISITES: Final = "state-pre-requisites"
# The RuntimeClass handler NVIDIA's toolkit configures in containerd and cri-o.
RUNTIME_HANDLER: Final = "nvidia"
# With CDI, the toolkit also registers these runtimes (one per mode); NVIDIA's pre-requisites
# state makes a RuntimeClass of each, named as its handler.
CDI_RUNTIME_CLASSES: Final = ("nvidia-cdi", "nvidia-legacy")
# OpenShift's ClusterRole granting `use` of the built-in privileged SCC.
SCC_CLUSTER_ROLE: Final = "system:openshift:scc:privileged"
DEFAULT_CONTAINER_ANNOTATION: Final = "kubectl.kubernetes.io/default-container"
# Every operand pod tolerates the taint that dedicates nodes to GPU work (seed 003).
GPU_TOLERATION: Final[Mapping[str, str]] = {
    "key": "nvidia.com/gpu",
    "operator": "Exists",
    "effect": "NoSchedule",
}
# Where the validations leave their markers on the host (DESIGN §4).
VALIDATIONS_DIR: Final = "/run/nvidia/validations"
# With cdi.nriPluginEnabled, the toolkit's NRI plugin injects the CDI device an operand pod's
# annotation `<domain>/container.<container>` names (NVIDIA's setNRIPluginAnnotation).
NRI_ANNOTATION_DOMAIN: Final = "nvidia.cdi.k8s.io"
# The CDI device of every GPU for management containers (the toolkit's spec, kind
# management.nvidia.com/gpu: nvidia-ctk-installer's --cdi-kind default).
MANAGEMENT_CDI_DEVICE: Final = "management.nvidia.com/gpu=all"
# Where the toolkit installs nvidia-cdi-hook under its install dir (nvidia-ctk-installer's toolkitRoot).
CDI_HOOK: Final = "toolkit/nvidia-cdi-hook"
# Where CDI specifications live on the host (the toolkit's --cdi-output-dir, the plugin's cdiRoot).
CDI_SPEC_DIR: Final = "/var/run/cdi"


@dataclasses.dataclass(frozen=True)
class OperandRenderInputs:
    namespace: str
    openshift: bool
    # The operand's resolved image (images.resolve_image for its section).
    image: ImageRef
    # Extra, operand-specific inputs (e.g. the validator's image for marker waits).
    extra: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # monitoring.coreos.com is served: ServiceMonitors may be rendered.
    monitoring_api: bool = False
    # The image of the init containers that wait for a validation marker (`sh -c 'until [ -f
    # …]; do …; sleep 5; done'`): the operator's own (VALIDATOR_IMAGE), which has sh and sleep,
    # as NVIDIA runs them from its validator.  NB: an operand image need not have sleep (the
    # DCGM exporter's distroless image has none: model/image_contracts.py).  None: the operand's.
    wait_image: ImageRef | None = None
    # The image of the operand's k8s-driver-manager init container where it has one apart from its
    # own (the VFIO manager's vfioManager.driverManager, DRIVER_MANAGER_IMAGE by default, as NVIDIA's
    # transformDriverManagerInitContainer): operand_rendering.driver_manager_image.  None: the operand's.
    driver_manager_image: ImageRef | None = None


@dataclasses.dataclass(frozen=True)
class Identity:
    """The names one operand's objects carry."""

    # app.kubernetes.io/component of its objects.
    component: str
    service_account: str
    # The main container (kubectl logs/exec pick it by default).
    container: str
    # Env names the template owns: the policy's env never replaces them.
    owned_env: frozenset[str] = frozenset()
    # The container that needs the GPUs (NVIDIA's list): with cdi.nriPluginEnabled its pod is
    # annotated for the management CDI device.  "": none.
    gpu_container: str = ""
    # Its section's env and args are its own (False: the section is another operand's, e.g. the
    # MPS control daemon's devicePlugin, whose env and args NVIDIA gives the plugin only).
    section_env: bool = True


ExtraContext = Callable[[policy_spec.Policy, OperandRenderInputs], dict[str, Any]]
# The admin's ConfigMaps an operand mounts (field -> name) and the key its pod reads (field -> key).
NamedConfigMaps = Callable[[policy_spec.Policy], tuple[dict[str, str], dict[str, str]]]
# The host namespaces (api_values.NET, IPC) its pods share besides <section>.hostNetwork, each with the
# field turning it on (None: always).
SharedHostNamespaces = Callable[[policy_spec.Policy], dict[str, str | None]]


def no_config_maps(policy: policy_spec.Policy) -> tuple[dict[str, str], dict[str, str]]:
    """An operand that mounts no admin ConfigMap."""
    return {}, {}


def no_host_namespaces(policy: policy_spec.Policy) -> dict[str, str | None]:
    """An operand whose pods share no host namespace a sysctl belongs to."""
    return {}


@dataclasses.dataclass(frozen=True)
class OwnRendering:
    """What one operand's module adds to the common rendering (operand_rendering.operand_context)."""

    identity: Identity
    # Its templates' own context.
    context: ExtraContext
    named_config_maps: NamedConfigMaps = no_config_maps
    # NB: tests/unit/test_host_sysctls.py renders every operand to keep this in step with its templates.
    shared_host_namespaces: SharedHostNamespaces = no_host_namespaces
    # Its templates may render a ServiceMonitor named as its DaemonSet (removed once switched off).
    service_monitored: bool = False


def marker_wait(marker: str, what: str) -> str:
    """The shell an init container runs to wait for a validation marker."""
    return f"until [ -f {VALIDATIONS_DIR}/{marker} ]; do echo waiting for {what}; sleep 5; done"


def tolerations(policy: policy_spec.Policy) -> list[dict[str, object]]:
    """The GPU taint's toleration, then the policy's (a duplicate of ours is dropped)."""
    result: list[dict[str, object]] = [dict(GPU_TOLERATION)]
    for toleration in policy.daemonsets.tolerations:
        wire = toleration.as_wire()
        if wire not in result:
            result.append(wire)
    return result


def runtime_class_name(policy: policy_spec.Policy, openshift: bool) -> str | None:
    """The RuntimeClass GPU-using operand pods run under; None where the runtime needs none.

    As NVIDIA's setRuntimeClassName: with the NRI plugin, none (the plugin injects GPUs by
    annotation, `nri_annotations`); without CDI on cri-o (OpenShift), none: the toolkit's OCI
    hook injects GPUs into every pod.  Otherwise the toolkit registers the `nvidia` runtime
    (in CDI mode, cri-o's too) and GPU operand pods name it.
    """
    runtime = policy_spec.container_runtime(policy.operator.default_runtime, openshift)
    if policy.cdi.nri_plugin_enabled:
        return None
    if not policy.cdi.enabled and runtime is ContainerRuntime.CRIO:
        return None
    return policy.operator.runtime_class


def nri_annotations(policy: policy_spec.Policy, container: str) -> dict[str, str]:
    """The pod annotation that has the NRI plugin inject every GPU into `container` ({} without NRI)."""
    if not policy.cdi.nri_plugin_enabled or not container:
        return {}
    return {f"{NRI_ANNOTATION_DOMAIN}/container.{container}": MANAGEMENT_CDI_DEVICE}


def cdi_env(policy: policy_spec.Policy, *, reads_cdi_enabled: bool) -> dict[str, str]:
    """The env NVIDIA's operator gives CDI-aware operands (device plugin, MIG manager) with CDI on.

    NB: NVIDIA also sets CDI_ENABLED on the device plugin, which no program of
    NVIDIA/k8s-device-plugin@v0.20.0 reads (model/image_contracts.py): only where it is read.
    """
    if not policy.cdi.enabled:
        return {}
    env = {"CDI_ENABLED": "true"} if reads_cdi_enabled else {}
    if policy.toolkit.enabled:
        # The toolkit installs the hook the generated specifications run.
        env["NVIDIA_CDI_HOOK_PATH"] = f"{policy.toolkit.install_dir.rstrip('/')}/{CDI_HOOK}"
    return env


def update_strategy(daemonsets: policy_spec.DaemonsetsSpec) -> dict[str, Any]:
    """The `spec.updateStrategy` of a non-driver operand DaemonSet.

    The driver's DaemonSets are always `OnDelete`: the upgrade controller decides when a
    driver pod restarts (planning/upgrades/upgrade_plan.py).  Every other operand follows
    `spec.daemonsets.updateStrategy`: `RollingUpdate` (the default) lets the DaemonSet
    controller replace pods itself, `maxUnavailable` (`daemonsets.rollingUpdate`) at a
    time; `OnDelete` leaves the old pods running until someone deletes them.
    """
    if daemonsets.update_strategy is policy_spec.UpdateStrategy.ON_DELETE:
        return {"type": "OnDelete"}
    limit = daemonsets.max_unavailable
    if isinstance(limit, str) and limit.strip().isdigit():
        # NB: the apiserver takes "25%" or 1, never "1": a count written as a string becomes a number.
        limit = int(limit)
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": limit}}
