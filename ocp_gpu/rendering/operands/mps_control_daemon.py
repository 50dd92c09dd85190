"""The MPS control daemon operand's own context: NVIDIA's `nvidia-device-plugin-mps-control-daemon`.

On a node whose device plugin config shares GPUs with MPS (`sharing.mps`), GFD labels the
node `nvidia.com/mps.capable=true`; this DaemonSet selects on that and the device plugin's
deploy label (NVIDIA's assets/state-mps-control-daemon at v26.7.0).  It runs the device
plugin image's `mps-control-daemon`, which starts one MPS control daemon per shared
resource under `devicePlugin.mps.root` (host; /mps in the pod, shared memory at
<root>/shm), and the plugin hands those pipes to the pods it allocates.  It reads the same
plugin config as the plugin: the config-manager picks the node's (init container, then a
sidecar that restarts the daemon with SIGHUP on a change).  Like NVIDIA's, it takes the
device plugin's image, pull settings and resources, not its env or args.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import device_plugin, operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
# NB: the device plugin's section (its enabled, image, pull settings, resources, hostNetwork) and
# deploy label; the operator sets no label of its own for it (not in operand_catalog.DEPLOY_LABELS).
OPERAND: Final = operand_types.Operand(
    "mps-control-daemon",
    "devicePlugin",
    "nvidia-device-plugin-mps-control-daemon",
    images=("devicePlugin", "validator"),
    deploy_on=operand_types.DeployOn.ANOTHER_OPERANDS,
    kinds=(*operand_types.BASE_KINDS, *operand_types.CLUSTER_RBAC),
    deploy_as=device_plugin.OPERAND.name,
    node_selector_extra=((labels.MPS_CAPABLE, "true"),),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-device-plugin-mps-control-daemon",
    service_account="nvidia-device-plugin-mps-control-daemon",
    container="mps-control-daemon-ctr",
    owned_env=frozenset({"CONFIG_FILE", "NODE_NAME"}),
    gpu_container="mps-control-daemon-ctr",
    section_env=False,
)
# The cluster-scoped read of nodes its config-manager needs (its node's config label).
CLUSTER_ROLE: Final = "ocp-gpu-nvidia-device-plugin-mps-control-daemon"
# Where the daemon keeps its pipes and logs in the pod (the plugin's mps.ContainerRoot).
CONTAINER_ROOT: Final = "/mps"


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    plugin = policy.device_plugin
    own_config = not plugin.config_name
    return {
        "default_env": {
            "CONFIG_FILE": device_plugin.CONFIG_FILE,
            "MIG_STRATEGY": plugin.mig_strategy.value,
            # Read by the NVIDIA runtime: every GPU, for compute (NVIDIA's asset).
            "NVIDIA_VISIBLE_DEVICES": "all",
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            # As NVIDIA's applyMIGConfiguration: with MIG, the runtime also hands it MIG monitoring.
            **(
                {"NVIDIA_MIG_MONITOR_DEVICES": "all"}
                if plugin.mig_strategy is not policy_spec.MigStrategy.NONE
                else {}
            ),
        },
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
        "mounted_config_map": plugin.config_name or device_plugin.CONFIG_MAP,
        "default_config": plugin.config_default if not own_config else device_plugin.DEFAULT_CONFIG_KEY,
        "config_label": device_plugin.CONFIG_LABEL,
        "configs_dir": device_plugin.CONFIGS_DIR,
        "config_file": device_plugin.CONFIG_FILE,
        "config_dir": device_plugin.CONFIG_FILE.rsplit("/", 1)[0],
        "cluster_role": CLUSTER_ROLE,
        "mps_root": plugin.mps_root,
        "mps_shm": f"{plugin.mps_root.rstrip('/')}/shm",
        "container_root": CONTAINER_ROOT,
        # A new config of ours restarts the daemons, as it restarts the plugin.
        "pod_annotations": (
            {device_plugin.CONFIG_DIGEST_ANNOTATION: device_plugin.config_digest(policy)}
            if own_config
            else {}
        ),
    }


RENDERING: Final = operand_common.OwnRendering(
    IDENTITY, extra_context, named_config_maps=device_plugin.named_config_maps
)
