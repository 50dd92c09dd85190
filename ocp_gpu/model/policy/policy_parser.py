"""A ClusterPolicy spec (a mapping) read into a `Policy`, with exactly the CRD's defaults.

`parse_policy` turns a spec (as stored by the API server, or read from a file for
`ocp-gpu render`) into a `Policy`, filling in exactly the defaults the CRD
declares (ocp_gpu/crds/clusterpolicies.nvidia.com.yaml; a unit test walks its
`default:` values and compares), so a spec behaves the same whether or not a
server defaulted it.  It never raises on a spec the CRD schema accepts; on one
it would reject (a wrong type, an unknown enum value) it raises
`PolicyParseError` naming the field.  Pure: no I/O, no Kubernetes client.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TypedDict, TypeVar

from ocp_gpu.model.policy import policy_spec, resource_config
from ocp_gpu.model.policy.policy_spec import (
    DEFAULT_DAEMONSET_MAX_UNAVAILABLE,
    DEFAULT_DCGM_HOST_PORT,
    DEFAULT_KUBELET_ROOT_DIR,
    DEFAULT_MPS_ROOT,
    DEFAULT_PRIORITY_CLASS,
    DEFAULT_RUNTIME_CLASS,
    DEFAULT_TOOLKIT_INSTALL_DIR,
    DEFAULT_UPGRADE_MAX_UNAVAILABLE,
    DRIVER_ROOT_CONTAINERIZED,
    GPU_POD_DELETION,
    POD_DELETION_ALIAS,
    AliasConflict,
    CdiSpec,
    ComponentSpec,
    ComputeDomainsSpec,
    ConfigMapName,
    ContainerRuntime,
    ContainerSettings,
    DaemonsetsSpec,
    DcgmExporterSpec,
    DcgmSpec,
    DeviceIDStrategy,
    DeviceListStrategy,
    DevicePluginSpec,
    DraDriverSpec,
    Drain,
    DriverManagerSpec,
    DriverSpec,
    EnvVar,
    GpuPodDeletion,
    GpuWorkload,
    HostPaths,
    ImagePullPolicy,
    ImageSpec,
    IntOrString,
    KernelModuleType,
    LicensingConfig,
    MigManagerSpec,
    MigStrategy,
    OperatorSpec,
    PodSelector,
    Policy,
    PrecompiledFallback,
    ProbeTiming,
    RdmaSpec,
    ResourceRequirements,
    SandboxMode,
    SandboxWorkloadsSpec,
    ServiceMonitorSpec,
    Toleration,
    ToolkitSpec,
    UpdateStrategy,
    UpgradePolicy,
    ValidatorSpec,
    VfioManagerSpec,
    VgpuDeviceManagerSpec,
    VgpuManagerSpec,
    WaitForCompletion,
)

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
    host_network: bool


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
        "host_network": fields.flag("hostNetwork", False),
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


# gpuPodDeletion's fields: wire name -> the CRD default.
_POD_DELETION_DEFAULTS: dict[str, bool | int] = {
    "force": GpuPodDeletion().force,
    "timeoutSeconds": GpuPodDeletion().timeout_seconds,
    "deleteEmptyDir": GpuPodDeletion().delete_empty_dir,
}


def _pod_deletion(seed: _Fields, nvidia: _Fields) -> tuple[GpuPodDeletion, tuple[AliasConflict, ...]]:
    """gpuPodDeletion with NVIDIA's podDeletion laid over it, field by field, and where they disagree.

    NB: NVIDIA's CRD calls it podDeletion (its Helm values say gpuPodDeletion).  Our CRD defaults
    only gpuPodDeletion, so every field present under podDeletion was written by someone: it
    wins.  For the same reason a gpuPodDeletion field at its default may be the server's, not
    the admin's: only a value off the default that podDeletion contradicts is a conflict.
    """
    values: dict[str, bool | int] = {}
    conflicts = []
    for key, default in _POD_DELETION_DEFAULTS.items():
        seed_value: bool | int
        if isinstance(default, bool):
            seed_value = seed.flag(key, default)
            values[key] = nvidia.flag(key, seed_value)
        else:
            seed_value = seed.number(key, default)
            values[key] = nvidia.number(key, seed_value)
        if nvidia.has(key) and seed_value != default and values[key] != seed_value:
            conflicts.append(
                AliasConflict(
                    used=f"{POD_DELETION_ALIAS}.{key}",
                    used_value=values[key],
                    ignored=f"{GPU_POD_DELETION}.{key}",
                    ignored_value=seed_value,
                )
            )
    deletion = GpuPodDeletion(
        force=bool(values["force"]),
        timeout_seconds=int(values["timeoutSeconds"]),
        delete_empty_dir=bool(values["deleteEmptyDir"]),
    )
    return deletion, tuple(conflicts)


def _upgrade_policy(fields: _Fields) -> tuple[UpgradePolicy, tuple[AliasConflict, ...]]:
    """upgradePolicy, and the settings its two names for gpuPodDeletion disagree on."""
    wait = fields.child("waitForCompletion")
    deletion, conflicts = _pod_deletion(fields.child("gpuPodDeletion"), fields.child("podDeletion"))
    drain = fields.child("drain")
    policy = UpgradePolicy(
        auto_upgrade=fields.flag("autoUpgrade", True),
        max_parallel_upgrades=fields.number("maxParallelUpgrades", 1),
        max_unavailable=fields.int_or_string("maxUnavailable", DEFAULT_UPGRADE_MAX_UNAVAILABLE),
        wait_for_completion=WaitForCompletion(
            timeout_seconds=wait.number("timeoutSeconds", 0),
            pod_selector=PodSelector(wait.text("podSelector")),
        ),
        gpu_pod_deletion=deletion,
        drain=Drain(
            enable=drain.flag("enable", False),
            force=drain.flag("force", False),
            pod_selector=PodSelector(drain.text("podSelector")),
            timeout_seconds=drain.number("timeoutSeconds", 300),
            delete_empty_dir=drain.flag("deleteEmptyDir", False),
        ),
    )
    return policy, conflicts


def _driver(fields: _Fields) -> tuple[DriverSpec, tuple[AliasConflict, ...]]:
    upgrade_policy, alias_conflicts = _upgrade_policy(fields.child("upgradePolicy"))
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
        virtual_topology_config_map=ConfigMapName(fields.child("virtualTopology").text("config")),
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
    return driver, alias_conflicts


def _probe(fields: _Fields) -> ProbeTiming:
    return ProbeTiming(
        initial_delay_seconds=fields.opt_number("initialDelaySeconds"),
        timeout_seconds=fields.opt_number("timeoutSeconds"),
        period_seconds=fields.opt_number("periodSeconds"),
        success_threshold=fields.opt_number("successThreshold"),
        failure_threshold=fields.opt_number("failureThreshold"),
    )


def _device_plugin(
    fields: _Fields, nvidia_mig_strategy: MigStrategy | None, driver_root: str, cdi_enabled: bool
) -> DevicePluginSpec:
    mig_strategy = fields.opt_choice("migStrategy", MigStrategy) or nvidia_mig_strategy or MigStrategy.NONE
    written = fields.opt_choice("deviceListStrategy", DeviceListStrategy)
    if written is not None:
        # The seed's field, set: it wins, as NVIDIA's devicePlugin.env DEVICE_LIST_STRATEGY would.
        strategies: tuple[DeviceListStrategy, ...] = (written,)
    elif cdi_enabled:
        strategies = (DeviceListStrategy.CDI_ANNOTATIONS, DeviceListStrategy.CDI_CRI)
    else:
        strategies = (DeviceListStrategy.ENVVAR,)
    return DevicePluginSpec(
        **_component_fields(fields, True),
        mig_strategy=mig_strategy,
        device_list_strategies=strategies,
        device_id_strategy=fields.choice("deviceIDStrategy", DeviceIDStrategy, DeviceIDStrategy.UUID),
        fail_on_init_error=fields.flag("failOnInitError", True),
        compat_with_cpu_manager=fields.flag("compatWithCPUManager", False),
        nvidia_driver_root=fields.text("nvidiaDriverRoot") or driver_root,
        resource_config=resource_config.read_resource_config(fields.text("resourceConfig")),
        config_name=ConfigMapName(fields.child("config").text("name")),
        config_default=fields.child("config").text("default"),
        mps_root=fields.child("mps").text("root") or DEFAULT_MPS_ROOT,
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


def _mig_manager(fields: _Fields) -> MigManagerSpec:
    config = fields.child("config")
    return MigManagerSpec(
        **_component_fields(fields, True),
        config_name=ConfigMapName(config.text("name")),
        # NB: the CRD defaults it to all-disabled (NVIDIA's); "" asks for no label at all.
        config_default=config.text("default", "all-disabled"),
        gpu_clients_config_name=ConfigMapName(fields.child("gpuClientsConfig").text("name")),
    )


def _vfio_manager(fields: _Fields) -> VfioManagerSpec:
    manager = fields.child("driverManager")
    return VfioManagerSpec(
        **_component_fields(fields, True),
        driver_manager=DriverManagerSpec(image=_image(manager), env=_env(manager)),
    )


def _vgpu_manager(fields: _Fields) -> VgpuManagerSpec:
    manager = fields.child("driverManager")
    return VgpuManagerSpec(
        **_component_fields(fields, False),
        driver_manager=DriverManagerSpec(image=_image(manager), env=_env(manager)),
        kernel_module_config_map=ConfigMapName(fields.child("kernelModuleConfig").text("name")),
    )


def _vgpu_device_manager(fields: _Fields) -> VgpuDeviceManagerSpec:
    config = fields.child("config")
    return VgpuDeviceManagerSpec(
        **_component_fields(fields, False),
        config_name=ConfigMapName(config.text("name")),
        # NB: the CRD defaults it to "default" (NVIDIA's); "" is refused by the device manager.
        config_default=config.text("default") or "default",
    )


def _dra_driver(fields: _Fields) -> DraDriverSpec:
    gates = fields.child("featureGates")
    domains = fields.child("computeDomains")
    return DraDriverSpec(
        **_component_fields(fields, False),
        feature_gates={name: gates.flag(name, False) for name in sorted(fields.raw_object("featureGates"))},
        compute_domains=ComputeDomainsSpec(
            enabled=domains.flag("enabled", False),
            controller=_container_settings(domains.child("controller")),
            kubelet_plugin=_container_settings(domains.child("kubeletPlugin")),
        ),
    )


def _container_settings(fields: _Fields) -> ContainerSettings:
    resources = fields.child("resources")
    return ContainerSettings(
        env=_env(fields),
        resources=ResourceRequirements(
            limits=resources.quantity_map("limits"), requests=resources.quantity_map("requests")
        ),
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
        vfio_pci_env=_env(fields.child("vfioPCI")),
        vgpu_manager_env=_env(fields.child("vgpuManager")),
        vgpu_devices_env=_env(fields.child("vgpuDevices")),
    )


def parse_policy(spec: Mapping[str, object]) -> Policy:
    """The Policy a ClusterPolicy spec describes, with the CRD's defaults filled in.

    Never raises on a spec the CRD schema accepts; raises PolicyParseError (naming
    the field) on one it would reject, which only a file can hold.
    """
    fields = _Fields(spec, "spec")
    nvidia_mig_strategy = fields.child("mig").opt_choice("strategy", MigStrategy)
    driver, alias_conflicts = _driver(fields.child("driver"))
    toolkit_fields = fields.child("toolkit")
    cdi = CdiSpec(
        enabled=fields.child("cdi").flag("enabled", True),
        nri_plugin_enabled=fields.child("cdi").flag("nriPluginEnabled", False),
    )
    host_paths = HostPaths(
        root_fs=fields.child("hostPaths").text("rootFS") or "/",
        driver_install_dir=fields.child("hostPaths").text("driverInstallDir") or DRIVER_ROOT_CONTAINERIZED,
        kubelet_root_dir=fields.child("hostPaths").text("kubeletRootDir").rstrip("/")
        or DEFAULT_KUBELET_ROOT_DIR,
    )
    return Policy(
        operator=_operator(fields.child("operator")),
        daemonsets=_daemonsets(fields.child("daemonsets")),
        driver=driver,
        toolkit=ToolkitSpec(
            **_component_fields(toolkit_fields, True),
            install_dir=toolkit_fields.text("installDir", DEFAULT_TOOLKIT_INSTALL_DIR),
        ),
        device_plugin=_device_plugin(
            fields.child("devicePlugin"),
            nvidia_mig_strategy,
            policy_spec.driver_root(driver.enabled, host_paths.driver_install_dir),
            cdi.enabled,
        ),
        dcgm=DcgmSpec(
            **_component_fields(fields.child("dcgm"), True),
            host_port=fields.child("dcgm").number("hostPort", DEFAULT_DCGM_HOST_PORT),
        ),
        dcgm_exporter=_dcgm_exporter(fields.child("dcgmExporter")),
        gfd=ComponentSpec(**_component_fields(fields.child("gfd"), True)),
        node_status_exporter=ComponentSpec(**_component_fields(fields.child("nodeStatusExporter"), False)),
        mig_manager=_mig_manager(fields.child("migManager")),
        dra_driver=_dra_driver(fields.child("draDriver")),
        vfio_manager=_vfio_manager(fields.child("vfioManager")),
        sandbox_device_plugin=ComponentSpec(**_component_fields(fields.child("sandboxDevicePlugin"), True)),
        vgpu_manager=_vgpu_manager(fields.child("vgpuManager")),
        vgpu_device_manager=_vgpu_device_manager(fields.child("vgpuDeviceManager")),
        validator=_validator(fields.child("validator")),
        gds=ComponentSpec(**_component_fields(fields.child("gds"), False)),
        gdrcopy=ComponentSpec(**_component_fields(fields.child("gdrcopy"), False)),
        host_paths=host_paths,
        cdi=cdi,
        sandbox_workloads=SandboxWorkloadsSpec(
            enabled=fields.child("sandboxWorkloads").flag("enabled", False),
            default_workload=fields.child("sandboxWorkloads").choice(
                "defaultWorkload", GpuWorkload, GpuWorkload.CONTAINER
            ),
            mode=fields.child("sandboxWorkloads").choice("mode", SandboxMode, SandboxMode.KUBEVIRT),
        ),
        psa_enabled=fields.child("psa").flag("enabled", False),
        nvidia_mig_strategy=nvidia_mig_strategy,
        alias_conflicts=alias_conflicts,
    )
