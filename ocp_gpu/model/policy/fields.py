"""Every ClusterPolicy field: honoured, refused, or deprecated and ignored; and which a spec sets.

One list (`RULES`) says per field path what ocp-gpu does with it.  Our CRD accepts every
field of NVIDIA's ClusterPolicy v1 schema, so that a policy written for NVIDIA's operator
applies unchanged; the fields ocp-gpu does not implement are named back to the admin
(`unsupported_settings`, the `UnsupportedSetting` condition and Event) instead of being
silently dropped, and change nothing else.  docs/clusterpolicy-fields.md is generated
from this list and the CRD (hack/gen_field_docs.py).

A rule covers its path and everything below it; the longest matching path wins.  To mark a
feature implemented, flip its rule to `HONOURED` and say what it does.

Pure data and pure functions: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping


class Support(enum.StrEnum):
    # ocp-gpu does what the field says.
    HONOURED = "honoured"
    # Accepted so the policy applies, not implemented: a value that would change something is
    # reported by path (status condition and Event); nothing else changes.
    REFUSED = "refused"
    # Deprecated (NVIDIA ignores it too): accepted, reported when set, no effect.
    IGNORED = "deprecated-and-ignored"


@dataclasses.dataclass(frozen=True)
class Rule:
    # A field path (`spec.driver.rdma`), covering everything below it.
    path: str
    support: Support
    # Honoured: what ocp-gpu does with it.  Otherwise: what ocp-gpu does instead.
    note: str
    # Values that change nothing, by the leaf's path relative to `path` ("" for the path itself):
    # NVIDIA's defaults and our CRD's, e.g. {"enabled": (True, False)} for a component whose
    # default is on but which ocp-gpu does not deploy yet.  Unset, false, "", [] and {} always do.
    quiet: Mapping[str, tuple[object, ...]] = dataclasses.field(default_factory=dict)


H, R, IGN = Support.HONOURED, Support.REFUSED, Support.IGNORED
_NOT_DEPLOYED = "not deployed by ocp-gpu yet: no DaemonSet, and `state: ready` does not wait for it"
_ON_OFF: tuple[object, ...] = (True, False)
_HOST_NETWORK = (
    "true: the pods share the host's network, with dnsPolicy ClusterFirstWithHostNet (as NVIDIA does)"
)
# NB: our CRD's field, not NVIDIA's (its v1 schema has no gds/gdrcopy hostNetwork).
_MODULE_NETWORK = (
    "the nvidia-fs and gdrcopy containers run in the driver pods, whose network is driver.hostNetwork's"
    " (NVIDIA has no such field)"
)

RULES: tuple[Rule, ...] = (
    # --- operator
    Rule("spec.operator.defaultRuntime", H, "container runtime the toolkit configures"),
    Rule(
        "spec.operator.runtimeClass",
        H,
        "the RuntimeClass created (handler nvidia) and named by GPU operand pods outside cri-o",
        {"": ("nvidia",)},
    ),
    Rule("spec.operator.use_ocp_driver_toolkit", H, "Driver Toolkit builds, one DaemonSet per RHCOS version"),
    Rule(
        "spec.operator.labels",
        IGN,
        "NVIDIA's operator (v26.7.0) reads it nowhere either: spec.daemonsets.labels label the operand pods",
    ),
    Rule(
        "spec.operator.annotations",
        IGN,
        "NVIDIA's operator (v26.7.0) reads it nowhere either: spec.daemonsets.annotations annotate the"
        " operand pods",
    ),
    Rule(
        "spec.operator.initContainer",
        IGN,
        "deprecated: NVIDIA's operator (v26.7.0) runs no CUDA init container and reads it nowhere either",
    ),
    Rule(
        "spec.operator.metrics",
        H,
        "ServiceMonitor `gpu-operator` for the operator's /metrics (Service `gpu-operator`, port"
        " `gpu-operator-metrics`) where monitoring.coreos.com is served; enabled: false removes it",
    ),
    # --- daemonsets
    Rule("spec.daemonsets.labels", H, "labels on every operand DaemonSet and pod"),
    Rule("spec.daemonsets.annotations", H, "annotations on every operand DaemonSet and pod"),
    Rule("spec.daemonsets.tolerations", H, "tolerations of every operand pod"),
    Rule(
        "spec.daemonsets.priorityClassName",
        H,
        "PriorityClass of every operand pod",
        {"": ("system-node-critical",)},
    ),
    Rule(
        "spec.daemonsets.updateStrategy",
        H,
        "update strategy of operand DaemonSets (drivers stay OnDelete)",
        {"": ("RollingUpdate",)},
    ),
    Rule(
        "spec.daemonsets.rollingUpdate",
        H,
        "maxUnavailable of RollingUpdate operands",
        {"maxUnavailable": ("1",)},
    ),
    Rule("spec.daemonsets.podSecurityContext", H, "securityContext of every operand pod"),
    # --- driver
    Rule("spec.driver.enabled", H, "deploy the driver DaemonSets", {"": _ON_OFF}),
    Rule("spec.driver.repository", H, "driver image registry and path"),
    Rule("spec.driver.image", H, "driver image name or reference"),
    Rule("spec.driver.version", H, "driver image tag or digest"),
    Rule("spec.driver.imagePullPolicy", H, "pull policy of the driver and sidecar containers"),
    Rule("spec.driver.imagePullSecrets", H, "pull secrets of the driver pods"),
    Rule("spec.driver.env", H, "env of the driver container (operator-owned names keep their values)"),
    Rule("spec.driver.args", H, "extra arguments of the driver container"),
    Rule("spec.driver.resources", H, "resources of the driver container and the DTK sidecar"),
    Rule("spec.driver.usePrecompiled", H, "precompiled images, one DaemonSet per kernel and OS"),
    Rule(
        "spec.driver.precompiledFallback", H, "DTK build for kernels whose precompiled image cannot be pulled"
    ),
    Rule("spec.driver.kernelModuleType", H, "KERNEL_MODULE_TYPE of the driver container", {"": ("auto",)}),
    Rule("spec.driver.upgradePolicy", H, "the driver upgrade controller (docs/upgrade-state-machine.md)"),
    Rule("spec.driver.manager.repository", H, "k8s-driver-manager image registry and path"),
    Rule("spec.driver.manager.image", H, "k8s-driver-manager image name or reference"),
    Rule("spec.driver.manager.version", H, "k8s-driver-manager image tag or digest"),
    Rule("spec.driver.manager.imagePullPolicy", H, "pull policy of the k8s-driver-manager init container"),
    Rule("spec.driver.manager.env", H, "env of the k8s-driver-manager init container"),
    Rule("spec.driver.manager.imagePullSecrets", H, "pull secrets of the driver pods, with the driver's"),
    Rule(
        "spec.driver.repoConfig",
        H,
        "each key of the ConfigMap mounted where the node OS reads repositories (/etc/yum.repos.d, "
        "/etc/apt/sources.list.d, /etc/zypp/repos.d)",
    ),
    Rule(
        "spec.driver.certConfig",
        H,
        "each key of the ConfigMap mounted into the OS's CA directory (/etc/pki/ca-trust/extracted/pem, "
        "/usr/local/share/ca-certificates, /etc/pki/trust/anchors)",
    ),
    Rule(
        "spec.driver.licensingConfig",
        H,
        "gridd.conf at /drivers/gridd.conf from secretName (or configMapName); with nlsEnabled (default)"
        " client_configuration_token.tok at /drivers/ClientConfigToken/",
    ),
    Rule(
        "spec.driver.kernelModuleConfig",
        H,
        "each key of the ConfigMap (nvidia.conf, …) mounted under /drivers",
    ),
    Rule(
        "spec.driver.virtualTopology",
        H,
        "config: the ConfigMap's nvidia-topologyd.conf, mounted in the driver container at"
        " /etc/nvidia/nvidia-topologyd.conf (vGPU topology daemon)",
    ),
    Rule(
        "spec.driver.startupProbe", H, "timings of the driver container's startup probe (0 keeps ocp-gpu's)"
    ),
    Rule(
        "spec.driver.livenessProbe", H, "a liveness probe (nvidia-smi) on the driver container, these timings"
    ),
    Rule(
        "spec.driver.readinessProbe",
        H,
        "a readiness probe (nvidia-smi) on the driver container, these timings",
    ),
    Rule("spec.driver.secretEnv", H, "envFrom: every key of this Secret is env of the driver container"),
    Rule("spec.driver.hostNetwork", H, _HOST_NETWORK),
    Rule(
        "spec.driver.rdma",
        H,
        "nvidia-peermem-ctr in the driver pods, MOFED mounts (host /usr/src with useHostMofed), "
        "GPU_DIRECT_RDMA_ENABLED / USE_HOST_MOFED for the driver and k8s-driver-manager",
    ),
    Rule(
        "spec.driver.useNvidiaDriverCRD",
        H,
        "each NVIDIADriver (nvidia.com/v1alpha1) deploys the driver DaemonSets of the GPU nodes it "
        "selects; spec.driver then only gives the upgrade rules, each NVIDIADriver's upgradePolicy "
        "laid over them field by field",
    ),
    Rule(
        "spec.driver.useOpenKernelModules",
        IGN,
        "deprecated by NVIDIA: set spec.driver.kernelModuleType: open",
    ),
    # --- toolkit
    Rule("spec.toolkit", H, "the container toolkit DaemonSet", {"enabled": _ON_OFF}),
    Rule("spec.toolkit.hostNetwork", H, _HOST_NETWORK),
    # --- the GPU stack (rendering/operands/operand_catalog.py)
    Rule(
        "spec.devicePlugin",
        H,
        "the device plugin DaemonSet (nvidia-device-plugin-daemonset) and its config ConfigMap",
        {"enabled": _ON_OFF},
    ),
    Rule(
        "spec.devicePlugin.mps",
        H,
        "root: the host directory of the MPS control daemon's pipes and shared memory (<root>/shm),"
        " mounted by the MPS control daemon (nvidia-device-plugin-mps-control-daemon, on nodes GFD"
        " labels nvidia.com/mps.capable) and the device plugin (MPS_ROOT); MPS sharing itself is a"
        " plugin config with sharing.mps (devicePlugin.config)",
    ),
    Rule(
        "spec.draDriver",
        H,
        "NVIDIA's DRA driver: the kubelet plugin DaemonSet (nvidia-dra-driver-kubelet-plugin), its "
        "DeviceClasses gpu.nvidia.com, mig.nvidia.com and vfio.gpu.nvidia.com, RBAC and slice policy; "
        "it owns the GPUs of the nodes not labelled nvidia.com/gpu.deploy.dra-driver=false",
        {"enabled": _ON_OFF},
    ),
    Rule("spec.mig", H, "spec.mig.strategy: the device plugin's and GFD's MIG strategy"),
    Rule("spec.gfd", H, "the GPU feature discovery DaemonSet (gpu-feature-discovery)", {"enabled": _ON_OFF}),
    Rule(
        "spec.validator", H, "the operator validator DaemonSet (ocp-gpu validate driver|toolkit|cuda|plugin)"
    ),
    Rule(
        "spec.validator.vfioPCI",
        H,
        "env of the sandbox validator's vfio-pci check (ocp-gpu validate vfio-pci)",
    ),
    Rule(
        "spec.validator.vgpuManager",
        H,
        "env of the sandbox validator's vgpu-manager check (ocp-gpu validate vgpu-manager)",
    ),
    Rule(
        "spec.validator.vgpuDevices",
        H,
        "env of the sandbox validator's vgpu-devices check (ocp-gpu validate vgpu-devices)",
    ),
    # --- operands ocp-gpu does not deploy yet
    Rule(
        "spec.dcgm",
        H,
        "the standalone DCGM hostengine DaemonSet (nvidia-dcgm) on hostPort (5555) and hostNetwork",
        {"enabled": _ON_OFF, "hostPort": (5555,)},
    ),
    Rule(
        "spec.dcgmExporter",
        H,
        "the DCGM exporter DaemonSet and Service nvidia-dcgm-exporter (port gpu-metrics 9400;"
        " service.type, service.internalTrafficPolicy), config.name's dcgm-metrics.csv, serviceMonitor"
        " where monitoring.coreos.com is served",
        {"enabled": _ON_OFF},
    ),
    Rule(
        "spec.nodeStatusExporter",
        H,
        "the node status exporter DaemonSet (nvidia-node-status-exporter: `ocp-gpu node-status`),"
        " its Service and ServiceMonitor",
        {"enabled": _ON_OFF},
    ),
    Rule(
        "spec.migManager",
        H,
        "the MIG manager DaemonSet (nvidia-mig-manager) on MIG-capable GPU nodes; config.name's mig-parted"
        " ConfigMap, else ours (default-mig-parted-config: all-disabled, all-enabled, all-<profile>,"
        " all-balanced); config.default labels MIG-capable nodes nvidia.com/mig.config;"
        " gpuClientsConfig.name,"
        " else default-gpu-clients",
        {"enabled": _ON_OFF, "config.default": ("all-disabled",)},
    ),
    Rule("spec.migManager.hostNetwork", H, _HOST_NETWORK),
    # --- where things are on the host
    Rule(
        "spec.hostPaths.driverInstallDir",
        H,
        "where a driver installed by other means is (driver.enabled: false): the operands' driver root"
        " (the toolkit's NVIDIA_DRIVER_ROOT, the device plugin's unless nvidiaDriverRoot is set), the"
        " driver-install-dir volume of the validator (mounted at the same path, its driver validation"
        " told so), toolkit, device plugin and MIG manager, as NVIDIA's transformForDriverInstallDir;"
        " with driver.enabled a path other than /run/nvidia/driver is an Error (the driver installs there)",
    ),
    Rule(
        "spec.hostPaths.kubeletRootDir",
        H,
        "the kubelet's root on the host: the device plugin's device-plugins and the DCGM exporter's"
        " pod-resources directories under it (NVIDIA moves the exporter's only)",
        {"": ("/var/lib/kubelet",)},
    ),
    Rule(
        "spec.hostPaths.rootFS",
        H,
        "the driver pods' host-root volume, and HOST_ROOT when not /",
        {"": ("/",)},
    ),
    Rule(
        "spec.cdi",
        H,
        "enabled (default true): the toolkit generates CDI specifications and the device plugin hands"
        " GPUs over as CDI devices (cdi-annotations,cdi-cri), operand pods run under the RuntimeClass;"
        " false: the runtime hook (cri-o: the OCI hook). nriPluginEnabled: the toolkit's NRI plugin"
        " injects operand pods' GPUs by annotation, no RuntimeClass (an Error without CDI or the"
        " toolkit, as NVIDIA's)",
    ),
    Rule("spec.cdi.default", IGN, "deprecated by NVIDIA, which ignores it: cdi.enabled decides"),
    Rule(
        "spec.psa",
        H,
        "the operand namespace is labelled pod-security.kubernetes.io/enforce, audit, warn = privileged",
    ),
    Rule("spec.psp", IGN, "PodSecurityPolicy was removed in Kubernetes 1.25; ignored, as NVIDIA does"),
    Rule(
        "spec.gds",
        H,
        "nvidia-fs-ctr in the driver pods (image <version>-<os> like the driver's; GDS_IMAGE when unset),"
        " GDS_ENABLED for the driver and the DTK build",
    ),
    Rule(
        "spec.gdrcopy",
        H,
        "nvidia-gdrcopy-ctr in the driver pods (image <version>-<os>; GDRCOPY_IMAGE when unset),"
        " GDRCOPY_ENABLED for the driver and the DTK build",
    ),
    Rule(
        "spec.gds.args",
        IGN,
        "NVIDIA's operator (v26.7.0) passes it to no container either: nvidia-fs runs its install command",
    ),
    Rule("spec.gds.hostNetwork", R, _MODULE_NETWORK),
    Rule(
        "spec.gdrcopy.args",
        IGN,
        "NVIDIA's operator (v26.7.0) passes it to no container either: gdrcopy runs its install command",
    ),
    Rule("spec.gdrcopy.hostNetwork", R, _MODULE_NETWORK),
    Rule(
        "spec.sandboxWorkloads",
        H,
        "enabled: GPU nodes run the stack their nvidia.com/gpu.workload.config names (container,"
        " vm-passthrough, vm-vgpu; defaultWorkload without one), each exactly its own; the VM operands"
        " deploy",
    ),
    Rule(
        "spec.sandboxWorkloads.mode",
        R,
        "kubevirt only: the Kata sandbox device plugin is not deployed (NVIDIA deprecated its Kata manager)",
        {"": ("kubevirt",)},
    ),
    Rule(
        "spec.vgpuManager",
        H,
        "the vGPU manager (NVIDIA's vGPU host driver) on vm-vgpu nodes: one DaemonSet per RHCOS build"
        " with the Driver Toolkit on OpenShift (nvidia-vgpu-manager-daemonset-<build>), one per OS"
        " elsewhere; image <repository>/<image>:<version>-<os>, built by the admin (no default)",
    ),
    Rule(
        "spec.vgpuManager.kernelModuleConfig",
        H,
        "each key of the ConfigMap (nvidia.conf, …) mounted under /drivers in the vGPU manager container",
    ),
    Rule(
        "spec.vgpuDeviceManager",
        H,
        "the vGPU device manager DaemonSet (nvidia-vgpu-device-manager) on vm-vgpu nodes: creates the vGPU"
        " devices of the config nvidia.com/vgpu.config names (else config.default) from config.name's"
        " ConfigMap, or ours (default-vgpu-devices-config)",
        {"enabled": _ON_OFF, "config.default": ("default",)},
    ),
    Rule(
        "spec.vfioManager",
        H,
        "the VFIO manager DaemonSet (nvidia-vfio-manager) on vm-passthrough nodes: binds GPUs to vfio-pci",
        {"enabled": _ON_OFF},
    ),
    Rule(
        "spec.vfioManager.driverManager",
        H,
        "the VFIO manager's init container k8s-driver-manager (driver-manager uninstall_driver): its image"
        " (default DRIVER_MANAGER_IMAGE, the driver's), imagePullPolicy, imagePullSecrets and env",
    ),
    Rule(
        "spec.kataManager",
        R,
        "deprecated by NVIDIA: its operator v26.7.0 never deploys it whatever the policy says"
        ' (controllers/state_manager.go: "always return false for kata manager as it stands deprecated")',
        {"enabled": _ON_OFF, "config.artifactsDir": ("/opt/nvidia-gpu-operator/artifacts/runtimeclasses",)},
    ),
    Rule(
        "spec.sandboxDevicePlugin",
        H,
        "the KubeVirt GPU device plugin DaemonSet (nvidia-sandbox-device-plugin-daemonset) on VM nodes:"
        " nvidia.com/<GPU model> resources for permittedHostDevices",
        {"enabled": _ON_OFF},
    ),
    Rule(
        "spec.kataSandboxDevicePlugin",
        R,
        "Kata (sandboxWorkloads.mode: kata) is not supported: NVIDIA deprecated its Kata manager",
        {"enabled": _ON_OFF},
    ),
    Rule(
        "spec.ccManager",
        R,
        "not deployed yet: NVIDIA's k8s-cc-manager (each node's GPU confidential-computing mode, its"
        " nvidia.com/cc.mode label) is its own operand, not part of the passthrough stack",
        {"enabled": _ON_OFF, "defaultMode": ("off",)},
    ),
)

_BY_PATH = {rule.path: rule for rule in RULES}
# Values that change nothing wherever they appear: our CRD's default pull policy.
_QUIET_BY_NAME: Mapping[str, tuple[object, ...]] = {"imagePullPolicy": ("IfNotPresent",)}


def rule_for(path: str) -> Rule | None:
    """The rule of a field path (`[]`/`{}` and map keys allowed); None when no rule covers it."""
    # NB: strip list/map markers so `spec.driver.env[].name` finds `spec.driver.env`.
    parts = path.replace("[]", "").replace("{}", "").split(".")
    for end in range(len(parts), 0, -1):
        rule = _BY_PATH.get(".".join(parts[:end]))
        if rule is not None:
            return rule
    return None


@dataclasses.dataclass(frozen=True)
class Setting:
    """A field a spec sets to a value ocp-gpu does not act on."""

    path: str
    value: object
    rule: Rule

    def __str__(self) -> str:
        return f"{self.path}={_show(self.value)}"


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return f"[{len(value)} item(s)]"
    return str(value)


def _is_quiet(path: str, value: object, rule: Rule) -> bool:
    if value is None or value is False or value in ("", [], {}):
        return True
    relative = path[len(rule.path) + 1 :] if path != rule.path else ""
    if value in rule.quiet.get(relative, ()):
        return True
    return value in _QUIET_BY_NAME.get(path.rsplit(".", 1)[-1], ())


def _leaves(value: object, path: str) -> Iterator[tuple[str, object]]:
    """(path, value) of every scalar and every list in a spec; maps and objects are walked."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    else:
        yield path, value


