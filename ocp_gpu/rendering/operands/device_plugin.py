"""The device-plugin operand's own context: every seed-002 option, its config ConfigMap, the marker wait.

The plugin's options reach it twice, as NVIDIA's plugin reads them: as its config file
(planning/plugin_config.render_plugin_config: flags and time-slicing from
`resourceConfig`), in the ConfigMap `nvidia-device-plugin-config` under the key
`default`, and as env (MIG_STRATEGY, FAIL_ON_INIT_ERROR, ...) for the flags.  A
`config-manager` sidecar picks the config of each node: the key named by the node's
`nvidia.com/device-plugin.config` label, else the default (`devicePlugin.config.default`
with an admin's ConfigMap `devicePlugin.config.name`, else `default` in ours).
`compatWithCPUManager` passes device specs and runs the plugin privileged.  The pod
template carries a digest of our config, so a changed config restarts the plugin pods.
Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import yaml

from ocp_gpu.model import operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common, plugin_config

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "device-plugin",
    "devicePlugin",
    "nvidia-device-plugin-daemonset",
    images=("devicePlugin", "validator"),
    kinds=(*operand_types.BASE_KINDS, "ConfigMap", *operand_types.CLUSTER_RBAC),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-device-plugin",
    service_account="nvidia-device-plugin",
    container="nvidia-device-plugin",
    owned_env=frozenset({"CONFIG_FILE", "NODE_NAME", "PASS_DEVICE_SPECS"}),
    gpu_container="nvidia-device-plugin",
)
# The ConfigMap the operator renders from the policy, and its one key.
CONFIG_MAP: Final = "nvidia-device-plugin-config"
DEFAULT_CONFIG_KEY: Final = "default"
# The node label choosing a node's config (NVIDIA's name).
CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
# Where the config-manager finds every config, and where it puts the node's one.
CONFIGS_DIR: Final = "/available-configs"
CONFIG_FILE: Final = "/config/config.yaml"
# Pod template annotation: a digest of our config, so a new config rolls the pods.
CONFIG_DIGEST_ANNOTATION: Final = "ocp-gpu.io/plugin-config-digest"
# The prefix of the CDI annotations the plugin sets for the runtime (NVIDIA's value).
CDI_ANNOTATION_PREFIX: Final = "cdi.k8s.io/"
# The cluster-scoped read of nodes the config-manager needs (its node's label).
CLUSTER_ROLE: Final = "ocp-gpu-nvidia-device-plugin"


def named_config_maps(policy: policy_spec.Policy) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's ConfigMap the DaemonSet mounts (field -> name) and the key it must hold.

    NB: the config-manager falls back to `config.default` on every unlabelled node, so that
    key must exist (validate_policy requires a default with a name); a key only a node label
    names is that node's affair, and not checked.
    """
    plugin = policy.device_plugin
    if not plugin.config_name:
        return {}, {}
    field = "spec.devicePlugin.config.name"
    return {field: str(plugin.config_name)}, ({field: plugin.config_default} if plugin.config_default else {})


def config_text(policy: policy_spec.Policy) -> str:
    """The plugin's config file as YAML text (what our ConfigMap holds under `default`)."""
    return yaml.safe_dump(plugin_config.render_plugin_config(policy.device_plugin), sort_keys=True)


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    plugin = policy.device_plugin
    text = config_text(policy)
    own_config = not plugin.config_name
    return {
        "default_env": {
            "MIG_STRATEGY": plugin.mig_strategy.value,
            "FAIL_ON_INIT_ERROR": json.dumps(plugin.fail_on_init_error),
            "DEVICE_LIST_STRATEGY": ",".join(strategy.value for strategy in plugin.device_list_strategies),
            "DEVICE_ID_STRATEGY": plugin.device_id_strategy.value,
            "NVIDIA_DRIVER_ROOT": plugin.nvidia_driver_root,
            "PASS_DEVICE_SPECS": json.dumps(plugin.compat_with_cpu_manager),
            "CONFIG_FILE": CONFIG_FILE,
            # Where the MPS control daemon's pipes are (the plugin hands them to MPS clients);
            # NB: MPS sharing fails to start without it, so NVIDIA sets it always.
            "MPS_ROOT": plugin.mps_root,
            **operand_common.cdi_env(policy, reads_cdi_enabled=False),
            # The annotation prefix of the cdi-annotations strategy (NVIDIA's value).
            **({"CDI_ANNOTATION_PREFIX": CDI_ANNOTATION_PREFIX} if policy.cdi.enabled else {}),
        },
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
        "privileged": plugin.compat_with_cpu_manager,
        # NB: volume-mounts hands devices to the runtime as mounts under this path.
        "volume_mounts_strategy": policy_spec.DeviceListStrategy.VOLUME_MOUNTS
        in plugin.device_list_strategies,
        # The plugin writes its own CDI spec there with the cdi-cri strategy.
        "cdi_spec_dir": operand_common.CDI_SPEC_DIR,
        "mps_root": plugin.mps_root,
        "mps_shm": f"{plugin.mps_root.rstrip('/')}/shm",
        "driver_root": plugin.nvidia_driver_root,
        # A driver installed elsewhere (hostPaths.driverInstallDir, the plugin's default root),
        # mounted at the same path.
        "driver_install_dir": policy_spec.elsewhere(policy.host_paths.driver_install_dir),
        "config_map": CONFIG_MAP,
        "config_data": {DEFAULT_CONFIG_KEY: text},
        "mounted_config_map": plugin.config_name or CONFIG_MAP,
        "default_config": plugin.config_default if not own_config else DEFAULT_CONFIG_KEY,
        "config_label": CONFIG_LABEL,
        "configs_dir": CONFIGS_DIR,
        "config_file": CONFIG_FILE,
        "config_dir": CONFIG_FILE.rsplit("/", 1)[0],
        "cluster_role": CLUSTER_ROLE,
        "pod_annotations": {CONFIG_DIGEST_ANNOTATION: _digest(text)} if own_config else {},
    }


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_digest(policy: policy_spec.Policy) -> str:
    """The digest of our config (the pod annotation that rolls the pods reading it)."""
    return _digest(config_text(policy))


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context, named_config_maps=named_config_maps)
