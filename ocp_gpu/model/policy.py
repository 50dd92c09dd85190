"""The ClusterPolicy spec as frozen data, with the CRD's defaults and the checks the CRD cannot make.

`parse_policy` turns a spec (as stored by the API server, or read from a file for
`ocp-gpu render`) into a `Policy`, filling in exactly the defaults the CRD
declares (ocp_gpu/crds/clusterpolicies.nvidia.com.yaml; a unit test walks its
`default:` values and compares), so a spec behaves the same whether or not a
server defaulted it.  It never raises on a spec the CRD schema accepts; on one
it would reject (a wrong type, an unknown enum value) it raises
`PolicyParseError` naming the field.

`validate_policy` finds what the schema cannot: selectors that do not parse,
upgrade budgets that can never let a node through, images that cannot be
resolved, contradictory options.  Each problem names the field and the fix.

Python names are snake_case; each field's comment gives its wire name where it
differs in more than case.  Pure: no I/O, no Kubernetes client.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, NewType, TypedDict, TypeVar

from ocp_gpu.model import images, resource_config, selectors
from ocp_gpu.model.problems import PolicyProblem, Severity
from ocp_gpu.model.resource_config import ResourceRename, parse_resource_config

__all__ = [
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
    "MigStrategy",
    "OperatorSpec",
    "Policy",
    "PolicyParseError",
    "PolicyProblem",
    "PrecompiledFallback",
    "ProbeTiming",
    "RdmaSpec",
    "ResourceRename",
    "ResourceRequirements",
    "ServiceMonitorSpec",
    "Severity",
    "Toleration",
    "ToolkitSpec",
    "UpdateStrategy",
    "UpgradePolicy",
    "ValidatorSpec",
    "WaitForCompletion",
    "parse_policy",
    "parse_resource_config",
    "scaled_max_unavailable",
    "validate_policy",
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
# The standalone DCGM hostengine's port (NVIDIA's default); the exporter connects to it.
DEFAULT_DCGM_HOST_PORT: Final = 5555
# Not CRD defaults: derived from driver.enabled when devicePlugin.nvidiaDriverRoot is unset.
DRIVER_ROOT_CONTAINERIZED: Final = "/run/nvidia/driver"
DRIVER_ROOT_HOST: Final = "/"
# The wire path of NVIDIA's name for gpuPodDeletion.
POD_DELETION_ALIAS: Final = "spec.driver.upgradePolicy.podDeletion"

# Same pattern as the CRD's (int-or-string with ^[0-9]+%?$).
_INT_OR_PERCENT_RE: Final = re.compile(r"^[0-9]+%?$")


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorSpec:
    # None: cri-o on OpenShift, containerd elsewhere (decided with the platform).
    default_runtime: ContainerRuntime | None = None
    runtime_class: str = DEFAULT_RUNTIME_CLASS
    # use_ocp_driver_toolkit; None: true on OpenShift (see planning/platform.py).
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
    # operator's env OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS overrides it (reconcilers/upgrades.py).
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
    device_list_strategy: DeviceListStrategy = DeviceListStrategy.ENVVAR
    device_id_strategy: DeviceIDStrategy = DeviceIDStrategy.UUID  # deviceIDStrategy
    fail_on_init_error: bool = True
    compat_with_cpu_manager: bool = False  # compatWithCPUManager
    # Unset on the wire: derived from driver.enabled.
    nvidia_driver_root: str = DRIVER_ROOT_CONTAINERIZED
    # As written, e.g. "gpu:sharedgpu:4,mig-3g.20gb:small:2"; see `resource_renames`.
    resource_config: str = ""
    # NVIDIA's devicePlugin.config: an admin's ConfigMap of plugin configs (name) and the key
    # used on nodes without a nvidia.com/device-plugin.config label (default).
    config_name: ConfigMapName = ConfigMapName("")  # config.name
    config_default: str = ""  # config.default

    @property
    def resource_renames(self) -> tuple[ResourceRename, ...]:
        """The valid resourceConfig entries (`validate_policy` reports the others)."""
        return parse_resource_config(self.resource_config)[0]


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
    host_network: bool = False  # hostNetwork


@dataclasses.dataclass(frozen=True, kw_only=True)
class DcgmExporterSpec(ComponentSpec):
    service_monitor: ServiceMonitorSpec = dataclasses.field(default_factory=ServiceMonitorSpec)
    # service.type and service.internalTrafficPolicy of Service nvidia-dcgm-exporter (NVIDIA's defaults).
    service_type: str = "ClusterIP"
    internal_traffic_policy: str = "Cluster"
    metrics_config_map: ConfigMapName = ConfigMapName("")  # config.name


@dataclasses.dataclass(frozen=True, kw_only=True)
class ValidatorSpec(ComponentSpec):
    """The validator always runs (`enabled` stays true); env per validation."""

    plugin_env: tuple[EnvVar, ...] = ()  # plugin.env
    toolkit_env: tuple[EnvVar, ...] = ()  # toolkit.env
    driver_env: tuple[EnvVar, ...] = ()  # driver.env
    cuda_env: tuple[EnvVar, ...] = ()  # cuda.env


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
    validator: ValidatorSpec = dataclasses.field(default_factory=ValidatorSpec)
    host_paths: HostPaths = dataclasses.field(default_factory=HostPaths)  # hostPaths
    # psa.enabled: label the operand namespace for the privileged pod security level.
    psa_enabled: bool = False
    # GPUDirect Storage (nvidia-fs) and GDRCopy (gdrdrv) modules, containers of the driver pods.
    gds: ComponentSpec = dataclasses.field(default_factory=lambda: ComponentSpec(enabled=False))
    gdrcopy: ComponentSpec = dataclasses.field(default_factory=lambda: ComponentSpec(enabled=False))
    # NVIDIA's spec.mig.strategy as written; device_plugin.mig_strategy is what applies.
    nvidia_mig_strategy: MigStrategy | None = None
    # Wire paths of NVIDIA-named aliases the spec used (validate_policy warns about them).
    aliases_used: tuple[str, ...] = ()

    def components(self) -> Mapping[str, ComponentSpec]:
        """Every operand by its field under `spec`, in deploy order."""
        return {
            "driver": self.driver,
            "toolkit": self.toolkit,
            "validator": self.validator,
            "devicePlugin": self.device_plugin,
            "dcgm": self.dcgm,
            "dcgmExporter": self.dcgm_exporter,
            "gfd": self.gfd,
            "nodeStatusExporter": self.node_status_exporter,
        }


# --- parsing --------------------------------------------------------------------


class PolicyParseError(ValueError):
    """The spec does not have the shape the CRD schema requires (only possible off-server)."""

    def __init__(self, field: str, expected: str, value: object) -> None:
        super().__init__(f"{field}: expected {expected}, got {value!r}")
        self.field = field


_E = TypeVar("_E", bound=enum.StrEnum)


class _Fields:
    """One object of the spec, read with type checks; `None` and absence both mean unset."""

    def __init__(self, data: object, path: str) -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise PolicyParseError(path, "an object", data)
        self._data: Mapping[object, object] = data
        self.path = path

    def _get(self, key: str) -> object:
        return self._data.get(key)

    def has(self, key: str) -> bool:
        return self._get(key) is not None

    def child(self, key: str) -> _Fields:
        return _Fields(self._get(key), f"{self.path}.{key}")

    def flag(self, key: str, default: bool) -> bool:
        value = self.opt_flag(key)
        return default if value is None else value

    def opt_flag(self, key: str) -> bool | None:
        value = self._get(key)
        if value is None or isinstance(value, bool):
            return value
        raise PolicyParseError(f"{self.path}.{key}", "true or false", value)

    def number(self, key: str, default: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        # NB: bool is an int in Python; the schema's integer is not.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise PolicyParseError(f"{self.path}.{key}", "an integer", value)

    def opt_number(self, key: str) -> int | None:
        return self.number(key, 0) if self.has(key) else None

    def text(self, key: str, default: str = "") -> str:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        raise PolicyParseError(f"{self.path}.{key}", "a string", value)

    def choice(self, key: str, cls: type[_E], default: _E) -> _E:
        value = self.opt_choice(key, cls)
        return default if value is None else value

    def opt_choice(self, key: str, cls: type[_E]) -> _E | None:
        value = self._get(key)
        if value is None:
            return None
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            return cls(value)
        except ValueError:
            allowed = ", ".join(member.value for member in cls)
            raise PolicyParseError(f"{self.path}.{key}", f"one of {allowed}", value) from None

    def int_or_string(self, key: str, default: IntOrString) -> IntOrString:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise PolicyParseError(f"{self.path}.{key}", "an integer or a string", value)

    def _list(self, key: str) -> Sequence[object]:
        value = self._get(key)
        if value is None:
            return ()
        if isinstance(value, list | tuple):
            return value
        raise PolicyParseError(f"{self.path}.{key}", "a list", value)

    def texts(self, key: str) -> tuple[str, ...]:
        items = self._list(key)
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise PolicyParseError(f"{self.path}.{key}[{index}]", "a string", item)
        return tuple(str(item) for item in items)

    def objects(self, key: str) -> tuple[_Fields, ...]:
        return tuple(
            _Fields(item, f"{self.path}.{key}[{index}]") for index, item in enumerate(self._list(key))
        )

    def raw_objects(self, key: str) -> tuple[Mapping[str, object], ...]:
        """Free-form objects (x-kubernetes-preserve-unknown-fields), passed through."""
        return tuple({str(k): v for k, v in item._data.items()} for item in self.objects(key))

    def raw_object(self, key: str) -> dict[str, object]:
        """A free-form object (a core type such as a PodSecurityContext), passed through."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise PolicyParseError(f"{self.path}.{key}", "an object", value)
        return {str(name): item for name, item in value.items()}

    def text_map(self, key: str) -> dict[str, str]:
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise PolicyParseError(f"{self.path}.{key}", "an object of strings", value)
        result: dict[str, str] = {}
        for name, item in value.items():
            if not isinstance(name, str) or not isinstance(item, str):
                raise PolicyParseError(f"{self.path}.{key}.{name}", "a string", item)
            result[name] = item
        return result

    def quantity_map(self, key: str) -> dict[str, str]:
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise PolicyParseError(f"{self.path}.{key}", "an object of quantities", value)
        result: dict[str, str] = {}
        for name, item in value.items():
            if isinstance(item, bool) or not isinstance(item, int | str):
                raise PolicyParseError(f"{self.path}.{key}.{name}", "a quantity (e.g. 500m, 1Gi, 2)", item)
            result[str(name)] = str(item)
        return result


