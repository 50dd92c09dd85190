"""When a GPU node may leave the stack it runs for another, and what must happen first.

Decides, for one node whose workload (planning/operands/workloads.py) is not the stack its deploy
labels show, this pass's step: move now, hold, or drain first as the driver upgrade does.  A node
leaves a stack only once no pod holds that stack's GPUs (`holding_pods`): on the container stack a
pod using `nvidia.com/gpu*`, `nvidia.com/mig-*` or a `gpu.nvidia.com` claim; on a VM stack a pod
using a resource the sandbox device plugin advertises (KubeVirt's virt-launcher of a running VM:
the vfio manager's preStop would unbind its GPU, a driver would load under it).

- No such pod: move now (and lift the operator's cordon).
- Such pods and `driver.upgradePolicy.drain.enable` false: hold; the admin is told which pods and
  the fix.
- drain.enable: as the upgrade's drain-required state (planning/upgrades/upgrade_table.py, the
  same pod selection and timeout): cordon the node, evict the holding pods that drain.podSelector
  selects (pod_selection.drain_pods: not DaemonSet or static pods, not those labelled
  `...drain.skip=true`) and `drain.force`/`drain.deleteEmptyDir` allow, move once none is left,
  then lift the cordon.  A holding pod the selector leaves out is never evicted: the node waits
  for it, named.  The drain's start is recorded on the node (MOVE_DRAIN_START); a drain that
  outlasts `drain.timeoutSeconds` (0: none) fails as the upgrade's does (upgrade-failed): no more
  evictions, the cordon stays, an error names the pods and the ways out (the pods end, the
  timer annotation removed to drain again, or the label set back).

The operator's cordon is recorded on the node (MOVE_CORDON), so an admin's cordon is never lifted
by a move.  NVIDIA's operator (v26.7.0, controllers/nodelabeling_controller.go) flips the deploy
labels at once, both ways, and never drains for a workload change (docs/differences-from-nvidia.md).

It never reads or writes a Node or a pod.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Sequence
from typing import Final

from ocp_gpu.model import labels
from ocp_gpu.model.policy.policy_spec import GpuWorkload, UpgradePolicy
from ocp_gpu.model.upgrade_observations import WorkloadPod
from ocp_gpu.planning.upgrades import pod_selection, upgrade_table

# The node annotation recording that the operator cordoned the node to move it (its value: the
# workload it moves to); the cordon is lifted once the move is done or called off.
MOVE_CORDON: Final = labels.WORKLOAD_MOVE_CORDON
# The node annotation recording when the move's drain started (unix seconds, as the upgrade's
# timers); removed once the drain is over.
MOVE_DRAIN_START: Final = labels.WORKLOAD_MOVE_DRAIN_START
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
    # The pods to evict now (the drain).
    evict: tuple[WorkloadPod, ...] = ()
    # Record the drain's start now, or remove the record (the drain is over or stopped).
    start_drain_timer: bool = False
    clear_drain_timer: bool = False
    # Why the node waits, naming the pods and the fix; None when it does not wait on the admin.
    waiting: str | None = None
    fix: str = ""
    # The drain outlasted drain.timeoutSeconds: `waiting` is an error, not a warning.
    failed: bool = False


def holding_pods(pods: Iterable[WorkloadPod], current: GpuWorkload) -> tuple[WorkloadPod, ...]:
    """The Pending or Running pods that hold the GPUs of the stack the node runs (module docstring)."""
    if current is GpuWorkload.CONTAINER:
        # NB: claims unknown here: any claim counts as a GPU's (pod_selection.holds_gpu_claim says why).
        return pod_selection.gpu_pods(pods, None)
    return tuple(pod for pod in pods if pod.active and pod.requests_vm_gpu)


def _named(pods: Iterable[WorkloadPod]) -> str:
    names = [str(pod.ref) for pod in pods]
    shown = ", ".join(names[:PODS_NAMED])
    return shown + (f" (+{len(names) - PODS_NAMED} more)" if len(names) > PODS_NAMED else "")


def _kind(current: GpuWorkload) -> str:
    return "GPU pods" if current is GpuWorkload.CONTAINER else "pods of VMs using its GPUs"


def plan_move(
    node: str,
    chosen: GpuWorkload | None,
    current: GpuWorkload,
    pods: Iterable[WorkloadPod],
    policy: UpgradePolicy,
    *,
    unschedulable: bool,
    cordoned_for_move: bool,
    drain_started: datetime.datetime | None = None,
    now: datetime.datetime | None = None,
) -> MoveStep:
    """One node's step (module docstring).  `chosen`: its workload (None: a label the operator
    cannot follow); `current`: the stack its deploy labels show; `pods`: the pods on the node (read
    only for a node that moves); `cordoned_for_move`: MOVE_CORDON is set; `drain_started`: what
    MOVE_DRAIN_START records (None: not set, or not a time); `now`: this pass's time."""
    timer_set = drain_started is not None
    moving = chosen is not None and chosen is not current
    holding = holding_pods(pods, current) if moving else ()
    if not holding:
        # No move, or nothing holds the node's GPUs (any more): the node gets its workload's labels
        # now; a cordon of ours from a move that is done or called off is lifted.
        return MoveStep(chosen, uncordon=cordoned_for_move, clear_drain_timer=timer_set)
    running = [pod for pod in holding if not pod.terminating]
    waits = f"node {node} waits to move to {chosen}"
    if not policy.drain.enable:
        if not running:
            # Evicted (or deleted) pods still terminating: their GPUs are not free yet.
            return MoveStep(None, clear_drain_timer=timer_set)
        # Never under a running pod holding the GPUs unless the drain settings say so.
        return MoveStep(
            None,
            clear_drain_timer=timer_set,
            waiting=f"{waits}: {_kind(current)} run there: {_named(running)}",
            fix="delete those pods, or set spec.driver.upgradePolicy.drain.enable=true to let the operator"
            " cordon and drain the node",
        )
    return _drain(node, waits, current, holding, policy, unschedulable, cordoned_for_move, drain_started, now)


