"""The ClusterPolicy spec as frozen data: its sections, enums and the CRD's defaults.

`policy_parser.parse_policy` builds a `Policy` from a spec; `policy_checks.validate_policy`
finds what the CRD schema cannot.  This module holds only the records they share, and the
maxUnavailable arithmetic every reader of a budget needs.

Python names are snake_case; each field's comment gives its wire name where it
differs in more than case.  Pure: no I/O, no Kubernetes client.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Mapping
from typing import Final, NewType

from ocp_gpu.model.policy.resource_config import ResourceConfig, ResourceRename

__all__ = [
    "CdiSpec",
    "ComponentSpec",
    "ContainerRuntime",
    "DaemonsetsSpec",
    "DcgmExporterSpec",
    "DcgmSpec",
    "DeviceIDStrategy",
    "DeviceListStrategy",
    "DevicePluginSpec",
    "Drain",
    "DriverManagerSpec",
    "DriverSpec",
    "EnvVar",
    "GpuPodDeletion",
    "HostPaths",
    "ImagePullPolicy",
    "ImageSpec",
    "KernelModuleType",
    "LicensingConfig",
    "MigManagerSpec",
    "MigStrategy",
    "OperatorSpec",
    "Policy",
    "PrecompiledFallback",
    "ProbeTiming",
    "RdmaSpec",
    "ResourceRequirements",
    "ServiceMonitorSpec",
    "Toleration",
    "ToolkitSpec",
    "UpdateStrategy",
    "UpgradePolicy",
    "ValidatorSpec",
    "WaitForCompletion",
    "scaled_max_unavailable",
]

# A label selector as the admin wrote it, e.g. "app=training,tier!=web".
PodSelector = NewType("PodSelector", str)
# The name of a ConfigMap in the operator namespace.
ConfigMapName = NewType("ConfigMapName", str)
# A count or a percentage, as in a DaemonSet's maxUnavailable: 1, "1", "25%".
IntOrString = int | str


# --- enums: the values are the on-the-wire strings --------------------------


class ImagePullPolicy(enum.StrEnum):
    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class UpdateStrategy(enum.StrEnum):
    ROLLING_UPDATE = "RollingUpdate"
    ON_DELETE = "OnDelete"


class KernelModuleType(enum.StrEnum):
    AUTO = "auto"  # what the GPU and driver branch recommend
    OPEN = "open"
    PROPRIETARY = "proprietary"


class MigStrategy(enum.StrEnum):
    NONE = "none"
    SINGLE = "single"
    MIXED = "mixed"


class DeviceListStrategy(enum.StrEnum):
    ENVVAR = "envvar"
    VOLUME_MOUNTS = "volume-mounts"
    CDI_ANNOTATIONS = "cdi-annotations"
    CDI_CRI = "cdi-cri"


class DeviceIDStrategy(enum.StrEnum):
    UUID = "uuid"
    INDEX = "index"


class ContainerRuntime(enum.StrEnum):
    DOCKER = "docker"
    CRIO = "crio"
    CONTAINERD = "containerd"


def container_runtime(configured: ContainerRuntime | None, openshift: bool) -> ContainerRuntime:
    """The node's container runtime: the policy's `operator.defaultRuntime`, else the platform's."""
    if configured is not None:
        return configured
    return ContainerRuntime.CRIO if openshift else ContainerRuntime.CONTAINERD


# --- defaults: each also appears as `default:` in the CRD --------------------

DEFAULT_RUNTIME_CLASS: Final = "nvidia"
DEFAULT_PRIORITY_CLASS: Final = "system-node-critical"
DEFAULT_DAEMONSET_MAX_UNAVAILABLE: Final = "1"
DEFAULT_UPGRADE_MAX_UNAVAILABLE: Final = "25%"
# As NVIDIA's fixed validation timeout: a driver pod that is not current and Ready after
# this long (an image that cannot be pulled, a build that never finishes) fails the node.
DEFAULT_POD_RESTART_TIMEOUT_SECONDS: Final = 600
# NVIDIA's fixed validation timeout (k8s-operator-libs); the operator's env may change ours.
DEFAULT_VALIDATION_TIMEOUT_SECONDS: Final = 600
DEFAULT_TOOLKIT_INSTALL_DIR: Final = "/usr/local/nvidia"
# Where the MPS control daemon keeps its pipes and logs on the host (devicePlugin.mps.root).
DEFAULT_MPS_ROOT: Final = "/run/nvidia/mps"
# The standalone DCGM hostengine's port (NVIDIA's default); the exporter connects to it.
DEFAULT_DCGM_HOST_PORT: Final = 5555
# Not CRD defaults: derived from driver.enabled when devicePlugin.nvidiaDriverRoot is unset.
DRIVER_ROOT_CONTAINERIZED: Final = "/run/nvidia/driver"
DRIVER_ROOT_HOST: Final = "/"