def _env(fields: _Fields) -> tuple[EnvVar, ...]:
    return tuple(EnvVar(name=item.text("name"), value=item.text("value")) for item in fields.objects("env"))


def _image(fields: _Fields) -> ImageSpec:
    return ImageSpec(
        repository=fields.text("repository"),
        name=fields.text("image"),
        version=fields.text("version"),
        pull_policy=fields.choice("imagePullPolicy", ImagePullPolicy, ImagePullPolicy.IF_NOT_PRESENT),
        pull_secrets=fields.texts("imagePullSecrets"),
    )


class _ComponentFields(TypedDict):
    """ComponentSpec's fields, as keyword arguments for it and its subclasses."""

    enabled: bool
    image: ImageSpec
    env: tuple[EnvVar, ...]
    args: tuple[str, ...]
    resources: ResourceRequirements


def _component_fields(fields: _Fields, enabled_default: bool) -> _ComponentFields:
    """The ComponentSpec part of any component."""
    resources = fields.child("resources")
    return {
        "enabled": fields.flag("enabled", enabled_default),
        "image": _image(fields),
        "env": _env(fields),
        "args": fields.texts("args"),
        "resources": ResourceRequirements(
            limits=resources.quantity_map("limits"), requests=resources.quantity_map("requests")
        ),
    }


