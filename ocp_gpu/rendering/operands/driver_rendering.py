"""The driver operand: its declaration, and its manifests: RBAC, the trusted CA ConfigMap and one
DaemonSet per driver key.

Unlike the other operands (rendered alike by rendering/operands/operand_rendering.py), the
driver plans its own DaemonSets (planning/drivers/driver_plan.py: one per driver key, each with
its strategy, DTK sidecar and OS-suffixed image); this module renders them.
Input: the planner's desired DaemonSets, the policy and what the reconciler read
from the cluster (`DriverRenderInputs`).  Output: manifest dicts in apply order.
Pure: no I/O; every value reaches the templates through the injection-proof
`templating.render_state`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ocp_gpu.model import images, labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.proxy import ClusterProxy
from ocp_gpu.planning.drivers.driver_plan import DesiredDriverDaemonSet
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).  NB: `daemonset` is
# the name the per-key DaemonSets' names start from (planning/drivers/driver_names.py); the DTK
# sidecar's image comes from the cluster's driver-toolkit ImageStream, not from an environment variable.
OPERAND: Final = operand_types.Operand(
    "driver",
    "driver",
    "nvidia-driver-daemonset",
    reads=("gds", "gdrcopy", "hostPaths"),
    images=("driver", "driver.manager", "gds", "gdrcopy"),
    kinds=(*operand_types.BASE_KINDS, "ConfigMap", "Role", *operand_types.CLUSTER_RBAC),
    generic=False,
)
COMPONENT: Final = OPERAND.component
# The driver pods' ServiceAccount (and Role, RoleBinding); the ClusterRole is namespaced by name.
SERVICE_ACCOUNT: Final = "nvidia-driver"
CLUSTER_ROLE: Final = "ocp-gpu-nvidia-driver"
SCC_ROLE_BINDING: Final = "nvidia-driver-privileged-scc"
DIGEST_ENV: Final = "DRIVER_CONFIG_DIGEST"

# k8s-driver-manager's settings as NVIDIA documents them (seed 000); driver.manager.env overrides.
# NB: with autoUpgrade the upgrade controller annotates the node (nvidia.com/gpu-driver-upgrade-enabled)
# and k8s-driver-manager leaves eviction to it; these apply only with autoUpgrade: false.
DRIVER_MANAGER_ENV: Final[Mapping[str, str]] = {
    "ENABLE_GPU_POD_EVICTION": "true",
    "ENABLE_AUTO_DRAIN": "true",
    "DRAIN_USE_FORCE": "false",
    "DRAIN_POD_SELECTOR_LABEL": "",
    "DRAIN_TIMEOUT_SECONDS": "0s",
    "DRAIN_DELETE_EMPTYDIR_DATA": "false",
}
# ocp-gpu's probes of the driver container; driver.<kind>Probe timings are laid over them.
# NB: liveness and readiness start only once the startup probe passed (the driver is loaded).
_STARTUP_PROBE: Final[Mapping[str, int]] = {
    "initialDelaySeconds": 60,
    "periodSeconds": 10,
    "timeoutSeconds": 60,
    "successThreshold": 1,
    "failureThreshold": 120,
}
_LATER_PROBE: Final[Mapping[str, int]] = {
    "initialDelaySeconds": 0,
    "periodSeconds": 30,
    "timeoutSeconds": 10,
    "successThreshold": 1,
    "failureThreshold": 3,
}
# vGPU guest licensing, where NVIDIA's driver container reads it.
LICENSING_FILE: Final = "gridd.conf"
LICENSING_PATH: Final = "/drivers/gridd.conf"
NLS_TOKEN_FILE: Final = "client_configuration_token.tok"
NLS_TOKEN_PATH: Final = "/drivers/ClientConfigToken/client_configuration_token.tok"
# Where each OS's package manager reads repository files and the CA store reads certificates
# (driver.repoConfig, driver.certConfig); the ConfigMap's keys are mounted one file each.
_REPO_DIRS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("rhcos", "rhel", "centos", "rocky", "ol"), "/etc/yum.repos.d"),
    **dict.fromkeys(("ubuntu", "debian"), "/etc/apt/sources.list.d"),
    **dict.fromkeys(("sles", "sl-micro"), "/etc/zypp/repos.d"),
}
_CERT_DIRS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("rhcos", "rhel", "centos", "rocky", "ol"), "/etc/pki/ca-trust/extracted/pem"),
    **dict.fromkeys(("ubuntu", "debian"), "/usr/local/share/ca-certificates"),
    **dict.fromkeys(("sles", "sl-micro"), "/etc/pki/trust/anchors"),
}
# driver.kernelModuleConfig: module parameter files (nvidia.conf, …) where the driver container reads them.
KERNEL_MODULE_CONFIG_DIR: Final = "/drivers"
# driver.virtualTopology.config: the vGPU topology daemon's configuration, the one key NVIDIA
# mounts of that ConfigMap (its consts.VGPUTopologyConfigFileName, ...MountPath).
VIRTUAL_TOPOLOGY_FILE: Final = "nvidia-topologyd.conf"
VIRTUAL_TOPOLOGY_PATH: Final = "/etc/nvidia/nvidia-topologyd.conf"
# The ConfigMap holding the driver container's startup probe script (0430_startup_probe_configmap).
STARTUP_PROBE_CONFIGMAP: Final = "nvidia-driver-startup-probe"
# Env the templates or the operator own: a policy's env never replaces them.
_OWNED_ENV: Final = frozenset(
    {
        "NODE_NAME",
        "NODE_IP",
        "OPERATOR_NAMESPACE",
        "RHCOS_VERSION",
        "RHCOS_IMAGE_MISSING",
        "HOST_ROOT",
        DIGEST_ENV,
    }
)


@dataclasses.dataclass(frozen=True)
class DriverRenderInputs:
    """What the driver manifests need besides the plan and the policy."""

    namespace: str
    openshift: bool
    # The resolved k8s-driver-manager image (images.resolve_image for "driver.manager").
    manager_image: str
    # ClusterVersion's major.minor, for OPENSHIFT_VERSION when a node group lacks NFD's label.
    openshift_version: str = ""
    proxy: ClusterProxy | None = None
    service_account: str = SERVICE_ACCOUNT
    cluster_role: str = CLUSTER_ROLE
    trusted_ca_configmap: str = labels.TRUSTED_CA_CONFIGMAP
    # The data keys of the ConfigMaps the policy names, by name (desired.driver_manifests reads them).
    config_map_keys: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # The resolved images of the enabled driver modules: "gds", "gdrcopy" -> reference (no OS suffix).
    module_images: Mapping[str, str] = dataclasses.field(default_factory=dict)


def os_id(os_tag: str) -> str:
    """The OS ID of a DaemonSet's OS tag: rhcos4.16 -> rhcos, sl-micro6.0 -> sl-micro."""
    return os_tag.rstrip("0123456789.")