def driver_root(driver_enabled: bool, driver_install_dir: str) -> str:
    """Where the operands find the driver on the host (their NVIDIA_DRIVER_ROOT), as NVIDIA's
    driver validation tells its operands: the operator's own driver's root when it deploys one;
    else `hostPaths.driverInstallDir` when it names another place (a driver installed there by
    other means); else the host's root (a driver installed on the host)."""
    if driver_enabled or driver_install_dir != DRIVER_ROOT_CONTAINERIZED:
        return driver_install_dir
    return DRIVER_ROOT_HOST


def elsewhere(driver_install_dir: str) -> str | None:
    """`hostPaths.driverInstallDir` when it names a place operands must mount to see (neither the
    operator's driver root, under the /run/nvidia they mount, nor the host's root); else None."""
    return None if driver_install_dir in (DRIVER_ROOT_CONTAINERIZED, DRIVER_ROOT_HOST) else driver_install_dir


# NVIDIA's DefaultKubeletRootDir (controllers/object_controls.go).
DEFAULT_KUBELET_ROOT_DIR: Final = "/var/lib/kubelet"
# The wire paths of the same settings under NVIDIA's CRD name and the seed's (neither is wrong).
POD_DELETION_ALIAS: Final = "spec.driver.upgradePolicy.podDeletion"
GPU_POD_DELETION: Final = "spec.driver.upgradePolicy.gpuPodDeletion"

# Same pattern as the CRD's (int-or-string with ^[0-9]+%?$).
INT_OR_PERCENT_RE: Final = re.compile(r"^[0-9]+%?$")


