"""The gpu-feature-discovery operand's own context: the toolkit marker wait and NFD's features dir.

GFD labels each GPU node (`nvidia.com/gpu.product`, `.count`, `.memory`,
`nvidia.com/cuda.driver.*`) through NFD's local feature files; it starts once the
toolkit validation's marker exists on its node.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "gpu-feature-discovery",
    "gfd",
    "gpu-feature-discovery",
    reads=("devicePlugin",),
    images=("gfd", "validator"),
    kinds=operand_types.BASE_KINDS,
    nvidia_selector_extra=((labels.PART_OF, "nvidia-gpu"),),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="gpu-feature-discovery",
    service_account="nvidia-gpu-feature-discovery",
    container="gpu-feature-discovery",
    owned_env=frozenset({"GFD_SLEEP_INTERVAL", "GFD_OUTPUT_FILE", "NODE_NAME"}),
    gpu_container="gpu-feature-discovery",
)
# Where NFD's worker reads feature files (hostPath), and GFD's file in it.
FEATURES_DIR: Final = "/etc/kubernetes/node-feature-discovery/features.d"


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    return {
        "default_env": {
            "GFD_SLEEP_INTERVAL": "60s",
            "GFD_OUTPUT_FILE": f"{FEATURES_DIR}/gfd",
            "MIG_STRATEGY": policy.device_plugin.mig_strategy.value,
            "GFD_FAIL_ON_INIT_ERROR": "true",
        },
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
        "features_dir": FEATURES_DIR,
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
