"""The container-toolkit operand's own context: runtime paths, install dir, the driver marker wait.

The common context (DaemonSet identity, tolerations, image, env, ...) comes from
rendering/operands/operand_rendering.py; this module adds what only the toolkit's templates
(templates/state-container-toolkit) use.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_spec import ContainerRuntime
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "container-toolkit",
    "toolkit",
    "nvidia-container-toolkit-daemonset",
    images=("toolkit", "validator"),
    kinds=operand_types.BASE_KINDS,
)
DAEMONSET: Final = OPERAND.daemonset
APP: Final = OPERAND.app
IDENTITY: Final = operand_common.Identity(
    component="nvidia-container-toolkit",
    service_account="nvidia-container-toolkit",
    container="nvidia-container-toolkit-ctr",
    owned_env=frozenset({"RUNTIME", "RUNTIME_CONFIG", "RUNTIME_SOCKET", "ROOT", "NRI_SOCKET"}),
)
# The driver validation's marker (DESIGN §4): the runtime is configured once a driver is loaded.
DRIVER_READY_MARKER: Final = "driver-ready"

# cri-o's OCI hooks directory: the installer's default (--hooks-dir) and where OpenShift's
# cri-o reads hooks (NVIDIA mounts it there on OpenShift).
CRIO_HOOKS_DIR: Final = "/usr/share/containers/oci/hooks.d"
OPENSHIFT_CRIO_HOOKS_DIR: Final = "/run/containers/oci/hooks.d"
# The runtime's NRI socket on the host, and where the installer finds it (NVIDIA's defaults).
NRI_SOCKET_DIR: Final = "/var/run/nri"
NRI_SOCKET_FILE: Final = "nri.sock"
NRI_SOCKET_MOUNT: Final = "/runtime/nri-sock-dir"
# Where each runtime keeps its configuration and socket on the host (mounted at /runtime/...).
RUNTIME_PATHS: Final = {
    ContainerRuntime.CONTAINERD: ("/etc/containerd", "/run/containerd", "config.toml", "containerd.sock"),
    ContainerRuntime.CRIO: ("/etc/crio/crio.conf.d", "/var/run/crio", "99-nvidia.conf", "crio.sock"),
    ContainerRuntime.DOCKER: ("/etc/docker", "/var/run", "daemon.json", "docker.sock"),
}


def cdi_env(policy: policy_spec.Policy, runtime: ContainerRuntime) -> dict[str, str]:
    """The installer's CDI settings, as NVIDIA's TransformToolkit sets them (each read by
    NVIDIA/nvidia-container-toolkit@v1.20.0 cmd/nvidia-ctk-installer: model/image_contracts.py).

    CDI on: the installer generates the management CDI spec (CDI_ENABLED) under /var/run/cdi,
    the `nvidia` runtime runs in CDI mode and is not the default, and on cri-o it is added as
    a runtime handler (CRIO_CONFIG_MODE=config); with the NRI plugin it also starts that.
    CDI off on cri-o: the OCI prestart hook instead (CRIO_CONFIG_MODE=hook), NVIDIA's choice,
    since config mode would make `nvidia` cri-o's default runtime.  An entry of toolkit.env
    overrides any of these (NVIDIA's documented escape hatch).
    """
    if policy.cdi.enabled:
        env = {
            "CDI_ENABLED": "true",
            "NVIDIA_CONTAINER_RUNTIME_MODE": "cdi",
            "CRIO_CONFIG_MODE": "config",
        }
        if policy.cdi.nri_plugin_enabled:
            env["ENABLE_NRI_PLUGIN"] = "true"
        return env
    if runtime is ContainerRuntime.CRIO:
        return {"CRIO_CONFIG_MODE": "hook"}
    return {}


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    toolkit = policy.toolkit
    runtime = policy_spec.container_runtime(policy.operator.default_runtime, inputs.openshift)
    config_dir, socket_dir, config_file, socket_file = RUNTIME_PATHS[runtime]
    nri = policy.cdi.nri_plugin_enabled
    env = {
        "RUNTIME": runtime.value,
        "ROOT": toolkit.install_dir,
        # Where the driver is on the host (policy_spec.driver_root: hostPaths.driverInstallDir).
        "NVIDIA_DRIVER_ROOT": policy_spec.driver_root(
            policy.driver.enabled, policy.host_paths.driver_install_dir
        ),
        "NVIDIA_RUNTIME_SET_AS_DEFAULT": "false",
        # The kind of the management CDI spec the `nvidia` runtime injects (NVIDIA's asset).
        "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND": "management.nvidia.com/gpu",
        **cdi_env(policy, runtime),
    }
    if nri:
        # NB: NVIDIA's transformForRuntime: in NRI mode the installer configures no runtime (its
        # no-op configurer), so neither the runtime's config nor its socket is mounted.
        env["NRI_SOCKET"] = f"{NRI_SOCKET_MOUNT}/{NRI_SOCKET_FILE}"
    else:
        env["RUNTIME_CONFIG"] = f"/runtime/config-dir/{config_file}"
        env["RUNTIME_SOCKET"] = f"/runtime/sock-dir/{socket_file}"
        if runtime is ContainerRuntime.CONTAINERD:
            # NB: the installer's name for it (NVIDIA_RUNTIME_NAME's alias, NVIDIA's operator sets
            # this one): NVIDIA/nvidia-container-toolkit@v1.20.0 cmd/nvidia-ctk-installer/container/
            # runtime/runtime.go.  No program reads RUNTIME_CLASS (model/image_contracts.py).
            env["CONTAINERD_RUNTIME_CLASS"] = policy.operator.runtime_class
    return {
        "default_env": env,
        "wait_for_driver": operand_common.marker_wait(DRIVER_READY_MARKER, "the driver validation"),
        "install_dir": toolkit.install_dir,
        "runtime_config_dir": None if nri else config_dir,
        "runtime_socket_dir": None if nri else socket_dir,
        "cdi_spec_dir": operand_common.CDI_SPEC_DIR,
        # cri-o's OCI hooks directory (the hook mode's): OpenShift's, else cri-o's default.
        "crio_hooks_dir": (OPENSHIFT_CRIO_HOOKS_DIR if inputs.openshift else CRIO_HOOKS_DIR)
        if runtime is ContainerRuntime.CRIO and not nri
        else None,
        "crio_hooks_mount": CRIO_HOOKS_DIR,
        "nri_socket_dir": NRI_SOCKET_DIR if nri else None,
        "nri_socket_mount": NRI_SOCKET_MOUNT,
        # A driver installed elsewhere (hostPaths.driverInstallDir), mounted at the same path.
        "driver_install_dir": policy_spec.elsewhere(policy.host_paths.driver_install_dir),
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