# --- the spec -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvVar:
    name: str
    value: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toleration:
    """A core Toleration, as written (empty strings where unset)."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None  # tolerationSeconds

    def as_wire(self) -> dict[str, object]:
        """The Toleration as it goes into a pod spec, unset fields left out."""
        wire: dict[str, object] = {
            name: value
            for name, value in (
                ("key", self.key),
                ("operator", self.operator),
                ("value", self.value),
                ("effect", self.effect),
            )
            if value
        }
        if self.toleration_seconds is not None:
            wire["tolerationSeconds"] = self.toleration_seconds
        return wire


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceRequirements:
    """Limits and requests, quantities as strings ("500m", "1Gi", "2")."""

    limits: Mapping[str, str] = dataclasses.field(default_factory=dict)
    requests: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def as_wire(self) -> dict[str, dict[str, str]]:
        wire: dict[str, dict[str, str]] = {}
        if self.limits:
            wire["limits"] = dict(self.limits)
        if self.requests:
            wire["requests"] = dict(self.requests)
        return wire


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImageSpec:
    """A component's image fields; `images.resolve_image` makes a reference of them."""

    repository: str = ""
    name: str = ""  # wire: image
    version: str = ""
    pull_policy: ImagePullPolicy = ImagePullPolicy.IF_NOT_PRESENT  # imagePullPolicy
    pull_secrets: tuple[str, ...] = ()  # imagePullSecrets


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComponentSpec:
    """What every operand has: a switch, an image, env, args and resources."""

    enabled: bool = True
    image: ImageSpec = dataclasses.field(default_factory=ImageSpec)
    env: tuple[EnvVar, ...] = ()
    args: tuple[str, ...] = ()
    resources: ResourceRequirements = dataclasses.field(default_factory=ResourceRequirements)
    # hostNetwork: the pods share the host's network (and resolve with ClusterFirstWithHostNet),
    # as NVIDIA's applyHostNetworkConfig does.
    host_network: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorSpec:
    # None: cri-o on OpenShift, containerd elsewhere (decided with the platform).
    default_runtime: ContainerRuntime | None = None
    runtime_class: str = DEFAULT_RUNTIME_CLASS
    # use_ocp_driver_toolkit; None: true on OpenShift (see planning/platforms.py).
    use_ocp_driver_toolkit: bool | None = None
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # metrics.serviceMonitor: the ServiceMonitor of the operator's own /metrics.
    metrics_service_monitor: ServiceMonitorSpec = dataclasses.field(
        default_factory=lambda: ServiceMonitorSpec()
    )
    # metrics.serviceMonitor.enabled as written (None: unset, a ServiceMonitor where the API is served).
    metrics_service_monitor_enabled: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DaemonsetsSpec:
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    priority_class_name: str = DEFAULT_PRIORITY_CLASS
    # NB: driver DaemonSets always use OnDelete; this applies to the other operands.
    update_strategy: UpdateStrategy = UpdateStrategy.ROLLING_UPDATE
    max_unavailable: IntOrString = DEFAULT_DAEMONSET_MAX_UNAVAILABLE  # rollingUpdate.maxUnavailable
    # podSecurityContext: a core PodSecurityContext, passed through to every operand pod.
    pod_security_context: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WaitForCompletion:
    timeout_seconds: int = 0  # 0 waits forever
    pod_selector: PodSelector = PodSelector("")  # "" waits for no pods


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuPodDeletion:
    force: bool = False
    timeout_seconds: int = 300  # 0 waits forever
    delete_empty_dir: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class Drain:
    enable: bool = False
    force: bool = False
    pod_selector: PodSelector = PodSelector("")  # "" drains every pod
    timeout_seconds: int = 300  # 0 waits forever
    delete_empty_dir: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpgradePolicy:
    """driver.upgradePolicy, with the seed's defaults."""

    auto_upgrade: bool = True
    max_parallel_upgrades: int = 1  # 0 means no limit
    max_unavailable: IntOrString = DEFAULT_UPGRADE_MAX_UNAVAILABLE
    wait_for_completion: WaitForCompletion = dataclasses.field(default_factory=WaitForCompletion)
    # gpuPodDeletion, with NVIDIA's podDeletion fields laid over it.
    gpu_pod_deletion: GpuPodDeletion = dataclasses.field(default_factory=GpuPodDeletion)
    drain: Drain = dataclasses.field(default_factory=Drain)
    # Not a ClusterPolicy field (NVIDIA's schema has none): how long a node waits in
    # pod-restart-required for a current, Ready driver pod before upgrade-failed.  The
    # operator's env OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS overrides it (reconcilers/upgrade_reconciler.py).
    pod_restart_timeout_seconds: int = DEFAULT_POD_RESTART_TIMEOUT_SECONDS
    # Not a ClusterPolicy field either: how long a node waits in validation-required for Ready
    # validator pods; the operator's env OCP_GPU_VALIDATION_TIMEOUT_SECONDS overrides it.
    validation_timeout_seconds: int = DEFAULT_VALIDATION_TIMEOUT_SECONDS