def unsupported_settings(spec: Mapping[str, object]) -> tuple[Setting, ...]:
    """The fields `spec` sets, to a value that would change something, that ocp-gpu does not honour.

    Lists count as one setting (a non-empty `env` is set).  A path no rule covers cannot reach
    here through our CRD (tests/unit/test_fields.py covers every path of it); it is reported.
    """
    found: list[Setting] = []
    for path, value in _leaves(spec, "spec"):
        rule = rule_for(path)
        if rule is None:
            rule = Rule(path, Support.REFUSED, "not known to ocp-gpu")
        if rule.support is Support.HONOURED or _is_quiet(path, value, rule):
            continue
        found.append(Setting(path, value, rule))
    return tuple(found)


def describe(settings: tuple[Setting, ...], limit: int = 2048) -> str:
    """One message naming each setting and what ocp-gpu does instead, grouped by rule, within `limit`.

    A rule with a few settings shows each `path=value`; with more, `path.{a,b,…}`.  What does
    not fit is summed up by section ("and 12 more settings under spec.vgpuManager, …") and
    docs/clusterpolicy-fields.md says the rest, so a status never ends mid-word.
    """
    grouped: dict[str, list[Setting]] = {}
    for setting in settings:
        grouped.setdefault(setting.rule.path, []).append(setting)
    parts: list[str] = []
    left: list[Setting] = []
    for items in grouped.values():
        part = _describe_rule(items)
        # room for this part and for the summary of whatever does not fit after it
        if left or len("; ".join([*parts, part])) > limit - 500:
            left.extend(items)
        else:
            parts.append(part)
    if left:
        sections = ", ".join(dict.fromkeys(".".join(s.path.split(".")[:2]) for s in left))
        parts.append(
            f"and {len(left)} more unimplemented settings under {sections} (see docs/clusterpolicy-fields.md)"
        )
    return "; ".join(parts)[:limit]


def _describe_rule(items: list[Setting]) -> str:
    rule = items[0].rule
    what = "deprecated, ignored" if rule.support is Support.IGNORED else "not implemented"
    if len(items) <= 3:
        named = ", ".join(str(item) for item in items)
    else:
        # many leaves of one rule (a whole section): name them, without values
        base = rule.path
        named = f"{base}.{{{','.join(item.path[len(base) + 1 :] for item in items)}}}"
    return f"{named}: {what}; {rule.note}"