def _operator(fields: _Fields) -> OperatorSpec:
    return OperatorSpec(
        default_runtime=fields.opt_choice("defaultRuntime", ContainerRuntime),
        runtime_class=fields.text("runtimeClass", DEFAULT_RUNTIME_CLASS),
        use_ocp_driver_toolkit=fields.opt_flag("use_ocp_driver_toolkit"),
        labels=fields.text_map("labels"),
        annotations=fields.text_map("annotations"),
        metrics_service_monitor=_service_monitor(fields.child("metrics").child("serviceMonitor")),
        metrics_service_monitor_enabled=fields.child("metrics").child("serviceMonitor").opt_flag("enabled"),
    )


def _service_monitor(monitor: _Fields) -> ServiceMonitorSpec:
    return ServiceMonitorSpec(
        enabled=monitor.flag("enabled", False),
        interval=monitor.text("interval"),
        honor_labels=monitor.flag("honorLabels", False),
        scrape_timeout=monitor.text("scrapeTimeout"),
        additional_labels=monitor.text_map("additionalLabels"),
        relabelings=monitor.raw_objects("relabelings"),
    )


def _daemonsets(fields: _Fields) -> DaemonsetsSpec:
    return DaemonsetsSpec(
        labels=fields.text_map("labels"),
        annotations=fields.text_map("annotations"),
        tolerations=tuple(
            Toleration(
                key=item.text("key"),
                operator=item.text("operator"),
                value=item.text("value"),
                effect=item.text("effect"),
                toleration_seconds=item.opt_number("tolerationSeconds"),
            )
            for item in fields.objects("tolerations")
        ),
        priority_class_name=fields.text("priorityClassName", DEFAULT_PRIORITY_CLASS),
        update_strategy=fields.choice("updateStrategy", UpdateStrategy, UpdateStrategy.ROLLING_UPDATE),
        max_unavailable=fields.child("rollingUpdate").int_or_string(
            "maxUnavailable", DEFAULT_DAEMONSET_MAX_UNAVAILABLE
        ),
        pod_security_context=fields.raw_object("podSecurityContext"),
    )