@dataclasses.dataclass(frozen=True, kw_only=True)
class DriverManagerSpec:
    """The k8s-driver-manager init container of the driver pods."""

    image: ImageSpec = dataclasses.field(default_factory=ImageSpec)
    env: tuple[EnvVar, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class LicensingConfig:
    config_map_name: ConfigMapName = ConfigMapName("")
    secret_name: str = ""
    # NB: unset means true, as in NVIDIA's operator (the client token is mounted too).
    nls_enabled: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeTiming:
    """driver.{startup,liveness,readiness}Probe: timings laid over ocp-gpu's probe; None keeps ours."""

    initial_delay_seconds: int | None = None
    timeout_seconds: int | None = None
    period_seconds: int | None = None
    success_threshold: int | None = None
    failure_threshold: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RdmaSpec:
    """driver.rdma: GPUDirect RDMA through nvidia-peermem."""

    enabled: bool = False
    use_host_mofed: bool = False  # useHostMofed: MLNX_OFED installed on the host, not by the Network Operator


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostPaths:
    """spec.hostPaths: where things are on the host."""

    root_fs: str = "/"  # rootFS
    driver_install_dir: str = DRIVER_ROOT_CONTAINERIZED  # driverInstallDir
    # kubeletRootDir: the kubelet's root, whose device-plugins and pod-resources sockets the
    # device plugin and the DCGM exporter mount (at the same paths inside the containers).
    kubelet_root_dir: str = DEFAULT_KUBELET_ROOT_DIR


# The sections of the operands that serve VMs only: deployed only with sandboxWorkloads.enabled.
VM_SECTIONS: Final = frozenset({"vfioManager", "sandboxDevicePlugin", "vgpuManager", "vgpuDeviceManager"})


class GpuWorkload(enum.StrEnum):
    """What a GPU node runs (NVIDIA's nvidia.com/gpu.workload.config values)."""

    CONTAINER = "container"
    VM_PASSTHROUGH = "vm-passthrough"
    VM_VGPU = "vm-vgpu"


class SandboxMode(enum.StrEnum):
    """spec.sandboxWorkloads.mode: which sandbox runs the VM workloads."""

    KUBEVIRT = "kubevirt"
    # NB: NVIDIA's Kata device plugin; refused here (model/policy/fields.py).
    KATA = "kata"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SandboxWorkloadsSpec:
    """spec.sandboxWorkloads: GPUs for virtual machines (OpenShift Virtualization, KubeVirt).

    `enabled`: nodes may run VM workloads, chosen per node by nvidia.com/gpu.workload.config
    (planning/operands/workloads.py); off, every GPU node runs containers and the VM operands
    (vfioManager, sandboxDevicePlugin, the sandbox validator) are not deployed, as NVIDIA's.
    """

    enabled: bool = False
    default_workload: GpuWorkload = GpuWorkload.CONTAINER  # defaultWorkload
    mode: SandboxMode = SandboxMode.KUBEVIRT


@dataclasses.dataclass(frozen=True, kw_only=True)
class CdiSpec:
    """spec.cdi: how GPUs reach containers (NVIDIA's CDIConfigSpec and its defaults).

    `enabled` (NVIDIA's default since v25.10: true): the toolkit generates CDI specifications
    and the runtime injects GPUs through them; false: the legacy runtime hook.
    `nri_plugin_enabled` (nriPluginEnabled): the toolkit's NRI plugin injects the management
    CDI device into operand pods named by annotation, instead of a RuntimeClass.
    NVIDIA's `cdi.default` is deprecated and ignored (by NVIDIA too).
    """

    enabled: bool = True
    nri_plugin_enabled: bool = False  # nriPluginEnabled


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrecompiledFallback:
    """Build with the Driver Toolkit for kernels whose precompiled image cannot be pulled."""

    enabled: bool = False
    # The full driver version to build (precompiled images carry only the branch).
    version: str = ""
    image_pull_timeout_seconds: int = 300


@dataclasses.dataclass(frozen=True, kw_only=True)
class DriverSpec(ComponentSpec):
    use_precompiled: bool = False
    kernel_module_type: KernelModuleType = KernelModuleType.AUTO
    repo_config_map: ConfigMapName = ConfigMapName("")  # repoConfig.configMapName
    cert_config_map: ConfigMapName = ConfigMapName("")  # certConfig.name
    licensing: LicensingConfig = dataclasses.field(default_factory=LicensingConfig)  # licensingConfig
    kernel_module_config_map: ConfigMapName = ConfigMapName("")  # kernelModuleConfig.name
    # virtualTopology.config: the vGPU topology daemon's nvidia-topologyd.conf, from this ConfigMap.
    virtual_topology_config_map: ConfigMapName = ConfigMapName("")
    manager: DriverManagerSpec = dataclasses.field(default_factory=DriverManagerSpec)
    rdma: RdmaSpec = dataclasses.field(default_factory=RdmaSpec)
    secret_env: str = ""  # secretEnv: a Secret whose keys become the driver container's env
    startup_probe: ProbeTiming = dataclasses.field(default_factory=ProbeTiming)  # startupProbe
    liveness_probe: ProbeTiming | None = None  # livenessProbe; None: no liveness probe
    readiness_probe: ProbeTiming | None = None  # readinessProbe; None: no readiness probe
    upgrade_policy: UpgradePolicy = dataclasses.field(default_factory=UpgradePolicy)
    precompiled_fallback: PrecompiledFallback = dataclasses.field(default_factory=PrecompiledFallback)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolkitSpec(ComponentSpec):
    install_dir: str = DEFAULT_TOOLKIT_INSTALL_DIR


@dataclasses.dataclass(frozen=True, kw_only=True)
class DevicePluginSpec(ComponentSpec):
    # devicePlugin.migStrategy, else NVIDIA's spec.mig.strategy, else none.
    mig_strategy: MigStrategy = MigStrategy.NONE
    # deviceListStrategy as written; unset: cdi-annotations and cdi-cri with cdi.enabled (NVIDIA's
    # transformDevicePluginCtrForCDI), envvar without.
    device_list_strategies: tuple[DeviceListStrategy, ...] = (
        DeviceListStrategy.CDI_ANNOTATIONS,
        DeviceListStrategy.CDI_CRI,
    )
    device_id_strategy: DeviceIDStrategy = DeviceIDStrategy.UUID  # deviceIDStrategy
    fail_on_init_error: bool = True
    compat_with_cpu_manager: bool = False  # compatWithCPUManager
    # Unset on the wire: derived from driver.enabled.
    nvidia_driver_root: str = DRIVER_ROOT_CONTAINERIZED
    # Parsed once by the parser; its text as written, e.g. "gpu:sharedgpu:4,mig-3g.20gb:small:2".
    resource_config: ResourceConfig = dataclasses.field(default_factory=ResourceConfig)
    # NVIDIA's devicePlugin.config: an admin's ConfigMap of plugin configs (name) and the key
    # used on nodes without a nvidia.com/device-plugin.config label (default).
    config_name: ConfigMapName = ConfigMapName("")  # config.name
    config_default: str = ""  # config.default
    # mps.root: the host directory the MPS control daemon and the plugin share.
    mps_root: str = DEFAULT_MPS_ROOT

    @property
    def resource_renames(self) -> tuple[ResourceRename, ...]:
        """The valid resourceConfig entries (`validate_policy` reports the others)."""
        return self.resource_config.renames


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceMonitorSpec:
    enabled: bool = False
    interval: str = ""  # "": Prometheus' global scrape interval
    honor_labels: bool = False
    scrape_timeout: str = ""  # scrapeTimeout; "": Prometheus' default
    additional_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Prometheus RelabelConfigs, passed through as written.
    relabelings: tuple[Mapping[str, object], ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class DcgmSpec(ComponentSpec):
    """The standalone DCGM hostengine (`dcgm`)."""

    host_port: int = DEFAULT_DCGM_HOST_PORT  # hostPort


@dataclasses.dataclass(frozen=True, kw_only=True)
class DcgmExporterSpec(ComponentSpec):
    service_monitor: ServiceMonitorSpec = dataclasses.field(default_factory=ServiceMonitorSpec)
    # service.type and service.internalTrafficPolicy of Service nvidia-dcgm-exporter (NVIDIA's defaults).
    service_type: str = "ClusterIP"
    internal_traffic_policy: str = "Cluster"
    metrics_config_map: ConfigMapName = ConfigMapName("")  # config.name


@dataclasses.dataclass(frozen=True, kw_only=True)
class MigManagerSpec(ComponentSpec):
    """The MIG manager (`migManager`): partitions GPUs as each node's nvidia.com/mig.config says."""

    # config.name: the admin's mig-parted ConfigMap; "": ours (default-mig-parted-config).
    config_name: ConfigMapName = ConfigMapName("")
    # config.default: the config a MIG-capable node without nvidia.com/mig.config is labelled with.
    config_default: str = "all-disabled"
    # gpuClientsConfig.name: the admin's GPU clients ConfigMap; "": ours (default-gpu-clients).
    gpu_clients_config_name: ConfigMapName = ConfigMapName("")


@dataclasses.dataclass(frozen=True, kw_only=True)
class VgpuManagerSpec(ComponentSpec):
    """The vGPU manager (`vgpuManager`): NVIDIA's vGPU host driver on the vm-vgpu nodes.

    NB: its image is not public (NVIDIA licenses it; the admin builds it and names it here):
    no release default.  `enabled` defaults to false, as NVIDIA's IsEnabled.
    """

    enabled: bool = False
    # driverManager: the k8s-driver-manager init container's image and env (DRIVER_MANAGER_IMAGE).
    driver_manager: DriverManagerSpec = dataclasses.field(default_factory=lambda: DriverManagerSpec())
    kernel_module_config_map: ConfigMapName = ConfigMapName("")  # kernelModuleConfig.name


@dataclasses.dataclass(frozen=True, kw_only=True)
class VfioManagerSpec(ComponentSpec):
    """The VFIO manager (`vfioManager`): binds the vm-passthrough nodes' GPUs to vfio-pci."""

    # driverManager: its k8s-driver-manager init container's image, pull policy and secrets, and env
    # (DRIVER_MANAGER_IMAGE when unset), as NVIDIA's TransformVFIOManager.
    driver_manager: DriverManagerSpec = dataclasses.field(default_factory=lambda: DriverManagerSpec())


# The vGPU device manager's ConfigMap of vGPU types when vgpuDeviceManager.config.name is unset (NVIDIA's).
DEFAULT_VGPU_DEVICES_CONFIG: Final = "default-vgpu-devices-config"


@dataclasses.dataclass(frozen=True, kw_only=True)
class VgpuDeviceManagerSpec(ComponentSpec):
    """The vGPU device manager (`vgpuDeviceManager`): creates each vm-vgpu node's vGPU devices as
    its nvidia.com/vgpu.config (else `config.default`) names them.  Off by default, as NVIDIA's."""

    enabled: bool = False
    # config.name: the admin's ConfigMap of vGPU configs; "": ours (default-vgpu-devices-config).
    config_name: ConfigMapName = ConfigMapName("")
    # config.default: the config a node without nvidia.com/vgpu.config gets (DEFAULT_VGPU_CONFIG).
    config_default: str = "default"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContainerSettings:
    """The env and resources of one more container of an operand (NVIDIA's
    DRADriverKubeletPluginSpec / DRADriverControllerSpec without the health check)."""

    env: tuple[EnvVar, ...] = ()
    resources: ResourceRequirements = dataclasses.field(default_factory=ResourceRequirements)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComputeDomainsSpec:
    """NVIDIA's ComputeDomains (multi-node NVLink, `draDriver.computeDomains`, NVIDIA's
    GPUCluster.spec.draDriver.computeDomains): off unless enabled."""

    enabled: bool = False
    controller: ContainerSettings = dataclasses.field(default_factory=ContainerSettings)
    kubelet_plugin: ContainerSettings = dataclasses.field(default_factory=ContainerSettings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DraDriverSpec(ComponentSpec):
    """NVIDIA's DRA driver for GPUs (`draDriver`, the fields of NVIDIA's GPUCluster.spec.draDriver
    that apply here): off unless enabled; enabled, it owns the GPUs of every GPU node but those
    an admin labels `nvidia.com/gpu.deploy.dra-driver=false`, which keep the device plugin."""

    enabled: bool = False
    # featureGates: rendered as FEATURE_GATES (`Name=true,...`), as NVIDIA renders them.
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    compute_domains: ComputeDomainsSpec = dataclasses.field(default_factory=ComputeDomainsSpec)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ValidatorSpec(ComponentSpec):
    """The validator always runs (`enabled` stays true); env per validation."""

    plugin_env: tuple[EnvVar, ...] = ()  # plugin.env
    toolkit_env: tuple[EnvVar, ...] = ()  # toolkit.env
    driver_env: tuple[EnvVar, ...] = ()  # driver.env
    cuda_env: tuple[EnvVar, ...] = ()  # cuda.env
    vfio_pci_env: tuple[EnvVar, ...] = ()  # vfioPCI.env (the sandbox validator's vfio-pci check)
    vgpu_manager_env: tuple[EnvVar, ...] = ()  # vgpuManager.env (its vgpu-manager check)
    vgpu_devices_env: tuple[EnvVar, ...] = ()  # vgpuDevices.env (its vgpu-devices check)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AliasConflict:
    """One setting written under both of its names with different values; `used` wins."""

    used: str  # wire path, e.g. spec.driver.upgradePolicy.podDeletion.force
    used_value: bool | int
    ignored: str  # wire path of the same setting under the other name
    ignored_value: bool | int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Policy:
    """A ClusterPolicy's spec, defaults applied."""

    operator: OperatorSpec = dataclasses.field(default_factory=OperatorSpec)
    daemonsets: DaemonsetsSpec = dataclasses.field(default_factory=DaemonsetsSpec)
    driver: DriverSpec = dataclasses.field(default_factory=DriverSpec)
    toolkit: ToolkitSpec = dataclasses.field(default_factory=ToolkitSpec)
    device_plugin: DevicePluginSpec = dataclasses.field(default_factory=DevicePluginSpec)  # devicePlugin
    dcgm: DcgmSpec = dataclasses.field(default_factory=DcgmSpec)
    dcgm_exporter: DcgmExporterSpec = dataclasses.field(default_factory=DcgmExporterSpec)  # dcgmExporter
    gfd: ComponentSpec = dataclasses.field(default_factory=ComponentSpec)
    node_status_exporter: ComponentSpec = dataclasses.field(  # nodeStatusExporter
        default_factory=lambda: ComponentSpec(enabled=False)
    )
    mig_manager: MigManagerSpec = dataclasses.field(default_factory=MigManagerSpec)  # migManager
    dra_driver: DraDriverSpec = dataclasses.field(default_factory=DraDriverSpec)  # draDriver
    # The VM operands (NVIDIA's defaults: on); deployed only with sandbox_workloads.enabled.
    vfio_manager: VfioManagerSpec = dataclasses.field(default_factory=VfioManagerSpec)  # vfioManager
    sandbox_device_plugin: ComponentSpec = dataclasses.field(  # sandboxDevicePlugin
        default_factory=ComponentSpec
    )
    vgpu_manager: VgpuManagerSpec = dataclasses.field(default_factory=VgpuManagerSpec)  # vgpuManager
    vgpu_device_manager: VgpuDeviceManagerSpec = dataclasses.field(  # vgpuDeviceManager
        default_factory=VgpuDeviceManagerSpec
    )
    validator: ValidatorSpec = dataclasses.field(default_factory=ValidatorSpec)
    host_paths: HostPaths = dataclasses.field(default_factory=HostPaths)  # hostPaths
    cdi: CdiSpec = dataclasses.field(default_factory=CdiSpec)
    sandbox_workloads: SandboxWorkloadsSpec = dataclasses.field(  # sandboxWorkloads
        default_factory=SandboxWorkloadsSpec
    )
    # psa.enabled: label the operand namespace for the privileged pod security level.
    psa_enabled: bool = False
    # GPUDirect Storage (nvidia-fs) and GDRCopy (gdrdrv) modules, containers of the driver pods.
    gds: ComponentSpec = dataclasses.field(default_factory=lambda: ComponentSpec(enabled=False))
    gdrcopy: ComponentSpec = dataclasses.field(default_factory=lambda: ComponentSpec(enabled=False))
    # NVIDIA's spec.mig.strategy as written; device_plugin.mig_strategy is what applies.
    nvidia_mig_strategy: MigStrategy | None = None
    # Settings given different values under NVIDIA's podDeletion and the seed's gpuPodDeletion
    # (validate_policy warns about them; using either name alone is fine).
    alias_conflicts: tuple[AliasConflict, ...] = ()

    def deploys(self, section: str) -> bool:
        """Whether the component under `spec.<section>` is deployed: its `enabled`, and for the VM
        operands' sections also sandboxWorkloads.enabled (NVIDIA's isStateEnabled)."""
        on = self.components()[section].enabled
        return on and (section not in VM_SECTIONS or self.sandbox_workloads.enabled)

    def components(self) -> Mapping[str, ComponentSpec]:
        """Every operand by its field under `spec`, in deploy order."""
        return {
            "driver": self.driver,
            "toolkit": self.toolkit,
            "validator": self.validator,
            "devicePlugin": self.device_plugin,
            "draDriver": self.dra_driver,
            "vfioManager": self.vfio_manager,
            "sandboxDevicePlugin": self.sandbox_device_plugin,
            "vgpuManager": self.vgpu_manager,
            "vgpuDeviceManager": self.vgpu_device_manager,
            "dcgm": self.dcgm,
            "dcgmExporter": self.dcgm_exporter,
            "gfd": self.gfd,
            "migManager": self.mig_manager,
            "nodeStatusExporter": self.node_status_exporter,
        }


# --- maxUnavailable ------------------------------------------


def scaled_max_unavailable(value: IntOrString, total: int) -> int:
    """A maxUnavailable as a number of nodes out of `total`; percentages round up, as NVIDIA's do.

    Raises ValueError on a value `validate_policy` reports as invalid.
    """
    if isinstance(value, int):
        return value
    if not INT_OR_PERCENT_RE.match(value):
        raise ValueError(f"{value!r} is neither a count nor a percentage")
    if value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)
