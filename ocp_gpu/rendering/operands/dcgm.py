"""The dcgm operand's own context: the standalone DCGM hostengine's port and network.

nv-hostengine serves DCGM on `dcgm.hostPort` (5555) of its node; the DCGM exporter on the
same node reads it there (rendering/operands/dcgm_exporter.py).  It starts once the toolkit
validation's marker exists on its node.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "dcgm",
    "dcgm",
    "nvidia-dcgm",
    images=("dcgm", "validator"),
    kinds=operand_types.BASE_KINDS,
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-dcgm",
    service_account="nvidia-dcgm",
    container="nvidia-dcgm-ctr",
    gpu_container="nvidia-dcgm-ctr",
)


def hostengine_args(port: int) -> list[str]:
    """nv-hostengine in the foreground (-n), on every address (-b ALL), on `port`."""
    return ["-n", "-b", "ALL", "-p", str(port), "--log-level", "NONE", "-f", "-"]


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    return {
        "host_port": policy.dcgm.host_port,
        "hostengine_args": hostengine_args(policy.dcgm.host_port),
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)
