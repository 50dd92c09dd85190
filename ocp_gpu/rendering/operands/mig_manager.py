"""The mig-manager operand's own context: its mig-parted config, GPU clients, env and RBAC names.

NVIDIA's MIG manager (nvidia-mig-manager, on nodes labelled
`nvidia.com/gpu.deploy.mig-manager=true`: the MIG-capable ones) watches its node's
`nvidia.com/mig.config` label and applies that config from the mig-parted file
`CONFIG_FILE`: the admin's ConfigMap `migManager.config.name`, else ours,
`default-mig-parted-config` (model/mig.default_configs).  While it repartitions it
pauses the GPU clients (the deploy labels of the device plugin, GFD, DCGM exporter
and DCGM become `paused-for-mig-change`) and the host services listed in the GPU
clients file (`migManager.gpuClientsConfig.name`, else ours, `default-gpu-clients`),
then reports in `nvidia.com/mig.config.state`.  Env as NVIDIA's v24.6 DaemonSet:
CONFIG_FILE, GPU_CLIENTS_FILE, DEFAULT_GPU_CLIENTS_NAMESPACE (the pod's namespace),
NODE_NAME, and WITH_REBOOT=false (the policy's env may change it).  The container
waits for the driver validation's marker and reads it (IS_HOST_DRIVER decides
WITH_SHUTDOWN_HOST_GPU_CLIENTS), as NVIDIA's entrypoint does.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from ocp_gpu.model import mig_catalog, operand_types
from ocp_gpu.model.policy import api_values, policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "mig-manager",
    "migManager",
    "nvidia-mig-manager",
    reads=("hostPaths",),
    images=("migManager", "validator"),
    deploy_on=operand_types.DeployOn.MIG_CAPABLE,
    kinds=(*operand_types.BASE_KINDS, "ConfigMap", "Role", *operand_types.CLUSTER_RBAC),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-mig-manager",
    service_account="nvidia-mig-manager",
    container="nvidia-mig-manager",
    owned_env=frozenset({"CONFIG_FILE", "GPU_CLIENTS_FILE", "DEFAULT_GPU_CLIENTS_NAMESPACE", "NODE_NAME"}),
    gpu_container="nvidia-mig-manager",
)
# NVIDIA's names for the ConfigMaps the operator creates when the policy names none.
CONFIG_MAP: Final = "default-mig-parted-config"
GPU_CLIENTS_CONFIG_MAP: Final = "default-gpu-clients"
GPU_CLIENTS_KEY: Final = "clients.yaml"
# Where the container finds them.
CONFIG_DIR: Final = "/mig-parted-config"
GPU_CLIENTS_DIR: Final = "/gpu-clients"
# Cluster-scoped: it labels its node and lists the GPU client pods on it.
CLUSTER_ROLE: Final = "ocp-gpu-nvidia-mig-manager"
# Host services that hold GPUs and are stopped across a MIG change (when the driver is on the host).
HOST_GPU_CLIENTS: Final = (
    "nvsm.service",
    "nvsm-mqtt.service",
    "nvsm-core.service",
    "nvsm-api-gateway.service",
    "nvsm-notifier.service",
    "nv_peer_mem.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
)
# Wait for the driver, read what its validation found, run the manager (NVIDIA's entrypoint).
ENTRYPOINT: Final = (
    f"until [ -f {operand_common.VALIDATIONS_DIR}/driver-ready ]; do echo waiting for the driver "
    f"validation; sleep 5;"
    f" done; set -o allexport; . {operand_common.VALIDATIONS_DIR}/driver-ready;"
    " export WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER; exec nvidia-mig-manager"
)


def named_config_maps(policy: policy_spec.Policy) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's ConfigMaps the DaemonSet mounts (field -> name) and the key it reads from each.

    CONFIG_FILE and GPU_CLIENTS_FILE (owned env: the policy cannot move them) name these keys.
    """
    manager = policy.mig_manager
    named = {
        "spec.migManager.config.name": str(manager.config_name),
        "spec.migManager.gpuClientsConfig.name": str(manager.gpu_clients_config_name),
    }
    required = {
        "spec.migManager.config.name": mig_catalog.CONFIG_KEY,
        "spec.migManager.gpuClientsConfig.name": GPU_CLIENTS_KEY,
    }
    return {field: name for field, name in named.items() if name}, required


def config_text() -> str:
    """Our mig-parted config file (ConfigMap default-mig-parted-config, key config.yaml)."""
    return yaml.safe_dump(mig_catalog.default_configs(), sort_keys=False)


def gpu_clients_text() -> str:
    """Our GPU clients file (ConfigMap default-gpu-clients, key clients.yaml)."""
    return yaml.safe_dump({"version": "v1", "systemd-services": list(HOST_GPU_CLIENTS)}, sort_keys=False)


def shared_host_namespaces(policy: policy_spec.Policy) -> dict[str, str | None]:
    """hostIPC, always (its template)."""
    return {api_values.IPC: None}


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    manager = policy.mig_manager
    return {
        # NB: NVIDIA ships WITH_REBOOT=false in its Helm values; the policy's env may turn it on.
        "default_env": {
            "WITH_REBOOT": "false",
            "CONFIG_FILE": f"{CONFIG_DIR}/{mig_catalog.CONFIG_KEY}",
            "GPU_CLIENTS_FILE": f"{GPU_CLIENTS_DIR}/{GPU_CLIENTS_KEY}",
            # mig-parted regenerates the CDI spec after a MIG change (NVIDIA's TransformMIGManager).
            **operand_common.cdi_env(policy, reads_cdi_enabled=True),
        },
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
        "entrypoint": ENTRYPOINT,
        "cluster_role": CLUSTER_ROLE,
        # Ours only when the policy names none; the DaemonSet mounts whichever applies.
        "config_map": CONFIG_MAP if not manager.config_name else "",
        "config_data": {mig_catalog.CONFIG_KEY: config_text()},
        "mounted_config_map": manager.config_name or CONFIG_MAP,
        "config_dir": CONFIG_DIR,
        "gpu_clients_config_map": GPU_CLIENTS_CONFIG_MAP if not manager.gpu_clients_config_name else "",
        "gpu_clients_data": {GPU_CLIENTS_KEY: gpu_clients_text()},
        "mounted_gpu_clients_config_map": manager.gpu_clients_config_name or GPU_CLIENTS_CONFIG_MAP,
        "gpu_clients_dir": GPU_CLIENTS_DIR,
        "driver_root": policy.host_paths.driver_install_dir,
        "host_root": policy.host_paths.root_fs,
    }


RENDERING: Final = operand_common.OwnRendering(
    IDENTITY,
    extra_context,
    named_config_maps=named_config_maps,
    shared_host_namespaces=shared_host_namespaces,
)
