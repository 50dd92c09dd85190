"""The operator's own monitoring: metrics Service, ServiceMonitor, alerts, dashboard, namespace label.

Read: the API groups (at leadership), the operator namespace's labels (once per process).
Plan: planning/operands/monitoring_planning.py.  Render: rendering/monitoring_rendering.py.  Apply:
kube.applying.apply_if_changed (zero writes when nothing changed), kube.labelling for the
namespace label, kube.applying.delete for a ServiceMonitor switched off (once per process).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping

from ocp_gpu.desired import operand_render_cache
from ocp_gpu.kube import applying, labelling, requesting
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning import platforms
from ocp_gpu.planning.operands import monitoring_planning
from ocp_gpu.reconcilers import cluster_view, runtime
from ocp_gpu.rendering import monitoring_rendering

logger = logging.getLogger("ocp_gpu.monitoring")

# rt.cache.applied keys for what this module did once per process (no hash: a fact, not a manifest).
_LABELLED = "namespace-labelled"
_REMOVED = "removed"


@dataclasses.dataclass(frozen=True)
class MonitoringOutcome:
    problems: tuple[monitoring_planning.MonitoringUnavailable, ...]
    errors: Mapping[str, str]


async def reconcile_monitoring(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    policy: policy_spec.Policy,
    platform: platforms.Platform,
) -> MonitoringOutcome:
    errors: dict[str, str] = {}
    namespace_key = ("Namespace", "", rt.namespace)
    namespace_labels: dict[str, str] = {}
    if platform.is_openshift and rt.cache.applied.get(namespace_key) != _LABELLED:
        # NB: read once per process; afterwards the label is known to be there.
        try:
            namespace_labels = await asyncio.to_thread(
                labelling.read_namespace_labels, rt.api_client, rt.namespace
            )
        except Exception as error:
            errors[f"Namespace {rt.namespace}"] = requesting.describe_error(error)
    plan = monitoring_planning.plan_operator_monitoring(policy, platform, seen.api_groups, namespace_labels)
    if platform.is_openshift and rt.cache.applied.get(namespace_key) != _LABELLED and not errors:
        try:
            if plan.namespace_labels:
                await asyncio.to_thread(
                    labelling.patch_namespace_labels, rt.api_client, rt.namespace, plan.namespace_labels
                )
                logger.info("labelled namespace %s %s", rt.namespace, dict(plan.namespace_labels))
            rt.cache.applied[namespace_key] = _LABELLED
        except Exception as error:
            errors[f"Namespace {rt.namespace}"] = requesting.describe_error(error)
    inputs = monitoring_rendering.MonitoringRenderInputs(rt.namespace, plan)
    await applying.apply_all(
        rt.api_client,
        rt.ledger,
        owner,
        (
            (kept.manifest, kept.applied_hash)
            for kept in operand_render_cache.monitoring_manifests(policy, inputs)
        ),
        errors,
    )
    for kind in plan.remove:
        await _remove(rt, kind, errors)
    return MonitoringOutcome(plan.problems, errors)


async def _remove(rt: runtime.Runtime, kind: str, errors: dict[str, str]) -> None:
    """Delete our object of `kind` once per process (a 404 is fine: it was never made)."""
    ident = (kind, rt.namespace, monitoring_rendering.SERVICE)
    if rt.cache.applied.get(ident) == _REMOVED:
        return
    try:
        await asyncio.to_thread(
            applying.delete,
            rt.api_client,
            "monitoring.coreos.com/v1",
            kind,
            monitoring_rendering.SERVICE,
            rt.namespace,
        )
        rt.cache.applied[ident] = _REMOVED
    except Exception as error:
        errors[f"{kind} {monitoring_rendering.SERVICE}"] = requesting.describe_error(error)
