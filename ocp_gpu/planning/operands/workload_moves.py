"""When a GPU node may leave the container stack for a VM stack, and what must happen first.

Decides, for one node whose workload (planning/operands/workloads.py) is a VM one while its
deploy labels still show the container stack: move now (no GPU pod runs there), hold (GPU pods
run there and the upgrade policy does not let the operator drain: the admin is told which pods
and the fix), or drain first as the driver upgrade does (`driver.upgradePolicy.drain.enable`:
cordon the node, evict the GPU pods `drain.force`/`drain.deleteEmptyDir` allow, move once none
is left, then lift the cordon).  The operator's cordon is recorded on the node
(`MOVE_CORDON`), so an admin's cordon is never lifted by a move.  A move back to containers, or
between the VM stacks, is never held: no container GPU pod can run on a VM node.

It never reads or writes a Node or a pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

from ocp_gpu.model import labels
from ocp_gpu.model.policy.policy_spec import GpuWorkload, UpgradePolicy
from ocp_gpu.model.upgrade_observations import WorkloadPod
from ocp_gpu.planning.upgrades import pod_selection

# The node annotation recording that the operator cordoned the node to move it (its value: the
# workload it moves to); the cordon is lifted once the move is done or called off.
MOVE_CORDON: Final = labels.WORKLOAD_MOVE_CORDON
# How many pods a message names before "+N more".
PODS_NAMED: Final = 5


@dataclasses.dataclass(frozen=True)
class MoveStep:
    """This pass's step of one node's move."""

    # The workload whose deploy labels the node gets now; None: its deploy labels stay as they are.
    workload: GpuWorkload | None
    # Cordon the node (recording MOVE_CORDON), or lift the operator's cordon.
    cordon: bool = False
    uncordon: bool = False
    # The GPU pods to evict now (the drain).
    evict: tuple[WorkloadPod, ...] = ()
    # Why the node waits, naming the pods and the fix; None when it does not wait on the admin.
    waiting: str | None = None
    fix: str = ""


def _named(pods: Iterable[WorkloadPod]) -> str:
    names = [f"{pod.ref.namespace}/{pod.ref.name}" for pod in pods]
    shown = ", ".join(names[:PODS_NAMED])
    return shown + (f" (+{len(names) - PODS_NAMED} more)" if len(names) > PODS_NAMED else "")


def plan_move(
    node: str,
    chosen: GpuWorkload | None,
    current: GpuWorkload,
    pods: Iterable[WorkloadPod],
    policy: UpgradePolicy,
    *,
    unschedulable: bool,
    cordoned_for_move: bool,
) -> MoveStep:
    """One node's step (module docstring).  `chosen`: its workload (None: a label the operator
    cannot follow); `current`: the stack its deploy labels show; `pods`: the pods on the node
    (read only for a node leaving the container stack); `cordoned_for_move`: MOVE_CORDON is set."""
    leaving_containers = current is GpuWorkload.CONTAINER and chosen not in (None, GpuWorkload.CONTAINER)
    if not leaving_containers:
        # Nothing to wait for (no move, or none that a container GPU pod could be under); a cordon
        # of ours from a move that is done or called off is lifted.
        return MoveStep(chosen, uncordon=cordoned_for_move)
    running = [pod for pod in pod_selection.gpu_pods(pods, None) if not pod.terminating]
    if not running and not any(pod.terminating for pod in pod_selection.gpu_pods(pods, None)):
        # No GPU pod there (any more): move now, and lift our cordon.
        return MoveStep(chosen, uncordon=cordoned_for_move)
    if not running:
        # The evicted pods are still terminating: their GPUs are not free yet.
        return MoveStep(None)
    if not policy.drain.enable:
        # Never under a running GPU pod unless the drain settings say so.
        return MoveStep(
            None,
            waiting=f"node {node} waits to move to {chosen}: GPU pods run there: {_named(running)}",
            fix="delete those pods, or set spec.driver.upgradePolicy.drain.enable=true to let the operator"
            " cordon and drain the node",
        )
    blocked = [(pod, why) for pod in running if (why := pod_selection.why_not_drainable(pod, policy))]
    evict = tuple(pod for pod in running if pod_selection.why_not_drainable(pod, policy) is None)
    # NB: an admin's cordon stays the admin's: not recorded as ours, never lifted by the move.
    cordon = not unschedulable and not cordoned_for_move
    if blocked:
        reasons = "; ".join(f"{pod.ref.namespace}/{pod.ref.name} {why}" for pod, why in blocked[:PODS_NAMED])
        return MoveStep(
            None,
            cordon=cordon,
            evict=evict,
            waiting=f"node {node} waits to move to {chosen}: the drain may not evict: {reasons}",
            fix="delete those pods, or set spec.driver.upgradePolicy.drain.force / deleteEmptyDir",
        )
    return MoveStep(None, cordon=cordon, evict=evict)
