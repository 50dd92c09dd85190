"""Which GPU stack a node runs: containers, or virtual machines by passthrough or vGPU.

Decides, from one node's labels and the ClusterPolicy's `sandboxWorkloads`, the node's
workload (NVIDIA's `nvidia.com/gpu.workload.config`: `container`, `vm-passthrough`,
`vm-vgpu`; NVIDIA/gpu-operator v26.7.0 controllers/state_manager.go, getWorkloadConfig),
or the problem that keeps the node where it is.  The rules:

- `sandboxWorkloads.enabled` false: every GPU node runs containers, as NVIDIA's.  A node
  labelled for a VM workload is named back (label and fix) and keeps the container stack.
- enabled: the node's label, or `sandboxWorkloads.defaultWorkload` on a node without one.
- A label value that is none of the three: NVIDIA falls back to the default workload; we
  keep the node's deploy labels as they are (nothing running there is taken away) and name
  the label and the fix.

`stack_of` reads which stack a node's deploy labels show (what runs there now), so a move
from one to the other (planning/operands/node_labels.py) can be seen and held.

It never reads or writes a Node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_spec

# The node label an admin sets to choose the node's workload (NVIDIA's key).
WORKLOAD_LABEL: Final = labels.GPU_WORKLOAD_CONFIG
# NVIDIA's workload values, as the label holds them.
Workload = policy_spec.GpuWorkload

VM_WORKLOADS: Final = frozenset({Workload.VM_PASSTHROUGH, Workload.VM_VGPU})

SandboxSettings = policy_spec.SandboxWorkloadsSpec


@dataclasses.dataclass(frozen=True)
class WorkloadChoice:
    """A node's workload, or None (its deploy labels stay as they are) with the reason."""

    workload: Workload | None
    # What is wrong with the node's label, and how to fix it; None when nothing is.
    problem: str | None = None
    fix: str = ""


def parse_workload(value: str) -> Workload | None:
    """The workload a label value names, None for any other value."""
    try:
        return Workload(value)
    except ValueError:
        return None


def select_workload(
    node_name: str, node_labels: Mapping[str, str], sandbox: SandboxSettings
) -> WorkloadChoice:
    """The workload of one GPU node (module docstring)."""
    value = node_labels.get(WORKLOAD_LABEL)
    labelled = parse_workload(value) if value is not None else None
    if value is not None and labelled is None:
        # A value NVIDIA does not know: keep what runs there, say how to fix the label.
        return WorkloadChoice(
            None,
            f"node {node_name} is labelled {WORKLOAD_LABEL}={value!r}, which is none of "
            f"{', '.join(w.value for w in Workload)}: its GPU operands are left as they are",
            "set the label to one of them or remove it",
        )
    if not sandbox.enabled:
        if labelled in VM_WORKLOADS:
            # NVIDIA ignores the label while sandbox workloads are off; so do we, but say so.
            return WorkloadChoice(
                Workload.CONTAINER,
                f"node {node_name} is labelled {WORKLOAD_LABEL}={value} but "
                f"spec.sandboxWorkloads.enabled is false: it runs the container stack",
                "set spec.sandboxWorkloads.enabled=true or remove the label",
            )
        return WorkloadChoice(Workload.CONTAINER)
    # The label, or the policy's default workload on a node without one.
    return WorkloadChoice(sandbox.default_workload if labelled is None else labelled)


def stack_of(node_labels: Mapping[str, str], vm_labels: Mapping[Workload, tuple[str, ...]]) -> Workload:
    """The workload whose deploy labels the node carries now ("true"), container when none of the
    VM stacks' (`vm_labels`: each VM workload's deploy labels)."""
    for workload, keys in vm_labels.items():
        # NB: the labels shared by both VM stacks (sandbox device plugin, validator) do not tell
        # passthrough from vGPU: the first stack whose own labels are all there wins.
        own = [
            key for key in keys if all(key not in other for w, other in vm_labels.items() if w != workload)
        ]
        if own and any(node_labels.get(key) == "true" for key in own):
            return workload
    return Workload.CONTAINER