def config_dir(field: str, os: str) -> str | None:
    """Where the files of a ConfigMap-naming driver field go on an OS; None: nowhere known."""
    if field == "spec.driver.repoConfig.configMapName":
        return _REPO_DIRS.get(os)
    if field == "spec.driver.certConfig.name":
        return _CERT_DIRS.get(os)
    return KERNEL_MODULE_CONFIG_DIR


# The template with one DaemonSet per desired entry; every other state-driver template renders
# objects all keys share (RBAC, ConfigMaps), whatever the entries.
DAEMONSET_TEMPLATE: Final = f"{COMPONENT}/0500_daemonset.yaml.j2"


def render_shared(policy: policy_spec.Policy, inputs: DriverRenderInputs) -> dict[str, list[dict[str, Any]]]:
    """Per state-driver template file but the DaemonSet's: the manifests every driver key shares."""
    context = driver_state_context((), policy, inputs, {})
    return {
        name: templating.render_template(name, context)
        for name in templating.template_names(COMPONENT)
        if name != DAEMONSET_TEMPLATE
    }


def assemble(
    shared: Mapping[str, Sequence[dict[str, Any]]], daemonsets: Sequence[Sequence[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Every state-driver manifest in apply (template file) order, the DaemonSets in plan order."""
    manifests: list[dict[str, Any]] = []
    for name in templating.template_names(COMPONENT):
        if name == DAEMONSET_TEMPLATE:
            for daemonset in daemonsets:
                manifests.extend(daemonset)
        else:
            manifests.extend(shared[name])
    return manifests


def render_driver_state(
    desired: Sequence[DesiredDriverDaemonSet],
    policy: policy_spec.Policy,
    inputs: DriverRenderInputs,
) -> list[dict[str, Any]]:
    """Every state-driver manifest, in apply (template file) order, DRIVER_CONFIG_DIGEST filled in."""
    return assemble(
        render_shared(policy, inputs), [render_daemonset(entry, policy, inputs) for entry in desired]
    )


def render_daemonset(
    entry: DesiredDriverDaemonSet, policy: policy_spec.Policy, inputs: DriverRenderInputs
) -> list[dict[str, Any]]:
    """One driver key's DaemonSet (and whatever else its template renders per entry)."""
    # NB: the digest covers the rendered driver and sidecar containers and the volumes, so
    # it is rendered twice: once to see what the pods would run, once with the digest.
    draft = templating.render_template(DAEMONSET_TEMPLATE, driver_state_context((entry,), policy, inputs, {}))
    digests = {
        manifest["metadata"]["name"]: config_digest(manifest)
        for manifest in draft
        if manifest.get("kind") == "DaemonSet"
    }
    return templating.render_template(
        DAEMONSET_TEMPLATE, driver_state_context((entry,), policy, inputs, digests)
    )


def config_digest(daemonset: Mapping[str, Any]) -> str:
    """A digest of everything in a driver DaemonSet that needs the driver rebuilt or reloaded.

    The driver and DTK containers (image, command, args, env, mounts) and the volumes; not
    the init container's eviction settings, resources, tolerations or labels.  The driver
    container compares it with the one of the running driver to skip a needless reload.
    """
    pod = daemonset["spec"]["template"]["spec"]
    relevant = {
        "containers": [
            {
                key: (
                    [env for env in container.get("env", []) if env.get("name") != DIGEST_ENV]
                    if key == "env"
                    else container.get(key)
                )
                for key in ("name", "image", "command", "args", "env", "envFrom", "volumeMounts")
                # NB: absent keys stay out, so a template gaining a field keeps existing digests
                if key != "envFrom" or key in container
            }
            for container in pod.get("containers", [])
        ],
        "volumes": pod.get("volumes", []),
    }
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def driver_state_context(
    desired: Sequence[DesiredDriverDaemonSet],
    policy: policy_spec.Policy,
    inputs: DriverRenderInputs,
    digests: Mapping[str, str],
) -> dict[str, Any]:
    """The template context of state-driver; `digests` maps DaemonSet name -> config digest."""
    common_labels = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: labels.DRIVER_COMPONENT}
    trusted_ca = inputs.openshift and inputs.proxy is not None and inputs.proxy.trusted_ca
    return {
        "namespace": inputs.namespace,
        "openshift": inputs.openshift,
        "service_account": inputs.service_account,
        "cluster_role": inputs.cluster_role,
        "scc_cluster_role": operand_common.SCC_CLUSTER_ROLE,
        "driver_container": operand_types.DRIVER_CONTAINER,
        "dtk_container": operand_types.DTK_CONTAINER,
        "scc_role_binding": SCC_ROLE_BINDING,
        "common_labels": common_labels,
        "startup_probe_configmap": STARTUP_PROBE_CONFIGMAP,
        "trusted_ca": (
            {
                "name": inputs.trusted_ca_configmap,
                "labels": common_labels | {labels.INJECT_TRUSTED_CABUNDLE: "true"},
            }
            if trusted_ca
            else None
        ),
        "daemonsets": [
            _daemonset(entry, policy, inputs, digests.get(entry.name, ""), trusted_ca) for entry in desired
        ],
    }


def _daemonset(
    entry: DesiredDriverDaemonSet,
    policy: policy_spec.Policy,
    inputs: DriverRenderInputs,
    digest: str,
    trusted_ca: bool,
) -> dict[str, Any]:
    driver = policy.driver
    daemonsets = policy.daemonsets
    # Ours win over the policy's: the selector and identity labels must stay what GC reads.
    identity = {
        labels.APP: labels.DRIVER_APP,
        labels.COMPONENT: labels.DRIVER_COMPONENT,
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        **entry.labels,
        **entry.selector,
    }
    annotations: dict[str, str] = {}
    if entry.fallback_for is not None and entry.fallback_image is not None:
        # read back by planning/drivers.fallbacks_in_effect: the fallback survives restarts
        annotations[labels.PRECOMPILED_FALLBACK_KEY] = entry.fallback_for
        annotations[labels.PRECOMPILED_FALLBACK_IMAGE] = entry.fallback_image

    dtk = entry.strategy is Strategy.DTK
    openshift_version = entry.openshift_version or inputs.openshift_version
    dtk_env: list[tuple[str, str]] = []
    if dtk:
        dtk_env = [
            ("RHCOS_VERSION", str(entry.rhcos_version or entry.key)),
            ("RHCOS_IMAGE_MISSING", "true" if entry.image_missing else "false"),
            ("OPENSHIFT_VERSION", openshift_version),
        ]
    # hostPaths.rootFS: the host's root somewhere else than / (as NVIDIA does, HOST_ROOT says where).
    root_fs = policy.host_paths.root_fs
    host_root_env = [("HOST_ROOT", root_fs)] if root_fs != "/" else []
    # gds / gdrcopy: the driver (and in DTK mode the sidecar's build) includes their modules.
    enabled_modules = [key for key in ("gds", "gdrcopy") if key in inputs.module_images]
    module_env = [(f"{key.upper()}_ENABLED", "true") for key in enabled_modules]
    # driver.rdma: the driver builds nvidia-peermem against MOFED's ib_* interfaces, the manager knows.
    rdma_env: list[tuple[str, str]] = []
    if driver.rdma.enabled:
        rdma_env.append(("GPU_DIRECT_RDMA_ENABLED", "true"))
        if driver.rdma.use_host_mofed:
            rdma_env.append(("USE_HOST_MOFED", "true"))
    driver_env = [
        ("NVIDIA_VISIBLE_DEVICES", "void"),
        *dtk_env,
        *host_root_env,
        *rdma_env,
        *module_env,
        ("KERNEL_MODULE_TYPE", driver.kernel_module_type.value),
        (DIGEST_ENV, digest),
        *(inputs.proxy.env() if inputs.openshift and inputs.proxy else []),
    ]
    pull_policy = driver.image.pull_policy.value
    driver_container = {
        "image": entry.driver_image,
        "pull_policy": pull_policy,
        "args": list(driver.args),
        "env": _env(_merge(driver_env, driver.env)),
        "resources": driver.resources.as_wire(),
        "secret_env": driver.secret_env,
        "startup_probe": _probe(_STARTUP_PROBE, driver.startup_probe),
        "liveness_probe": _probe(_LATER_PROBE, driver.liveness_probe) if driver.liveness_probe else None,
        "readiness_probe": _probe(_LATER_PROBE, driver.readiness_probe) if driver.readiness_probe else None,
        "licensing": _licensing(driver.licensing),
        "virtual_topology": driver.virtual_topology_config_map or None,
        "virtual_topology_file": VIRTUAL_TOPOLOGY_FILE,
        "virtual_topology_path": VIRTUAL_TOPOLOGY_PATH,
        "config_files": _config_files(driver, os_id(entry.os_tag), inputs.config_map_keys),
    }
    sidecar = None
    if dtk:
        # NB: with the tag missing, the sidecar runs the driver image so the pod stays valid;
        # RHCOS_IMAGE_MISSING=true tells both containers there is nothing to build with.
        sidecar = {
            "image": entry.dtk_image or entry.driver_image,
            "env": _env([("NVIDIA_VISIBLE_DEVICES", "void"), *dtk_env, *module_env, (DIGEST_ENV, digest)]),
        }
    manager_env = [(name, value) for name, value in DRIVER_MANAGER_ENV.items()]
    manager = {
        "image": inputs.manager_image,
        "pull_policy": driver.manager.image.pull_policy.value,
        "env": _env(
            _merge(
                [
                    ("NVIDIA_VISIBLE_DEVICES", "void"),
                    *manager_env,
                    *host_root_env,
                    *rdma_env,
                    (DIGEST_ENV, digest),
                ],
                driver.manager.env,
            )
        ),
    }
    return {
        "name": entry.name,
        "labels": identity,
        "annotations": annotations,
        "selector": dict(entry.selector),
        "pod_labels": {**daemonsets.labels, **identity},
        "pod_annotations": {
            **daemonsets.annotations,
            operand_common.DEFAULT_CONTAINER_ANNOTATION: operand_types.DRIVER_CONTAINER,
        },
        "node_selector": {labels.deploy_label("driver"): "true", **entry.node_selector},
        "tolerations": operand_common.tolerations(policy),
        "host_network": driver.host_network,
        "priority_class_name": daemonsets.priority_class_name,
        # the driver's and the k8s-driver-manager's secrets: one pod pulls both images
        "image_pull_secrets": [
            {"name": name}
            for name in dict.fromkeys(
                (
                    *driver.image.pull_secrets,
                    *driver.manager.image.pull_secrets,
                    *(
                        secret
                        for key in enabled_modules
                        for secret in _module(policy, key).image.pull_secrets
                    ),
                )
            )
        ],
        "modules": [
            _module_container(key, _module(policy, key), inputs.module_images[key], entry, dtk)
            for key in enabled_modules
        ],
        "pod_security_context": dict(daemonsets.pod_security_context),
        "rdma": (
            {
                "env": _env([("NVIDIA_VISIBLE_DEVICES", "void"), *rdma_env[1:]]),
                # NB: a host MOFED keeps its sources in /usr/src (ofa_kernel), the Network Operator's in /run
                "ofed_sources": "/usr/src" if driver.rdma.use_host_mofed else "/run/mellanox/drivers/usr/src",
            }
            if driver.rdma.enabled
            else None
        ),
        "host_root": root_fs,
        "anti_affinity": {labels.COMPONENT: labels.DRIVER_COMPONENT},
        "driver": driver_container,
        "dtk": sidecar,
        "manager": manager,
        "trusted_ca": inputs.trusted_ca_configmap if trusted_ca else None,
    }


# GPUDirect Storage and GDRCopy: container name, install command, DTK entrypoint argument, loaded module.
_MODULES: Final[Mapping[str, tuple[str, str, str, str]]] = {
    "gds": ("nvidia-fs-ctr", "nvidia-gds-driver install", "nv-fs-ctr-run-with-dtk", "nvidia_fs"),
    "gdrcopy": ("nvidia-gdrcopy-ctr", "nvidia-gdrcopy-driver install", "gdrcopy-ctr-run-with-dtk", "gdrdrv"),
}


def _module(policy: policy_spec.Policy, key: str) -> policy_spec.ComponentSpec:
    return policy.gds if key == "gds" else policy.gdrcopy


def _module_container(
    key: str, spec: policy_spec.ComponentSpec, image: str, entry: DesiredDriverDaemonSet, dtk: bool
) -> dict[str, Any]:
    """nvidia-fs-ctr / nvidia-gdrcopy-ctr: builds and loads its module once the driver is in."""
    name, install, dtk_arg, module = _MODULES[key]
    try:
        # NVIDIA publishes these per OS like the driver (<version>-<os>)
        tagged = images.driver_image_for(images.ImageRef(image), entry.os_tag)
    except ValueError:
        tagged = images.ImageRef(image)
    wait = (
        "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep -q '^nvidia '; "
        "do echo waiting for the driver; sleep 10; done"
    )
    return {
        "name": name,
        "image": tagged,
        "pull_policy": spec.image.pull_policy.value,
        # in DTK mode the sidecar builds it (GDS_ENABLED/GDRCOPY_ENABLED); this container loads it
        "command": ["ocp_dtk_entrypoint"] if dtk else ["bash", "-xc"],
        "args": [dtk_arg] if dtk else [f"{wait}; exec {install}"],
        "env": _env([("NVIDIA_VISIBLE_DEVICES", "void"), *((e.name, e.value) for e in spec.env)]),
        "probe": f"lsmod | grep -q '^{module} '",
        "dtk": dtk,
    }


def _probe(defaults: Mapping[str, int], timing: policy_spec.ProbeTiming) -> dict[str, int]:
    """Our probe timings with the policy's laid over them (0 or unset keeps ours, as NVIDIA does)."""
    given = {
        "initialDelaySeconds": timing.initial_delay_seconds,
        "periodSeconds": timing.period_seconds,
        "timeoutSeconds": timing.timeout_seconds,
        "successThreshold": timing.success_threshold,
        "failureThreshold": timing.failure_threshold,
    }
    return {name: given[name] or value for name, value in defaults.items()}


def _config_files(
    driver: policy_spec.DriverSpec, os: str, keys: Mapping[str, tuple[str, ...]]
) -> list[dict[str, Any]]:
    """One volume per named ConfigMap, each key mounted as one file (subPath keeps the image's others)."""
    found = []
    for volume, field, name in (
        ("repo-config", "spec.driver.repoConfig.configMapName", driver.repo_config_map),
        ("cert-config", "spec.driver.certConfig.name", driver.cert_config_map),
        ("kernel-module-config", "spec.driver.kernelModuleConfig.name", driver.kernel_module_config_map),
    ):
        directory = config_dir(field, os)
        if not name or directory is None or not keys.get(name):
            # unset, or refused before rendering (driver_manifests.config_map_problem)
            continue
        found.append(
            {
                "volume": volume,
                "config_map": name,
                "files": [{"key": key, "path": key} for key in keys[name]],
                "mounts": [{"path": f"{directory}/{key}", "key": key} for key in keys[name]],
            }
        )
    return found


def _licensing(licensing: policy_spec.LicensingConfig) -> dict[str, Any] | None:
    """The licensing volume: gridd.conf, and the NLS client token when nlsEnabled; None when unset."""
    if not (licensing.secret_name or licensing.config_map_name):
        return None
    files = [(LICENSING_FILE, LICENSING_PATH)]
    if licensing.nls_enabled:
        files.append((NLS_TOKEN_FILE, NLS_TOKEN_PATH))
    items = [{"key": name, "path": name} for name, _ in files]
    # NB: secretName wins over the deprecated configMapName, as in NVIDIA's operator.
    source = (
        {"secret": {"secretName": licensing.secret_name, "items": items}}
        if licensing.secret_name
        else {"configMap": {"name": licensing.config_map_name, "items": items}}
    )
    return {"source": source, "mounts": [{"file": name, "path": path} for name, path in files]}


def _merge(
    defaults: Sequence[tuple[str, str]], overrides: Sequence[policy_spec.EnvVar]
) -> list[tuple[str, str]]:
    """Defaults in order, each replaced by a policy entry of the same name; new names appended.

    Names the operator owns (`_OWNED_ENV`) keep the operator's value.
    """
    merged = dict(defaults)
    for item in overrides:
        if item.name in _OWNED_ENV:
            # the policy cannot move a pod to another RHCOS build or fake the digest
            continue
        merged[item.name] = item.value
    return list(merged.items())


def _env(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]