def _upgrade_policy(fields: _Fields) -> tuple[UpgradePolicy, tuple[str, ...]]:
    """upgradePolicy, and the aliases it used."""
    wait = fields.child("waitForCompletion")
    deletion = fields.child("gpuPodDeletion")
    # NB: NVIDIA's CRD calls it podDeletion (its Helm values say gpuPodDeletion).  The CRD
    # defaults only gpuPodDeletion, so every field present under podDeletion was written
    # by someone: it wins, field by field.
    alias = fields.child("podDeletion")
    aliases = (POD_DELETION_ALIAS,) if fields.has("podDeletion") else ()
    drain = fields.child("drain")
    policy = UpgradePolicy(
        auto_upgrade=fields.flag("autoUpgrade", True),
        max_parallel_upgrades=fields.number("maxParallelUpgrades", 1),
        max_unavailable=fields.int_or_string("maxUnavailable", DEFAULT_UPGRADE_MAX_UNAVAILABLE),
        wait_for_completion=WaitForCompletion(
            timeout_seconds=wait.number("timeoutSeconds", 0),
            pod_selector=PodSelector(wait.text("podSelector")),
        ),
        gpu_pod_deletion=GpuPodDeletion(
            force=alias.flag("force", deletion.flag("force", False)),
            timeout_seconds=alias.number("timeoutSeconds", deletion.number("timeoutSeconds", 300)),
            delete_empty_dir=alias.flag("deleteEmptyDir", deletion.flag("deleteEmptyDir", False)),
        ),
        drain=Drain(
            enable=drain.flag("enable", False),
            force=drain.flag("force", False),
            pod_selector=PodSelector(drain.text("podSelector")),
            timeout_seconds=drain.number("timeoutSeconds", 300),
            delete_empty_dir=drain.flag("deleteEmptyDir", False),
        ),
    )
    return policy, aliases


def _driver(fields: _Fields) -> tuple[DriverSpec, tuple[str, ...]]:
    upgrade_policy, aliases = _upgrade_policy(fields.child("upgradePolicy"))
    licensing = fields.child("licensingConfig")
    manager = fields.child("manager")
    fallback = fields.child("precompiledFallback")
    driver = DriverSpec(
        **_component_fields(fields, True),
        use_precompiled=fields.flag("usePrecompiled", False),
        kernel_module_type=fields.choice("kernelModuleType", KernelModuleType, KernelModuleType.AUTO),
        repo_config_map=ConfigMapName(fields.child("repoConfig").text("configMapName")),
        cert_config_map=ConfigMapName(fields.child("certConfig").text("name")),
        licensing=LicensingConfig(
            config_map_name=ConfigMapName(licensing.text("configMapName")),
            secret_name=licensing.text("secretName"),
            nls_enabled=licensing.flag("nlsEnabled", True),
        ),
        kernel_module_config_map=ConfigMapName(fields.child("kernelModuleConfig").text("name")),
        manager=DriverManagerSpec(image=_image(manager), env=_env(manager)),
        rdma=RdmaSpec(
            enabled=fields.child("rdma").flag("enabled", False),
            use_host_mofed=fields.child("rdma").flag("useHostMofed", False),
        ),
        secret_env=fields.text("secretEnv"),
        startup_probe=_probe(fields.child("startupProbe")),
        liveness_probe=_probe(fields.child("livenessProbe")) if fields.has("livenessProbe") else None,
        readiness_probe=_probe(fields.child("readinessProbe")) if fields.has("readinessProbe") else None,
        upgrade_policy=upgrade_policy,
        precompiled_fallback=PrecompiledFallback(
            enabled=fallback.flag("enabled", False),
            version=fallback.text("version"),
            image_pull_timeout_seconds=fallback.number("imagePullTimeoutSeconds", 300),
        ),
    )
    return driver, aliases


def _probe(fields: _Fields) -> ProbeTiming:
    return ProbeTiming(
        initial_delay_seconds=fields.opt_number("initialDelaySeconds"),
        timeout_seconds=fields.opt_number("timeoutSeconds"),
        period_seconds=fields.opt_number("periodSeconds"),
        success_threshold=fields.opt_number("successThreshold"),
        failure_threshold=fields.opt_number("failureThreshold"),
    )


