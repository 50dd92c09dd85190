"""The gpu-feature-discovery operand's own context: the marker wait, NFD's features dir, the plugin config.

GFD labels each GPU node (`nvidia.com/gpu.product`, `.count`, `.memory`,
`nvidia.com/cuda.driver.*`) through NFD's local feature files; it starts once the
toolkit validation's marker exists on its node.  With the device plugin on it reads the
node's plugin config as the plugin does, and labels how the GPUs are shared
(`nvidia.com/gpu.replicas`, `.sharing-strategy`, `nvidia.com/mps.capable`, which places
the MPS control daemon).  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import device_plugin, operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "gpu-feature-discovery",
    "gfd",
    "gpu-feature-discovery",
    reads=("devicePlugin",),
    images=("gfd", "validator"),
    # Its ClusterRole and binding: its config-manager reads its node's config label.
    kinds=(*operand_types.BASE_KINDS, *operand_types.CLUSTER_RBAC),
    nvidia_selector_extra=((labels.PART_OF, "nvidia-gpu"),),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="gpu-feature-discovery",
    service_account="nvidia-gpu-feature-discovery",
    container="gpu-feature-discovery",
    owned_env=frozenset({"GFD_SLEEP_INTERVAL", "GFD_OUTPUT_FILE", "NODE_NAME", "CONFIG_FILE"}),
    gpu_container="gpu-feature-discovery",
)
# Where NFD's worker reads feature files (hostPath), and GFD's file in it.
FEATURES_DIR: Final = "/etc/kubernetes/node-feature-discovery/features.d"


# The cluster-scoped read of nodes its config-manager needs (its node's config label).
CLUSTER_ROLE: Final = "ocp-gpu-gpu-feature-discovery"


def named_config_maps(policy: policy_spec.Policy) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's plugin ConfigMap GFD mounts too (with the device plugin on), as the plugin's."""
    return device_plugin.named_config_maps(policy) if policy.device_plugin.enabled else ({}, {})


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    plugin = policy.device_plugin
    # NB: GFD labels sharing (gpu.replicas, gpu.sharing-strategy, mps.capable, a -SHARED
    # product) only from the plugin's config; NVIDIA's operator mounts it only from an admin's
    # ConfigMap (devicePlugin.config.name), ocp-gpu from ours (resourceConfig) too.
    plugin_config = plugin.enabled
    own_config = not plugin.config_name
    env = {
        "GFD_SLEEP_INTERVAL": "60s",
        "GFD_OUTPUT_FILE": f"{FEATURES_DIR}/gfd",
        "MIG_STRATEGY": plugin.mig_strategy.value,
        "GFD_FAIL_ON_INIT_ERROR": "true",
    }
    if plugin_config:
        env["CONFIG_FILE"] = device_plugin.CONFIG_FILE
    return {
        "default_env": env,
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
        "features_dir": FEATURES_DIR,
        "plugin_config": plugin_config,
        "mounted_config_map": plugin.config_name or device_plugin.CONFIG_MAP,
        "default_config": plugin.config_default if not own_config else device_plugin.DEFAULT_CONFIG_KEY,
        "config_label": device_plugin.CONFIG_LABEL,
        "configs_dir": device_plugin.CONFIGS_DIR,
        "config_file": device_plugin.CONFIG_FILE,
        "config_dir": device_plugin.CONFIG_FILE.rsplit("/", 1)[0],
        "cluster_role": CLUSTER_ROLE,
        "pod_annotations": (
            {device_plugin.CONFIG_DIGEST_ANNOTATION: device_plugin.config_digest(policy)}
            if plugin_config and own_config
            else {}
        ),
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context, named_config_maps=named_config_maps)