def _drain(
    node: str,
    waits: str,
    current: GpuWorkload,
    holding: Sequence[WorkloadPod],
    policy: UpgradePolicy,
    unschedulable: bool,
    cordoned_for_move: bool,
    drain_started: datetime.datetime | None,
    now: datetime.datetime | None,
) -> MoveStep:
    """The step of a node drained to move (module docstring): the upgrade's drain, on the holding pods."""
    timer_set = drain_started is not None
    # NB: an admin's cordon stays the admin's: not recorded as ours, never lifted by the move.
    cordon = not unschedulable and not cordoned_for_move
    try:
        selected = {pod.ref for pod in pod_selection.drain_pods(holding, policy)}
    except ValueError as error:
        # The policy checks refuse such a selector first; never evict on one that does not parse.
        return MoveStep(
            None,
            waiting=f"{waits}: drain.podSelector {policy.drain.pod_selector!r} is invalid: {error}",
            fix="correct spec.driver.upgradePolicy.drain.podSelector",
            failed=True,
        )
    targets = [pod for pod in holding if pod.ref in selected]
    left_out = [pod for pod in holding if pod.ref not in selected and not pod.terminating]
    if not targets:
        # Nothing for the drain to do: no timer runs; the pods it may not touch are waited for.
        return MoveStep(
            None,
            cordon=cordon,
            clear_drain_timer=timer_set,
            waiting=f"{waits}: drain.podSelector leaves out {_named(left_out)}" if left_out else None,
            fix="delete those pods, or widen spec.driver.upgradePolicy.drain.podSelector",
        )
    timeout = policy.drain.timeout_seconds
    elapsed = now - drain_started if now is not None and drain_started is not None else None
    if upgrade_table.timed_out(timeout, elapsed):
        # As the upgrade's drain: it has failed; the cordon stays, nothing more is evicted.
        return MoveStep(
            None,
            waiting=f"{waits}: the drain outlasted drain.timeoutSeconds ({timeout}s); still there: "
            f"{_named(targets + left_out)}",
            fix=f"delete those pods (the move then completes), remove the node annotation {MOVE_DRAIN_START}"
            f" to drain again, or set the label back to {current} to call the move off",
            failed=True,
        )
    live = [pod for pod in targets if not pod.terminating]
    blocked = [(pod, why) for pod in live if (why := pod_selection.why_not_drainable(pod, policy))]
    evict = tuple(pod for pod in live if pod_selection.why_not_drainable(pod, policy) is None)
    step = MoveStep(None, cordon=cordon, evict=evict, start_drain_timer=not timer_set)
    note = upgrade_table.timeout_note(timeout, elapsed, "drain.timeoutSeconds")
    if blocked:
        reasons = "; ".join(f"{pod.ref} {why}" for pod, why in blocked[:PODS_NAMED])
        return dataclasses.replace(
            step,
            waiting=f"{waits}: the drain may not evict: {reasons} {note}",
            fix="delete those pods, or set spec.driver.upgradePolicy.drain.force / deleteEmptyDir",
        )
    if left_out:
        return dataclasses.replace(
            step,
            waiting=f"{waits}: drain.podSelector leaves out {_named(left_out)} {note}",
            fix="delete those pods, or widen spec.driver.upgradePolicy.drain.podSelector",
        )
    return step