def _device_plugin(
    fields: _Fields, nvidia_mig_strategy: MigStrategy | None, driver_enabled: bool
) -> DevicePluginSpec:
    mig_strategy = fields.opt_choice("migStrategy", MigStrategy) or nvidia_mig_strategy or MigStrategy.NONE
    # The operator's driver lives under /run/nvidia/driver; a host driver under /.
    derived_root = DRIVER_ROOT_CONTAINERIZED if driver_enabled else DRIVER_ROOT_HOST
    return DevicePluginSpec(
        **_component_fields(fields, True),
        mig_strategy=mig_strategy,
        device_list_strategy=fields.choice(
            "deviceListStrategy", DeviceListStrategy, DeviceListStrategy.ENVVAR
        ),
        device_id_strategy=fields.choice("deviceIDStrategy", DeviceIDStrategy, DeviceIDStrategy.UUID),
        fail_on_init_error=fields.flag("failOnInitError", True),
        compat_with_cpu_manager=fields.flag("compatWithCPUManager", False),
        nvidia_driver_root=fields.text("nvidiaDriverRoot") or derived_root,
        resource_config=fields.text("resourceConfig"),
        config_name=ConfigMapName(fields.child("config").text("name")),
        config_default=fields.child("config").text("default"),
    )


def _dcgm_exporter(fields: _Fields) -> DcgmExporterSpec:
    monitor = fields.child("serviceMonitor")
    return DcgmExporterSpec(
        **_component_fields(fields, True),
        service_monitor=_service_monitor(monitor),
        metrics_config_map=ConfigMapName(fields.child("config").text("name")),
        service_type=fields.child("service").text("type") or "ClusterIP",
        internal_traffic_policy=fields.child("service").text("internalTrafficPolicy") or "Cluster",
    )


def _validator(fields: _Fields) -> ValidatorSpec:
    component = _component_fields(fields, True)
    # The validator has no switch: it gates every other operand.
    component["enabled"] = True
    return ValidatorSpec(
        **component,
        plugin_env=_env(fields.child("plugin")),
        toolkit_env=_env(fields.child("toolkit")),
        driver_env=_env(fields.child("driver")),
        cuda_env=_env(fields.child("cuda")),
    )


def parse_policy(spec: Mapping[str, object]) -> Policy:
    """The Policy a ClusterPolicy spec describes, with the CRD's defaults filled in.

    Never raises on a spec the CRD schema accepts; raises PolicyParseError (naming
    the field) on one it would reject, which only a file can hold.
    """
    fields = _Fields(spec, "spec")
    nvidia_mig_strategy = fields.child("mig").opt_choice("strategy", MigStrategy)
    driver, aliases = _driver(fields.child("driver"))
    toolkit_fields = fields.child("toolkit")
    return Policy(
        operator=_operator(fields.child("operator")),
        daemonsets=_daemonsets(fields.child("daemonsets")),
        driver=driver,
        toolkit=ToolkitSpec(
            **_component_fields(toolkit_fields, True),
            install_dir=toolkit_fields.text("installDir", DEFAULT_TOOLKIT_INSTALL_DIR),
        ),
        device_plugin=_device_plugin(fields.child("devicePlugin"), nvidia_mig_strategy, driver.enabled),
        dcgm=DcgmSpec(
            **_component_fields(fields.child("dcgm"), True),
            host_port=fields.child("dcgm").number("hostPort", DEFAULT_DCGM_HOST_PORT),
            host_network=fields.child("dcgm").flag("hostNetwork", False),
        ),
        dcgm_exporter=_dcgm_exporter(fields.child("dcgmExporter")),
        gfd=ComponentSpec(**_component_fields(fields.child("gfd"), True)),
        node_status_exporter=ComponentSpec(**_component_fields(fields.child("nodeStatusExporter"), False)),
        validator=_validator(fields.child("validator")),
        gds=ComponentSpec(**_component_fields(fields.child("gds"), False)),
        gdrcopy=ComponentSpec(**_component_fields(fields.child("gdrcopy"), False)),
        host_paths=HostPaths(
            root_fs=fields.child("hostPaths").text("rootFS") or "/",
            driver_install_dir=fields.child("hostPaths").text("driverInstallDir")
            or DRIVER_ROOT_CONTAINERIZED,
        ),
        psa_enabled=fields.child("psa").flag("enabled", False),
        nvidia_mig_strategy=nvidia_mig_strategy,
        aliases_used=aliases,
    )


