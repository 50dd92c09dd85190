"""NVIDIA's GPUClusters: which one owns the DRA operand this pass, their status and Events.

Read: the GPUClusters from the in-memory view (watched only when their CRD is served).  Plan:
model/policy/gpu_cluster.decide_gpu_cluster (the coexistence rule, then the GPUCluster's own
spec) and planning/status/gpu_cluster_status (NVIDIA's state and conditions, the Events).
Apply: nothing of its own. The accepted GPUCluster's `spec.draDriver` becomes the policy's
`draDriver` (`effective_policy`), so the main pass (reconcilers/cluster.py) applies the DRA
operand from it, owned by the ClusterPolicy, on the node ownership labels of docs/dra.md; a
GPUCluster deleted or refused leaves the ClusterPolicy's own `draDriver` (off), and the DRA
operand goes as when it is switched off (after the pods holding claims). Writes only the
GPUClusters' status and Events.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping, Sequence

from ocp_gpu.kube import reporting, requesting
from ocp_gpu.model import custom_resources
from ocp_gpu.model.policy import gpu_cluster, policy_spec
from ocp_gpu.planning.status import conditions, gpu_cluster_status
from ocp_gpu.reconcilers import runtime

logger = logging.getLogger("ocp_gpu.gpu_clusters")


def decide(
    gpu_clusters: Mapping[str, custom_resources.GpuClusterObject],
    policy_name: str | None,
    policy: policy_spec.Policy | None,
    env: Mapping[str, str],
) -> tuple[gpu_cluster.GpuClusterDecision, ...]:
    """Each GPUCluster's standing, the oldest first (model/policy/gpu_cluster.decide_gpu_clusters)."""
    return gpu_cluster.decide_gpu_clusters(gpu_clusters.values(), policy_name, policy, env)


effective_policy = gpu_cluster.effective_policy


async def report(
    rt: runtime.Runtime,
    decisions: Sequence[gpu_cluster.GpuClusterDecision],
    *,
    policy_name: str | None,
    policy_valid: bool,
    unready_nodes: Sequence[str] | None,
    apply_errors: Mapping[str, str],
    now: datetime.datetime,
) -> None:
    """Write each GPUCluster's status if it changed, and say each new problem as an Event."""
    for decision in decisions:
        # NB: as the watch shows it now: its stored status is what this write compares with.
        current = rt.view.gpu_clusters.get(decision.name)
        if current is None:
            continue  # deleted meanwhile
        status = gpu_cluster_status.plan_gpu_cluster_status(
            decision,
            policy_name=policy_name,
            policy_valid=policy_valid,
            unready_nodes=unready_nodes,
            apply_errors=apply_errors,
        )
        previous = frozenset(
            str(item.get("message", ""))
            for item in current.status.get("conditions") or []
            if item.get("status") == "True"
        )
        if not await _write_status_if_changed(rt, current, status, now):
            continue
        for event in gpu_cluster_status.plan_gpu_cluster_events(decision, status, previous):
            if event.type == "Warning":
                logger.warning("GPUCluster %s: %s", decision.name, event.message)
            await asyncio.to_thread(
                reporting.post_event, rt.api_client, current.ref(), event.reason, event.message, event.type
            )


async def _write_status_if_changed(
    rt: runtime.Runtime,
    current: custom_resources.GpuClusterObject,
    decided: gpu_cluster_status.GpuClusterStatus,
    now: datetime.datetime,
) -> bool:
    """Write the status unless it is what is stored; whether it is stored now (written or unchanged).

    NB: no observedGeneration beside the conditions' own: NVIDIA's status schema has none (the
    server would prune it, and every pass would write again)."""
    status = dict(decided.wire(rt.namespace))
    status["conditions"] = conditions.merge_conditions(
        decided.conditions, current.status.get("conditions") or [], now, current.generation
    )
    if all(current.status.get(key) == value for key, value in status.items()):
        return True
    try:
        await asyncio.to_thread(reporting.patch_gpu_cluster_status, rt.api_client, current.name, status)
    except Exception as error:  # deleted meanwhile, or a conflict: the next pass writes it
        logger.warning(
            "could not write the status of GPUCluster %s: %s", current.name, requesting.describe_error(error)
        )
        return False
    if current.status.get("state") != status["state"]:
        logger.info(
            "GPUCluster %s: state %s (was %s)",
            current.name,
            status["state"],
            current.status.get("state") or "none",
        )
    return True
