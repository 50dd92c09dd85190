"""A GPUCluster's status: NVIDIA's state and Ready/Error conditions, and which of them to say as an Event.

Decides, from the GPUCluster's standing this pass (model/policy/gpu_cluster.GpuClusterDecision) and
what the DRA operand shows, the status NVIDIA's GPUCluster has (`state` ready or notReady,
`namespace`, conditions `Ready` and `Error` with NVIDIA's reasons: internal/conditions in NVIDIA's
operator v26.7.0), with a message that names the ClusterPolicy, field or node at fault and the fix.
Never does I/O; never decides what runs (the coexistence rule does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ocp_gpu.model.policy import gpu_cluster
from ocp_gpu.planning.status.conditions import Condition

# NVIDIA's status.state values (its CRD's enum: ready, notReady, disabled).
STATE_READY, STATE_NOT_READY = "ready", "notReady"
# NVIDIA's condition reasons (internal/conditions/consts.go).
RECONCILED = "Reconciled"
RECONCILE_FAILED = "ReconcileFailed"
OPERAND_NOT_READY = "OperandNotReady"
PREREQUISITE_NOT_MET = "PrerequisiteNotMet"
# Ours, as NVIDIADrivers have it: GPUCluster fields set that the DRA operand does not apply.
UNSUPPORTED = "UnsupportedSetting"
# How many nodes a message names.
NODES_NAMED = 10


@dataclasses.dataclass(frozen=True)
class GpuClusterEvent:
    reason: str
    message: str
    type: str = "Warning"


@dataclasses.dataclass(frozen=True)
class GpuClusterStatus:
    state: str
    conditions: tuple[Condition, ...]

    def wire(self, namespace: str) -> dict[str, object]:
        """The status fields but `conditions` (merged with the stored ones by the writer)."""
        return {"state": self.state, "namespace": namespace}


def _names(nodes: Sequence[str]) -> str:
    shown = ", ".join(sorted(nodes)[:NODES_NAMED])
    return shown + (f" and {len(nodes) - NODES_NAMED} more" if len(nodes) > NODES_NAMED else "")


def plan_gpu_cluster_status(
    decision: gpu_cluster.GpuClusterDecision,
    *,
    policy_name: str | None,
    policy_valid: bool,
    unready_nodes: Sequence[str] | None,
    apply_errors: Mapping[str, str],
) -> GpuClusterStatus:
    """The GPUCluster's state and conditions this pass.

    `unready_nodes`: the GPU nodes the DRA kubelet plugin should run on and is not Ready on
    (None: not judged, the operand was not applied); `apply_errors`: the DRA operand's objects
    that could not be written.
    """
    verdict = decision.verdict
    found: list[Condition] = []
    if verdict.state is not gpu_cluster.GpuClusterState.ACCEPTED:
        # refused or waiting: NVIDIA's reason for an unmet prerequisite, ours in Ready's reason
        found += [
            Condition("Ready", False, verdict.reason, verdict.message),
            Condition("Error", True, PREREQUISITE_NOT_MET, verdict.message),
        ]
    elif not policy_valid:
        # the ClusterPolicy's own spec is invalid: nothing is applied or deleted this pass
        message = (
            f"ClusterPolicy {policy_name!r} has an invalid spec, so nothing is applied until it is "
            f"fixed (its status names the field); the DRA driver is left as it is"
        )
        found += [
            Condition("Ready", False, "ClusterPolicyInvalid", message),
            Condition("Error", True, PREREQUISITE_NOT_MET, message),
        ]
    elif apply_errors:
        # an object of the DRA operand could not be written: retried
        message = "; ".join(f"{what}: {error}" for what, error in sorted(apply_errors.items()))
        found += [
            Condition("Ready", False, "Error", message),
            Condition("Error", True, RECONCILE_FAILED, message),
        ]
    elif unready_nodes:
        # rolling out: NVIDIA says Error OperandNotReady too, with no node named
        message = (
            f"Waiting for operand pods to be ready: the DRA kubelet plugin is not Ready on "
            f"{len(unready_nodes)} node(s): {_names(unready_nodes)}"
        )
        found += [
            Condition("Ready", False, "Error", message),
            Condition("Error", True, OPERAND_NOT_READY, message),
        ]
    else:
        owner = f" beside ClusterPolicy {policy_name!r}" if policy_name else ""
        found += [
            Condition(
                "Ready",
                True,
                RECONCILED,
                f"All resources have been successfully reconciled: GPUCluster {decision.name!r} owns the "
                f"DRA driver{owner}",
            ),
            Condition("Error", False, "Ready", ""),
        ]
    if decision.mapping is not None and decision.mapping.not_applied:
        message = "; ".join(f"{note}: not applied" for note in decision.mapping.not_applied)
        found.append(Condition(UNSUPPORTED, True, UNSUPPORTED, message))
    state = STATE_READY if found[0].status else STATE_NOT_READY
    return GpuClusterStatus(state=state, conditions=tuple(found))


def plan_gpu_cluster_events(
    decision: gpu_cluster.GpuClusterDecision,
    status: GpuClusterStatus,
    previous_true_messages: frozenset[str],
) -> list[GpuClusterEvent]:
    """The Events of a status: each problem once, when it appears or its message changes
    (the status holds it meanwhile). A rollout (OperandNotReady) is no Event."""
    events: list[GpuClusterEvent] = []
    for condition in status.conditions:
        if not condition.status or condition.message in previous_true_messages:
            continue
        if condition.type == "Error" and condition.reason == PREREQUISITE_NOT_MET:
            reason = (
                decision.verdict.reason
                if decision.verdict.state is not gpu_cluster.GpuClusterState.ACCEPTED
                else "ClusterPolicyInvalid"
            )
            events.append(GpuClusterEvent(reason, condition.message))
        elif condition.type == "Error" and condition.reason == RECONCILE_FAILED:
            events.append(GpuClusterEvent(RECONCILE_FAILED, condition.message))
        elif condition.type == UNSUPPORTED:
            events.append(GpuClusterEvent(UNSUPPORTED, condition.message))
        elif condition.type == "Ready" and condition.status:
            events.append(GpuClusterEvent(RECONCILED, condition.message, "Normal"))
    return events