# --- maxUnavailable ------------------------------------------


def scaled_max_unavailable(value: IntOrString, total: int) -> int:
    """A maxUnavailable as a number of nodes out of `total`; percentages round up, as NVIDIA's do.

    Raises ValueError on a value `validate_policy` reports as invalid.
    """
    if isinstance(value, int):
        return value
    if not _INT_OR_PERCENT_RE.match(value):
        raise ValueError(f"{value!r} is neither a count nor a percentage")
    if value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


# --- validation -------------------------------------------------------------------


def _env_lists(policy: Policy) -> Iterator[tuple[str, tuple[EnvVar, ...]]]:
    for key, component in policy.components().items():
        yield f"spec.{key}.env", component.env
    yield "spec.driver.manager.env", policy.driver.manager.env
    for key in ("plugin", "toolkit", "driver", "cuda"):
        yield f"spec.validator.{key}.env", getattr(policy.validator, f"{key}_env")


def _duplicate_env(policy: Policy) -> Iterator[PolicyProblem]:
    for field, env in _env_lists(policy):
        names = [variable.name for variable in env]
        for name in sorted({name for name in names if names.count(name) > 1}):
            # The container would get one value and silently drop the other.
            yield PolicyProblem(
                field=field,
                message=f"the environment variable {name!r} is listed {names.count(name)} times",
                fix=f"keep one entry named {name!r}",
            )


def _pod_selectors(upgrade: UpgradePolicy) -> Iterator[PolicyProblem]:
    base = "spec.driver.upgradePolicy"
    for field, selector in (
        (f"{base}.waitForCompletion.podSelector", upgrade.wait_for_completion.pod_selector),
        (f"{base}.drain.podSelector", upgrade.drain.pod_selector),
    ):
        try:
            selectors.parse_label_selector(selector)
        except ValueError as error:
            # The upgrade would stop at this node's wait or drain step.
            yield PolicyProblem(
                field=field,
                message=f"{selector!r} is not a label selector: {error}",
                fix='use kubectl -l syntax, e.g. "app=training" or "job-type in (batch,train)"; "" for none',
            )


def _max_unavailable(policy: Policy) -> Iterator[PolicyProblem]:
    upgrade = policy.driver.upgrade_policy
    for field, value, zero_matters, zero_message in (
        (
            "spec.driver.upgradePolicy.maxUnavailable",
            upgrade.max_unavailable,
            upgrade.auto_upgrade,
            "with autoUpgrade on, no node may ever become unavailable, so no driver can ever upgrade",
        ),
        (
            "spec.daemonsets.rollingUpdate.maxUnavailable",
            policy.daemonsets.max_unavailable,
            policy.daemonsets.update_strategy is UpdateStrategy.ROLLING_UPDATE,
            "a RollingUpdate DaemonSet with maxUnavailable 0 is rejected by Kubernetes",
        ),
    ):
        if (isinstance(value, int) and value < 0) or (
            isinstance(value, str) and not _INT_OR_PERCENT_RE.match(value)
        ):
            # Only a file can hold this: the CRD rejects it.
            yield PolicyProblem(
                field=field,
                message=f"{value!r} is neither a count nor a percentage",
                fix='use e.g. 1 or "25%"',
            )
        elif zero_matters and scaled_max_unavailable(value, 100) == 0:
            yield PolicyProblem(
                field=field, message=f"{value!r}: {zero_message}", fix='set it to at least 1 or "1%"'
            )


def _negative_numbers(policy: Policy) -> Iterator[PolicyProblem]:
    upgrade = policy.driver.upgrade_policy
    base = "spec.driver.upgradePolicy"
    for field, value in (
        (f"{base}.maxParallelUpgrades", upgrade.max_parallel_upgrades),
        (f"{base}.waitForCompletion.timeoutSeconds", upgrade.wait_for_completion.timeout_seconds),
        (f"{base}.gpuPodDeletion.timeoutSeconds", upgrade.gpu_pod_deletion.timeout_seconds),
        (f"{base}.drain.timeoutSeconds", upgrade.drain.timeout_seconds),
        (
            "spec.driver.precompiledFallback.imagePullTimeoutSeconds",
            policy.driver.precompiled_fallback.image_pull_timeout_seconds,
        ),
    ):
        if value < 0:
            # Only a file can hold this: the CRD's minimum rejects it.
            yield PolicyProblem(field=field, message=f"{value} is negative", fix="use 0 (no limit) or more")


