"""vGPU manager DaemonSets: one per RHCOS build (or OS) of the vm-vgpu nodes, applied and collected.

Read: the pass's snapshot (GPU node facts, our vGPU manager DaemonSets, the driver-toolkit
ImageStream, ClusterVersion).  Plan and render: desired/vgpu_manager_manifests.py (the driver's
mechanism, planning/drivers/vgpu_manager_plan.py).  Apply: kube.applying, and deletion of the
stale DaemonSets (no vm-vgpu node carries their key) after a targeted re-read confirms no node
matches their nodeSelector, as the driver's.  Disabled (vgpuManager.enabled or
sandboxWorkloads.enabled false): every object of the vGPU manager goes.  An image that cannot be
resolved while vm-vgpu nodes exist is the outcome's problem: nothing is applied or deleted.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from ocp_gpu.desired import driver_manifests, vgpu_manager_manifests
from ocp_gpu.kube import applying, fetching, owning, requesting
from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import platforms
from ocp_gpu.planning.operands import operand_planning
from ocp_gpu.reconcilers import cluster_view, driver_reconciler, runtime
from ocp_gpu.rendering.operands import vgpu_manager


@dataclasses.dataclass(frozen=True)
class VgpuManagerOutcome:
    enabled: bool
    problem: PolicyProblem | None = None
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)


async def reconcile_vgpu_managers(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    policy: policy_spec.Policy,
    platform: platforms.Platform,
) -> VgpuManagerOutcome:
    errors: dict[str, str] = {}
    if not vgpu_manager.OPERAND.is_enabled(policy):
        await _remove_all(rt, owner, errors)
        return VgpuManagerOutcome(enabled=False, errors=errors)
    existing = tuple(
        d for d in seen.operand_daemonsets.values() if vgpu_manager_manifests.is_vgpu_manager_daemonset(d)
    )
    named = vgpu_manager_manifests.named_config_maps(policy).values()
    config_map_keys: dict[str, tuple[str, ...] | None] = {}
    if named:
        # The kernelModuleConfig ConfigMap's keys, read now: they decide the pods' mounts.
        try:
            config_map_keys = await asyncio.to_thread(
                fetching.config_map_keys, rt.api_client, rt.namespace, named
            )
        except Exception as error:
            # NB: nothing is applied or deleted without them: the next pass reads again.
            return VgpuManagerOutcome(
                enabled=True, errors={"vGPU manager ConfigMaps": requesting.describe_error(error)}
            )
    view = driver_manifests.DriverView(
        namespace=rt.namespace,
        env=rt.env,
        node_facts=tuple(seen.node_facts.values()),
        daemonsets=existing,
        dtk_imagestream=seen.dtk_imagestream,
        cluster_version=seen.cluster_version,
        cluster_proxy=seen.cluster_proxy,
        config_map_keys=config_map_keys,
    )
    desired = vgpu_manager_manifests.desired_vgpu_manager_manifests(policy, platform, view)
    if isinstance(desired, PolicyProblem):
        # NB: nothing is applied or deleted: what runs keeps running.
        return VgpuManagerOutcome(enabled=True, problem=desired)
    await applying.apply_all(rt.api_client, rt.ledger, owner, ((m, None) for m in desired.manifests), errors)
    for stale in desired.plan.stale:
        daemonset = seen.operand_daemonsets.get(stale.name)
        await driver_reconciler.delete_stale_daemonset(rt, daemonset, stale, errors)
    return VgpuManagerOutcome(enabled=True, errors=errors)


async def _remove_all(rt: runtime.Runtime, owner: Mapping[str, str], errors: dict[str, str]) -> None:
    """Every object of the vGPU manager the active policy owns, as the watch shows them (no request
    when there is none)."""
    stale = operand_planning.unrendered_owned(
        ((ident, record.component, record.owner_uid) for ident, record in list(rt.view.owned.items())),
        labels.VGPU_MANAGER_COMPONENT,
        owner.get("uid", ""),
        (),
    )
    api_versions = {row.kind: row.api_version for row in owning.OWNED_KINDS}
    # DaemonSets first: their pods use the ServiceAccount and its bindings.
    for kind, namespace, name in sorted(stale, key=lambda ident: ident[0] != "DaemonSet"):
        stub: dict[str, Any] = {
            "apiVersion": api_versions[kind],
            "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        }
        await applying.delete_if_present(rt.api_client, rt.ledger, stub, errors)
