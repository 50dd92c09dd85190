"""The reconcile loop and its one pass: which ClusterPolicy is active, its status, node labels.

Read: the in-memory view (runtime.Runtime).  Plan: planning.policies,
planning.platform, model.policy, planning.node_labels.  Apply: kube.labelling,
kube.reporting.  Writes happen only when the plan differs from what is
observed, so a quiet cluster sees zero writes.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Mapping
from typing import Any

from ocp_gpu import metrics
from ocp_gpu.kube import labelling, reporting, requesting
from ocp_gpu.model import fields, policy_checks, policy_parser
from ocp_gpu.model import policy as policy_model
from ocp_gpu.model import problems as policy_problems
from ocp_gpu.planning import (
    conditions,
    driver_coverage,
    monitoring,
    node_labels,
    operator_health,
    platform,
    policies,
)
from ocp_gpu.reconcilers import drivers as drivers_reconciler
from ocp_gpu.reconcilers import monitoring as monitoring_reconciler
from ocp_gpu.reconcilers import operands, runtime

logger = logging.getLogger("ocp_gpu.reconcile")

STATE_READY, STATE_NOT_READY, STATE_IGNORED = "ready", "notReady", "ignored"
RETRY_FAILED_WRITES_S = 30.0
# How many not-ready nodes the OperandNotReady message names per operand.
UNREADY_NODES_NAMED = 3

# A field accepted for compatibility with NVIDIA's schema that ocp-gpu does not act on (model/fields.py).
UNSUPPORTED = "UnsupportedSetting"
# Conditions that also become an Event when they appear or change: type -> (reason, Event type).
EVENTED = {
    "Error": ("InvalidClusterPolicy", "Warning"),
    "DriverToolkitImageMissing": ("DriverToolkitImageMissing", "Warning"),
    "DriverToolkitImageStreamProblem": ("DriverToolkitImageStreamProblem", "Warning"),
    "NodeFeatureLabelStale": ("NodeFeatureLabelStale", "Warning"),
    "NodeFeatureLabelsMissing": ("NodeFeatureLabelsMissing", "Warning"),
    "DriverDaemonSetDeferred": ("DriverDaemonSetDeferred", "Warning"),
    monitoring.MonitoringUnavailable.reason: (monitoring.MonitoringUnavailable.reason, "Warning"),
    UNSUPPORTED: (UNSUPPORTED, "Warning"),
}


async def reconcile_forever(rt: runtime.Runtime, coalesce_s: float) -> None:
    """Wait for changes, let a burst settle (runtime.Coalescer), reconcile; forever."""
    await rt.listed.wait()
    coalescer = runtime.Coalescer(coalesce_s)
    while True:
        await rt.wake.wait()
        await coalescer.settle()
        changes = rt.take_changes()
        metrics.reconciliations.inc()
        try:
            await reconcile_once(rt, changes, datetime.datetime.now(datetime.UTC))
        except requesting.ApiException as error:
            # NB: str(ApiException) carries every HTTP header; the apiserver's message is enough.
            metrics.reconciliation_failures.inc()
            logger.error(
                "reconcile pass failed: %s; retrying everything shortly", requesting.describe_error(error)
            )
            await asyncio.sleep(2)
            rt.mark_everything()
        except Exception:
            metrics.reconciliation_failures.inc()
            metrics.reconciliation_status.set(operator_health.ReconciliationStatus.OPERATOR_ERROR)
            logger.exception("reconcile pass failed; retrying everything shortly")
            await asyncio.sleep(2)
            rt.mark_everything()
        coalescer.ended()
        rt.trimmer.worked()


async def reconcile_once(rt: runtime.Runtime, changes: runtime.Changes, now: datetime.datetime) -> None:
    metrics.gpu_nodes.set(sum(1 for facts in rt.node_facts.values() if facts.is_gpu_node))
    metrics.has_nfd_labels.set(
        operator_health.has_nfd_labels(facts.labels for facts in rt.node_facts.values())
    )
    selection = policies.select_active_policy(
        [policies.PolicyRef(p.name, p.created, p.uid) for p in rt.policies.values()]
    )
    if changes.policies or changes.everything:
        for name, message in selection.ignored.items():
            ignored = rt.policies[name]
            if _ready_message(ignored.status) != message:
                # A second ClusterPolicy (or a new reason to ignore it): say so once, loudly.
                logger.warning("ClusterPolicy %s ignored: %s", name, message)
                await asyncio.to_thread(
                    reporting.post_event,
                    rt.api_client,
                    _policy_ref(ignored),
                    "ClusterPolicyIgnored",
                    conditions.bounded_message(message),
                    "Warning",
                )
            await _write_status_if_changed(rt, ignored, _ignored_status(message, ignored), now)
    if selection.active != rt.active_policy:
        # Deleting the active policy hands over to the next oldest: worth a line in the log.
        logger.info(
            "active ClusterPolicy: %s (was %s)", selection.active or "none", rt.active_policy or "none"
        )
        rt.active_policy = selection.active
    if selection.active is None:
        # No ClusterPolicy: nothing is deployed and no node is labelled.
        rt.set_upgrade_policy(None)
        metrics.reconciliation_status.set(operator_health.ReconciliationStatus.POLICY_UNAVAILABLE)
        return
    active = rt.policies[selection.active]
    policy = policy_parser.parse_policy(active.spec)
    problems = policy_checks.validate_policy(policy, rt.env)
    spec_errors = "; ".join(
        f"{p.field}: {p.message}" for p in problems if p.severity is policy_problems.Severity.ERROR
    )
    if spec_errors != rt.logged_spec_errors:
        # Logged once per change, not every pass (the status and an Event carry it too).
        if spec_errors:
            logger.warning(
                "ClusterPolicy %s has an invalid spec (nothing is applied or deleted): %s",
                active.name,
                conditions.bounded_message(spec_errors),
            )
        elif rt.logged_spec_errors:
            logger.info("ClusterPolicy %s: the spec is valid again", active.name)
        rt.logged_spec_errors = spec_errors
    detected = platform.detect_platform(rt.api_groups)

    errors = [p for p in problems if p.severity is policy_problems.Severity.ERROR]
    auto_upgrade = policy.driver.upgrade_policy.auto_upgrade if not errors and policy.driver.enabled else None
    label_errors = await _reconcile_node_labels(rt, changes, auto_upgrade)
    outcome: drivers_reconciler.DriverOutcome | None = None
    stack: dict[str, operands.OperandOutcome] = {}
    watching: monitoring_reconciler.MonitoringOutcome | None = None
    if not errors:
        # NB: with a spec error nothing is applied or deleted: what runs keeps running.
        outcome = await drivers_reconciler.reconcile_drivers(rt, _policy_ref(active), policy, detected, now)
        if outcome.problem is not None:
            problems = [*problems, outcome.problem]
        stack = await operands.reconcile_operands(rt, _policy_ref(active), policy, detected)
        problems = [*problems, *(o.problem for o in stack.values() if o.problem is not None)]
        watching = await monitoring_reconciler.reconcile_monitoring(rt, _policy_ref(active), policy, detected)
        # The monitoring objects' write failures are reported with the others'.
        label_errors = {**label_errors, **watching.errors}
    # NB: upgrades run in their own loop (reconcilers/upgrades.py), off this pass's latency path.
    upgrades_allowed = (
        not errors and outcome is not None and outcome.problem is None and policy.driver.enabled
    )
    rt.set_upgrade_policy(policy.driver.upgrade_policy if upgrades_allowed else None)

    status = _active_status(rt, policy, problems, detected, label_errors, outcome, stack)
    if status["state"] == STATE_READY:
        metrics.reconciliation_last_success.set(now.timestamp())
    if watching is not None and watching.problems:
        # Asked for a ServiceMonitor where none can exist: say so (and once as an Event), go on.
        reason = monitoring.MonitoringUnavailable.reason
        message = " ".join(problem.message for problem in watching.problems)
        status["_conditions"].append(conditions.Condition(reason, True, reason, message))
    unsupported = fields.unsupported_settings(active.spec)
    if unsupported:
        # Accepted for compatibility with NVIDIA's schema, not acted on: say so, change nothing else.
        message = fields.describe(unsupported, conditions.CONDITION_MESSAGE_LIMIT)
        status["_conditions"].append(conditions.Condition(UNSUPPORTED, True, UNSUPPORTED, message))
    if any(operand is not None and operand.errors for operand in (outcome, *stack.values())) or label_errors:
        # A failed write is retried on the next change, and at the latest after this long.
        rt.poke_after(RETRY_FAILED_WRITES_S)
    previous_messages = _condition_messages(active.status)
    await _write_status_if_changed(rt, active, status, now)
    for condition in status["_conditions"]:
        if condition.status and condition.type in EVENTED and condition.message not in previous_messages:
            # A new or different problem: say it once as an Event too (the status holds it meanwhile).
            await asyncio.to_thread(
                reporting.post_event,
                rt.api_client,
                _policy_ref(active),
                EVENTED[condition.type][0] if condition.type == "Error" else condition.reason,
                condition.message,
                EVENTED[condition.type][1],
            )


async def _reconcile_node_labels(
    rt: runtime.Runtime, changes: runtime.Changes, auto_upgrade: bool | None
) -> dict[str, str]:
    """Patch the labels (and upgrade annotation) of every changed node that needs it; errors by node."""
    names = rt.node_facts.keys() if (changes.everything or changes.policies) else changes.nodes
    patches: dict[str, tuple[node_labels.LabelPatch, node_labels.LabelPatch]] = {}
    for name in list(names):
        facts = rt.node_facts.get(name)
        if facts is None:
            continue
        label_patch = node_labels.plan_node_labels(facts.labels) or {}
        annotation_patch = (
            node_labels.plan_upgrade_annotation(facts.labels, facts.annotations, auto_upgrade) or {}
        )
        if label_patch or annotation_patch:
            patches[name] = (label_patch, annotation_patch)
    results = await runtime.in_threads(
        functools.partial(labelling.patch_node_labels, rt.api_client, node, *patch)
        for node, patch in patches.items()
    )
    errors: dict[str, str] = {}
    for node, result in zip(patches, results, strict=True):
        if isinstance(result, Exception):  # one node's failure never blocks the others
            errors[node] = requesting.describe_error(result)
            logger.warning("could not label node %s: %s", node, errors[node])
    return errors


def _active_status(
    rt: runtime.Runtime,
    policy: policy_model.Policy,
    problems: list[policy_problems.PolicyProblem],
    detected: platform.Platform,
    label_errors: Mapping[str, str],
    outcome: drivers_reconciler.DriverOutcome | None,
    stack: Mapping[str, operands.OperandOutcome],
) -> dict[str, Any]:
    errors = [p for p in problems if p.severity is policy_problems.Severity.ERROR]
    apply_errors = dict(label_errors)
    for operand in (outcome, *stack.values()):
        apply_errors |= dict(operand.errors) if operand else {}
    found: list[conditions.Condition] = []
    coverage = _coverage(rt, outcome)
    summary = _driver_summary(rt, outcome, coverage)
    unready = [d["name"] for d in summary if not d.pop("_complete")]
    # Per operand, the GPU nodes that should run it and have no Ready pod of it yet.
    unready_nodes = operands.unready_operands(rt, policy) if stack else {}
    if errors:
        message = "; ".join(f"{p.field}: {p.message} (fix: {p.fix})" for p in errors)
        found.append(conditions.Condition("Ready", False, "InvalidSpec", message))
        found.append(conditions.Condition("Error", True, "InvalidSpec", message))
    elif apply_errors:
        message = "; ".join(f"{what}: {error}" for what, error in sorted(apply_errors.items()))
        found.append(conditions.Condition("Ready", False, "ApplyFailed", message))
        found.append(conditions.Condition("Error", True, "ApplyFailed", message))
    elif coverage is not None and coverage.uncovered and outcome is not None and outcome.plan is not None:
        # A GPU node that no driver DaemonSet selects is never "ready" (DESIGN §4).
        message = driver_coverage.describe_uncovered(coverage.uncovered, outcome.plan.findings)
        found.append(conditions.Condition("Ready", False, "GPUNodesWithoutDriver", message))
        found.append(conditions.Condition("Error", False, "Reconciled", ""))
    elif unready or unready_nodes:
        parts = [f"pods not ready in {', '.join(unready)}"] if unready else []
        for name, nodes in unready_nodes.items():
            more = f" (+{len(nodes) - UNREADY_NODES_NAMED} more)" if len(nodes) > UNREADY_NODES_NAMED else ""
            parts.append(f"{name} not ready on {', '.join(nodes[:UNREADY_NODES_NAMED])}{more}")
        found.append(conditions.Condition("Ready", False, "OperandNotReady", "; ".join(parts)))
        found.append(conditions.Condition("Error", False, "Reconciled", ""))
    else:
        gpu_nodes = sum(1 for facts in rt.node_facts.values() if facts.is_gpu_node)
        found.append(
            conditions.Condition(
                "Ready",
                True,
                "Reconciled",
                f"{gpu_nodes} GPU node(s), {len(summary)} driver DaemonSet(s) on {detected.value}",
            )
        )
        found.append(conditions.Condition("Error", False, "Reconciled", ""))
    warnings = [p for p in problems if p.severity is not policy_problems.Severity.ERROR]
    if warnings:
        found.append(
            conditions.Condition(
                "Warning",
                True,
                "SpecWarning",
                "; ".join(f"{p.field}: {p.message} (fix: {p.fix})" for p in warnings),
            )
        )
    if outcome is not None and outcome.plan is not None:
        by_reason: dict[str, list[str]] = {}
        for finding in outcome.plan.findings:
            by_reason.setdefault(finding.reason, []).append(finding.message)
        for reason, messages in sorted(by_reason.items()):
            found.append(conditions.Condition(reason, True, reason, "; ".join(messages)))
    state = STATE_READY if found[0].status else STATE_NOT_READY
    metrics.reconciliation_status.set(
        operator_health.reconciliation_status(
            has_policy=True,
            spec_errors=bool(errors),
            apply_errors=bool(apply_errors),
            ready=state == STATE_READY,
        )
    )
    return {
        "state": state,
        "namespace": rt.namespace,
        "platform": detected.value,
        "driverDaemonSets": summary,
        "_conditions": found,
    }


def _coverage(
    rt: runtime.Runtime, outcome: drivers_reconciler.DriverOutcome | None
) -> driver_coverage.DriverCoverage | None:
    if outcome is None or outcome.plan is None:
        return None
    return driver_coverage.plan_driver_coverage(
        {name: facts.labels for name, facts in rt.node_facts.items()}, outcome.plan.desired
    )


def _driver_summary(
    rt: runtime.Runtime,
    outcome: drivers_reconciler.DriverOutcome | None,
    coverage: driver_coverage.DriverCoverage | None,
) -> list[dict[str, Any]]:
    """One entry per desired driver DaemonSet: its key, images, the nodes it selects and ready pods."""
    if outcome is None or outcome.plan is None or coverage is None:
        # No plan this pass (an invalid spec, an image that cannot be resolved): the
        # DaemonSets keep running, so describe them as they are.
        return _observed_driver_summary(rt)
    summary = []
    for entry in outcome.plan.desired:
        observed = rt.driver_daemonsets.get(entry.name)
        summary.append(
            {
                "name": entry.name,
                "key": str(entry.key),
                "image": entry.driver_image,
                "dtkImage": entry.dtk_image or "",
                # Nodes the DaemonSet selects: the key's nodes less the admin's opt-outs.
                "nodes": len(coverage.selected.get(entry.name, ())),
                "ready": observed.number_ready if observed else 0,
                # Every pod the DaemonSet controller wants is Ready (opted-out nodes do not count).
                "_complete": observed is not None
                and observed.status_is_current
                and observed.number_ready == observed.desired_number_scheduled,
            }
        )
    return summary


def _observed_driver_summary(rt: runtime.Runtime) -> list[dict[str, Any]]:
    """The driver DaemonSets as the watch sees them (nodes: what the DaemonSet controller schedules)."""
    return [
        {
            "name": daemonset.name,
            "key": daemonset.key or "",
            "image": daemonset.image,
            "dtkImage": daemonset.dtk_image or "",
            "nodes": daemonset.desired_number_scheduled,
            "ready": daemonset.number_ready,
            "_complete": daemonset.status_is_current
            and daemonset.number_ready == daemonset.desired_number_scheduled,
        }
        for daemonset in sorted(rt.driver_daemonsets.values(), key=lambda d: d.name)
    ]


def _ignored_status(message: str, obj: runtime.PolicyObject) -> dict[str, Any]:
    return {
        "state": STATE_IGNORED,
        "_conditions": [
            conditions.Condition("Ready", False, "Ignored", message),
            conditions.Condition("Error", False, "Ignored", ""),
        ],
    }


async def _write_status_if_changed(
    rt: runtime.Runtime, obj: runtime.PolicyObject, decided: dict[str, Any], now: datetime.datetime
) -> None:
    fresh: list[conditions.Condition] = decided["_conditions"]
    status = {key: value for key, value in decided.items() if key != "_conditions"}
    status["conditions"] = conditions.merge_conditions(
        fresh, obj.status.get("conditions") or [], now, obj.generation
    )
    status["observedGeneration"] = obj.generation
    if all(obj.status.get(key) == value for key, value in status.items()):
        return
    await asyncio.to_thread(reporting.patch_policy_status, rt.api_client, obj.name, status)


def _ready_message(status: Mapping[str, Any]) -> str:
    return next(
        (str(c.get("message", "")) for c in status.get("conditions") or [] if c.get("type") == "Ready"), ""
    )


def _condition_messages(status: Mapping[str, Any]) -> set[str]:
    return {
        str(item.get("message", ""))
        for item in status.get("conditions") or []
        if item.get("status") == "True"
    }


def _policy_ref(obj: runtime.PolicyObject) -> dict[str, str]:
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": obj.name, "uid": obj.uid}