def _images(policy: Policy, env: Mapping[str, str]) -> Iterator[PolicyProblem]:
    for key, component in policy.components().items():
        if not component.enabled:
            # A disabled component's image is never used.
            continue
        resolved = images.resolve_image(component.image, component=key, env=env)
        if isinstance(resolved, PolicyProblem):
            yield resolved
    if policy.driver.enabled:
        resolved = images.resolve_image(policy.driver.manager.image, component="driver.manager", env=env)
        if isinstance(resolved, PolicyProblem):
            yield resolved
        for key, module in (("gds", policy.gds), ("gdrcopy", policy.gdrcopy)):
            # containers of the driver pods: their images matter only with the driver
            if not module.enabled:
                continue
            module_image = images.resolve_image(module.image, component=key, env=env)
            if isinstance(module_image, PolicyProblem):
                yield module_image


def _driver_options(policy: Policy) -> Iterator[PolicyProblem]:
    driver = policy.driver
    if not driver.enabled:
        dependants = [
            name
            for name, spec in (("toolkit", policy.toolkit), ("devicePlugin", policy.device_plugin))
            if spec.enabled
        ]
        if dependants:
            # Fine with a driver preinstalled on the hosts; otherwise they wait forever.
            yield PolicyProblem(
                field="spec.driver.enabled",
                message=f"the driver is not deployed but {' and '.join(dependants)} "
                f"{'need' if len(dependants) > 1 else 'needs'} one: "
                "they will wait for a driver installed on the hosts",
                fix="set spec.driver.enabled to true, unless the hosts have the NVIDIA driver preinstalled",
                severity=Severity.WARNING,
            )
    if driver.use_precompiled and driver.image.version.startswith("sha256:"):
        # Precompiled images are found by tag (<branch>-<kernel>-<os>); a digest has no tag to extend.
        yield PolicyProblem(
            field="spec.driver.version",
            message="usePrecompiled needs a driver branch to build tags from, not a digest",
            fix="set spec.driver.version to the driver branch, e.g. 570",
        )
    if driver.use_precompiled and driver.kernel_module_type is KernelModuleType.PROPRIETARY:
        # The image was built with one module type; the setting may be ignored.
        yield PolicyProblem(
            field="spec.driver.kernelModuleType",
            message="precompiled driver images ship the kernel modules they were built with; "
            "proprietary may not be honoured",
            fix="use kernelModuleType auto with usePrecompiled, or build the driver on the node",
            severity=Severity.WARNING,
        )
    for key, module in (("gds", policy.gds), ("gdrcopy", policy.gdrcopy)):
        if module.enabled and driver.use_precompiled:
            # Their modules are built on the node against the driver's sources, which precompiled images lack.
            yield PolicyProblem(
                field=f"spec.{key}.enabled",
                message=f"{key} builds its kernel module on the node; precompiled driver images cannot",
                fix=f"set spec.driver.usePrecompiled to false, or spec.{key}.enabled to false",
            )
    for kind, probe in (("startupProbe", driver.startup_probe), ("livenessProbe", driver.liveness_probe)):
        if probe is not None and probe.success_threshold not in (None, 0, 1):
            # Kubernetes rejects the pod template: the DaemonSet could not be applied.
            yield PolicyProblem(
                field=f"spec.driver.{kind}.successThreshold",
                message=f"{probe.success_threshold}: Kubernetes allows only 1 for a {kind}",
                fix=f"remove spec.driver.{kind}.successThreshold or set it to 1",
            )
    fallback = driver.precompiled_fallback
    field = "spec.driver.precompiledFallback"
    if fallback.enabled and not fallback.version:
        yield PolicyProblem(
            field=f"{field}.version",
            message="the fallback is enabled but has no driver version to build",
            fix=f"set {field}.version to a full driver version, e.g. 570.124.06",
        )
    elif fallback.enabled and images.parse_reference(f"x:{fallback.version}") is None:
        yield PolicyProblem(
            field=f"{field}.version",
            message=f"{fallback.version!r} is not a valid image tag",
            fix=f"set {field}.version to a full driver version, e.g. 570.124.06",
        )
    elif fallback.enabled and not driver.use_precompiled:
        # Nothing to fall back from.
        yield PolicyProblem(
            field=f"{field}.enabled",
            message="the fallback only applies with spec.driver.usePrecompiled",
            fix=f"set spec.driver.usePrecompiled to true, or {field}.enabled to false",
            severity=Severity.WARNING,
        )
    elif (
        fallback.enabled
        and driver.image.version
        and not driver.image.version.startswith("sha256:")
        and fallback.version.split(".")[0] != driver.image.version.split(".")[0]
    ):
        # Nodes that fall back would run another branch than their neighbours.
        yield PolicyProblem(
            field=f"{field}.version",
            message=f"{fallback.version!r} is not on the driver branch {driver.image.version!r} "
            "of the precompiled images",
            fix=f"set {field}.version to a release of the same branch",
            severity=Severity.WARNING,
        )


def _device_plugin_options(policy: Policy) -> Iterator[PolicyProblem]:
    plugin = policy.device_plugin
    # Each problem names the entry at fault (model/resource_config.py).
    yield from resource_config.resource_config_problems(plugin.resource_config, plugin.mig_strategy.value)
    if plugin.config_name and not plugin.config_default:
        # The config-manager would not know which of the ConfigMap's configs an unlabelled node uses.
        yield PolicyProblem(
            field="spec.devicePlugin.config.default",
            message=f"devicePlugin.config.name {plugin.config_name!r} is set but no default config is named",
            fix="set spec.devicePlugin.config.default to one of the ConfigMap's keys",
        )
    if plugin.config_name and plugin.resource_config:
        # The admin's ConfigMap is used as is; resourceConfig only shapes the operator's own.
        yield PolicyProblem(
            field="spec.devicePlugin.resourceConfig",
            message=f"ignored: devicePlugin.config.name {plugin.config_name!r} supplies the plugin's configs",
            fix="put the sharing settings in that ConfigMap, or unset devicePlugin.config.name",
            severity=Severity.WARNING,
        )
    if policy.nvidia_mig_strategy is not None and plugin.mig_strategy is not policy.nvidia_mig_strategy:
        # Both places name a strategy and they disagree.
        yield PolicyProblem(
            field="spec.devicePlugin.migStrategy",
            message=f"{plugin.mig_strategy.value!r} contradicts spec.mig.strategy "
            f"{policy.nvidia_mig_strategy.value!r}",
            fix="set the strategy in one place (spec.devicePlugin.migStrategy wins)",
        )


def _aliases(policy: Policy) -> Iterator[PolicyProblem]:
    for alias in policy.aliases_used:
        yield PolicyProblem(
            field=alias,
            message="podDeletion is NVIDIA's CRD name for gpuPodDeletion; "
            "its fields override gpuPodDeletion's",
            fix="move these settings to spec.driver.upgradePolicy.gpuPodDeletion and remove podDeletion",
            severity=Severity.WARNING,
        )


def validate_policy(policy: Policy, env: Mapping[str, str]) -> list[PolicyProblem]:
    """Every semantic problem of `policy`, errors and warnings, in spec order.

    `env` is the operator's environment (image defaults such as DRIVER_IMAGE).
    """
    return [
        *_images(policy, env),
        *_driver_options(policy),
        *_pod_selectors(policy.driver.upgrade_policy),
        *_max_unavailable(policy),
        *_negative_numbers(policy),
        *_device_plugin_options(policy),
        *_duplicate_env(policy),
        *_aliases(policy),
        *_monitoring_options(policy),
    ]


# Kubernetes' Service types and internal traffic policies (core/v1 Service).
SERVICE_TYPES: Final = ("ClusterIP", "NodePort", "LoadBalancer")
TRAFFIC_POLICIES: Final = ("Cluster", "Local")


def _monitoring_options(policy: Policy) -> list[PolicyProblem]:
    """The DCGM hostengine's port and the exporter's Service must be ones Kubernetes accepts."""
    found = []
    exporter = policy.dcgm_exporter
    if exporter.enabled and exporter.service_type not in SERVICE_TYPES:
        found.append(
            PolicyProblem(
                field="spec.dcgmExporter.service.type",
                message=f"{exporter.service_type!r} is not a Service type",
                fix=f"use one of {', '.join(SERVICE_TYPES)} (ExternalName cannot serve metrics)",
            )
        )
    if exporter.enabled and exporter.internal_traffic_policy not in TRAFFIC_POLICIES:
        found.append(
            PolicyProblem(
                field="spec.dcgmExporter.service.internalTrafficPolicy",
                message=f"{exporter.internal_traffic_policy!r} is not an internal traffic policy",
                fix=f"use one of {', '.join(TRAFFIC_POLICIES)}",
            )
        )
    if policy.dcgm.enabled and not 1 <= policy.dcgm.host_port <= 65535:
        found.append(
            PolicyProblem(
                field="spec.dcgm.hostPort",
                message=f"{policy.dcgm.host_port} is not a port number",
                fix=f"use a port from 1 to 65535 (unset: {DEFAULT_DCGM_HOST_PORT})",
            )
        )
    return found
