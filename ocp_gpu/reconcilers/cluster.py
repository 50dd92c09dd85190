"""The reconcile loop and its one pass: which ClusterPolicy is active, its status, node labels.

Read: a frozen snapshot of the in-memory view (cluster_view.ViewSnapshot), taken as
the pass begins and again to judge readiness after its writes.  Plan: planning.status.policies,
planning.platforms, model.policy.policy_spec, planning.operands.node_labels, planning.status.policy_status
(the
status and its Events).  Apply: kube.labelling,
kube.reporting.  Writes happen only when the plan differs from what is
observed, so a quiet cluster sees zero writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
from collections.abc import Mapping

from ocp_gpu import metrics
from ocp_gpu.kube import adopting, applying, labelling, owning, reading, reporting, requesting, upgrading
from ocp_gpu.model import (
    custom_resources,
    imagestream_tags,
    labels,
    nodes,
    nvidia_driver_spec,
    operand_types,
    upgrade_observations,
)
from ocp_gpu.model.policy import (
    fields,
    gpu_cluster,
    policy_checks,
    policy_parser,
    policy_problems,
    policy_spec,
)
from ocp_gpu.planning import delivery, platforms
from ocp_gpu.planning.drivers import driver_check, driver_coverage, driver_plan, driver_pools, driver_strategy
from ocp_gpu.planning.operands import (
    gpu_handover,
    mig_planning,
    node_labels,
    takeover,
    workload_moves,
    workloads,
)
from ocp_gpu.planning.status import conditions, operator_health, policies, policy_status, status_writes
from ocp_gpu.planning.upgrades import pool_upgrades, upgrade_preflight
from ocp_gpu.reconcilers import (
    cluster_view,
    driver_reconciler,
    gpu_clusters,
    monitoring_reconciler,
    nvidia_drivers,
    operand_reconciler,
    runtime,
    scheduling,
    vgpu_manager_reconciler,
)
from ocp_gpu.rendering.operands import operand_catalog, vgpu_manager

logger = logging.getLogger("ocp_gpu.reconcile")

RETRY_FAILED_WRITES_S = 30.0
# How often a node waiting to hand its GPUs over (device plugin <-> DRA) has its pods read again.
HANDOVER_RECHECK_S = 5.0


async def reconcile_forever(rt: runtime.Runtime, coalesce_s: float) -> None:
    """Wait for changes, let a burst settle (scheduling.Coalescer) unless one is urgent, reconcile;
    forever."""
    await rt.view.listed.wait()
    coalescer = scheduling.Coalescer(coalesce_s)
    # What the last pass applied, for a pass woken by rollout progress alone to reuse.
    last: AppliedPass | None = None
    while True:
        await rt.scheduler.wake.wait()
        await coalescer.settle(rt.scheduler.urgent)
        await coalescer.settle_progress(rt.scheduler.substantive, scheduling.PROGRESS_WINDOW_S)
        changes = rt.scheduler.take_changes()
        metrics.reconciliations.inc()
        try:
            last = await reconcile_once(rt, changes, datetime.datetime.now(datetime.UTC), last)
        except requesting.ApiException as error:
            last = None
            # NB: str(ApiException) carries every HTTP header; the apiserver's message is enough.
            metrics.reconciliation_failures.inc()
            logger.error(
                "reconcile pass failed: %s; retrying everything shortly", requesting.describe_error(error)
            )
            await asyncio.sleep(2)
            rt.scheduler.mark_everything()
        except Exception:
            last = None
            metrics.reconciliation_failures.inc()
            metrics.reconciliation_status.set(operator_health.ReconciliationStatus.OPERATOR_ERROR)
            logger.exception("reconcile pass failed; retrying everything shortly")
            await asyncio.sleep(2)
            rt.scheduler.mark_everything()
        coalescer.ended()
        rt.trimmer.worked()


@dataclasses.dataclass(frozen=True)
class AppliedPass:
    """What a full pass parsed, planned and applied from one ClusterPolicy object.

    A pass woken by rollout progress alone (operand pods turning Ready, DaemonSet pod counts,
    our own node label patches coming back: scheduling.Changes.progress_only) plans from nothing
    that changed: it reuses this and only judges readiness and writes the status again. NB: at
    1,000 nodes start-up is about a hundred such passes while pods come up, and planning the
    drivers over every node in each was most of the main pass's CPU (issue 13, start-up CPU).
    """

    # The policy object the pass planned from: another spec (or object) means a full pass.
    active: custom_resources.PolicyObject
    policy: policy_spec.Policy
    problems: list[policy_problems.PolicyProblem]
    detected: platforms.Platform
    outcome: driver_reconciler.DriverOutcome | None
    stack: dict[str, operand_reconciler.OperandOutcome]
    watching: monitoring_reconciler.MonitoringOutcome | None
    label_errors: dict[str, str]
    unsupported: str
    # NVIDIA's GPUClusters' standing this pass (the accepted one's DRA driver is in `policy`).
    gpu_clusters: tuple[gpu_cluster.GpuClusterDecision, ...] = ()
    # The ClusterPolicy's spec has no error (with one, nothing was applied).
    policy_valid: bool = True


async def reconcile_once(
    rt: runtime.Runtime, changes: scheduling.Changes, now: datetime.datetime, last: AppliedPass | None = None
) -> AppliedPass | None:
    """One pass; what it applied (None: no active policy), for the next pass to reuse if it may."""
    # What this pass plans from: the view as it is now, frozen (the watches go on meanwhile).
    seen = rt.view.snapshot()
    if not changes.progress_only:
        # NB: from NFD's and the MIG manager's node labels: no progress changes them (our own
        # label patches coming back change only the labels this operator writes).
        metrics.gpu_nodes.set(sum(1 for facts in seen.node_facts.values() if facts.is_gpu_node))
        metrics.has_nfd_labels.set(
            operator_health.has_nfd_labels(facts.labels for facts in seen.node_facts.values())
        )
        mig_states = mig_planning.state_counts({n: facts.labels for n, facts in seen.node_facts.items()})
        for state, count in mig_states.items():
            metrics.mig_config_nodes.labels(state=state).set(count)
    selection = policies.select_active_policy(
        [policies.PolicyRef(p.name, p.created, p.uid) for p in seen.policies.values()]
    )
    if changes.policies or changes.everything:
        for name, message in selection.ignored.items():
            ignored = seen.policies[name]
            if policy_status.ready_message(ignored.status) != message:
                # A second ClusterPolicy (or a new reason to ignore it): say so once, loudly.
                logger.warning("ClusterPolicy %s ignored: %s", name, message)
                await asyncio.to_thread(
                    reporting.post_event,
                    rt.api_client,
                    ignored.ref(),
                    "ClusterPolicyIgnored",
                    conditions.bounded_message(message),
                    "Warning",
                )
            await _write_status_if_changed(rt, ignored, policy_status.ignored_status(message), now)
    if selection.active != rt.cache.active_policy:
        # Deleting the active policy hands over to the next oldest: worth a line in the log.
        logger.info(
            "active ClusterPolicy: %s (was %s)", selection.active or "none", rt.cache.active_policy or "none"
        )
        rt.cache.active_policy = selection.active
    if selection.active is None:
        # No ClusterPolicy: nothing is deployed and no node is labelled.
        rt.scheduler.set_upgrade_policy(None)
        metrics.reconciliation_status.set(operator_health.ReconciliationStatus.POLICY_UNAVAILABLE)
        if seen.gpu_clusters:
            # A GPUCluster waits for a ClusterPolicy (its driver and toolkit come first): it says so.
            await gpu_clusters.report(
                rt,
                gpu_clusters.decide(seen.gpu_clusters, None, None, rt.env),
                policy_name=None,
                policy_valid=True,
                unready_nodes=None,
                apply_errors={},
                now=now,
            )
        return None
    active = seen.policies[selection.active]
    if (
        changes.progress_only
        and last is not None
        and last.active.is_same_but_status(active)
        and not rt.cache.nvidia_driver_mode
    ):
        # Rollout progress only: the plan and what was applied stand; only readiness moved.
        # NB: not with NVIDIADriver pools: their statuses count ready driver pods, written by
        # the driver half of the pass (reconcilers/nvidia_drivers.py).
        applied = last
    else:
        applied = await _apply_policy(rt, seen, changes, active, now)
    await _report(rt, active, applied, now)
    return applied


async def _apply_policy(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    changes: scheduling.Changes,
    active: custom_resources.PolicyObject,
    now: datetime.datetime,
) -> AppliedPass:
    """Parse and check the active policy; apply the drivers, node labels, operands, monitoring."""
    policy = policy_parser.parse_policy(active.spec)
    problems = policy_checks.validate_policy(policy, rt.env)
    spec_errors = "; ".join(
        f"{p.field}: {p.message}" for p in problems if p.severity is policy_problems.Severity.ERROR
    )
    if spec_errors != rt.cache.logged_spec_errors:
        # Logged once per change, not every pass (the status and an Event carry it too).
        if spec_errors:
            logger.warning(
                "ClusterPolicy %s has an invalid spec (nothing is applied or deleted): %s",
                active.name,
                conditions.bounded_message(spec_errors),
            )
        elif rt.cache.logged_spec_errors:
            logger.info("ClusterPolicy %s: the spec is valid again", active.name)
        rt.cache.logged_spec_errors = spec_errors
    detected = platforms.detect_platform(seen.api_groups)

    errors = [p for p in problems if p.severity is policy_problems.Severity.ERROR]
    # NVIDIA's GPUClusters: the one accepted beside this ClusterPolicy brings its DRA driver
    # (reconcilers/gpu_clusters.py); from here on every part of the pass applies that.
    decisions = gpu_clusters.decide(seen.gpu_clusters, active.name, policy, rt.env)
    policy = gpu_clusters.effective_policy(policy, decisions)
    auto_upgrade = policy.driver.upgrade_policy.auto_upgrade if not errors and policy.driver.enabled else None
    # NVIDIADriver pools: each pool's nodes by its own autoUpgrade (planning/upgrades/pool_upgrades.py).
    pool_auto_upgrade = (
        {
            driver_pools.owner_label_value(driver.name): nvidia_driver_spec.pool_auto_upgrade(
                active.spec, driver.spec
            )
            for driver in seen.nvidia_drivers.values()
        }
        if auto_upgrade is not None and nvidia_driver_spec.is_mode_enabled(active.spec)
        else {}
    )
    mig_default = policy.mig_manager.config_default if not errors and policy.mig_manager.enabled else None
    # The deploy labels of the operands enabled that take every GPU node (the DRA driver's).
    enabled_labels = (
        None
        if errors
        else frozenset(
            operand.deploy_label
            for operand in operand_catalog.OPERANDS
            if operand.deploy_on is operand_types.DeployOn.WHILE_ENABLED and operand.is_enabled(policy)
        )
    )

    async def drivers() -> driver_reconciler.DriverOutcome | None:
        if errors:
            # NB: with a spec error nothing is applied or deleted: what runs keeps running.
            return None
        rt.cache.nvidia_driver_mode = nvidia_driver_spec.is_mode_enabled(active.spec)
        if policy.driver.enabled and rt.cache.nvidia_driver_mode:
            # driver.useNvidiaDriverCRD: each NVIDIADriver deploys its pool's drivers
            return await nvidia_drivers.reconcile_nvidia_drivers(
                rt, seen, active.ref(), active.spec, policy, detected, now
            )
        found = await driver_reconciler.reconcile_drivers(rt, seen, active.ref(), policy, detected, now)
        await nvidia_drivers.report_disabled(rt, active.name, now)
        return found

    # Each GPU node's workload (planning/operands/workloads.py); None (a spec error): each keeps its stack.
    sandbox = None if errors else policy.sandbox_workloads
    workload_choices = _workload_choices(seen, sandbox)

    async def labelled() -> tuple[dict[str, str], list[policy_problems.PolicyProblem]]:
        # A node leaving a stack waits for the pods holding its GPUs (or drains them, as the upgrade does).
        moves = await _reconcile_moves(rt, seen, workload_choices, policy.driver.upgrade_policy, now)
        label_errors = await _reconcile_node_labels(
            rt,
            seen,
            changes,
            auto_upgrade,
            pool_auto_upgrade,
            mig_default,
            enabled_labels,
            {name: workloads.WorkloadChoice(step.workload) for name, step in moves.items()},
        )
        return label_errors, _workload_problems(workload_choices, moves)

    async def operands() -> tuple[
        dict[str, operand_reconciler.OperandOutcome], monitoring_reconciler.MonitoringOutcome | None
    ]:
        if errors:
            return {}, None
        # The operator's monitoring objects refer to no operand's: both at once, and the vGPU
        # manager's per-key DaemonSets (planned as the driver's) beside the generic operands.
        stack, monitored, vgpu = await asyncio.gather(
            operand_reconciler.reconcile_operands(
                rt, seen, active.ref(), _still_deployed(policy, seen, enabled_labels), detected
            ),
            monitoring_reconciler.reconcile_monitoring(rt, seen, active.ref(), policy, detected),
            vgpu_manager_reconciler.reconcile_vgpu_managers(rt, seen, active.ref(), policy, detected),
        )
        stack[vgpu_manager.OPERAND.name] = operand_reconciler.OperandOutcome(
            enabled=vgpu.enabled, problem=vgpu.problem, errors=vgpu.errors
        )
        return stack, monitored

    # NB: the drivers, the node labels (after the workload moves) and the operands at once: none
    # refers to another's objects
    # (on each node the validation markers order the pods; a DaemonSet's pods schedule as its nodes
    # get their labels), and a takeover adopts in each of them (kube/applying.apply_all says why
    # that is worth it).  At thousands of nodes the labels take seconds: the DaemonSets no longer
    # wait for them.
    outcome, (label_errors, workload_problems), (stack, watching) = await asyncio.gather(
        drivers(), labelled(), operands()
    )
    if outcome is not None and outcome.problem is not None:
        problems = [*problems, outcome.problem]
    # NB: once each: the device plugin, the MPS control daemon and GFD read one ConfigMap.
    problems = [*problems, *dict.fromkeys(o.problem for o in stack.values() if o.problem is not None)]
    if watching is not None:
        # The monitoring objects' write failures are reported with the others'.
        label_errors = {**label_errors, **watching.errors}
    # NB: after the operands' problems: the Error's message is bounded, the spec's own come first.
    problems = [*problems, *workload_problems]
    # NB: upgrades run in their own loop (reconcilers/upgrade_reconciler.py), off this pass's latency path.
    upgrades_allowed = (
        not errors and outcome is not None and outcome.problem is None and policy.driver.enabled
    )
    rt.scheduler.set_upgrade_policy(
        pool_upgrades.UpgradeRules(policy.driver.upgrade_policy, outcome.upgrade_pools)
        if upgrades_allowed and outcome is not None
        else None
    )
    unsupported = fields.unsupported_settings(active.spec)
    return AppliedPass(
        active=active,
        policy=policy,
        problems=problems,
        detected=detected,
        outcome=outcome,
        stack=stack,
        watching=watching,
        label_errors=label_errors,
        unsupported=(fields.describe(unsupported, conditions.CONDITION_MESSAGE_LIMIT) if unsupported else ""),
        gpu_clusters=decisions,
        policy_valid=not errors,
    )


def _preflight(
    rt: runtime.Runtime, seen: cluster_view.ViewSnapshot, applied: AppliedPass
) -> conditions.Condition | None:
    """UpgradePreflight while OpenShift applies an upgrade (DTK and precompiled modes on OpenShift;
    planning/upgrade_preflight)."""
    if upgrade_preflight.upgrading_to(delivery.present(seen.cluster_version)) is None:
        return None  # the usual case: nothing more to look at
    settings = driver_plan.settings_for_policy(applied.policy, applied.detected, rt.env)
    if (
        isinstance(settings, policy_problems.PolicyProblem)
        or settings.strategy is driver_strategy.Strategy.VANILLA
    ):
        return None
    precompiled = settings.strategy is driver_strategy.Strategy.PRECOMPILED
    stream = reading.image_stream_singleton(seen.dtk_imagestream)
    return upgrade_preflight.plan_preflight(
        delivery.present(seen.cluster_version),
        stream if isinstance(stream, imagestream_tags.ImageStream) else None,
        (
            str(facts.labels.get(labels.OSTREE_VERSION, ""))
            for facts in seen.node_facts.values()
            if facts.is_gpu_node
        ),
        settings.driver_image,
        kernels=upgrade_preflight.kernels_of_nodes(seen.node_facts.values()) if precompiled else None,
        unpullable={
            pull.image
            for pull in seen.driver_pod_pulls.values()
            if pull.strategy == reading.PREPULL_PULL and pull.pull_failing
        },
    )


async def _report(
    rt: runtime.Runtime, active: custom_resources.PolicyObject, applied: AppliedPass, now: datetime.datetime
) -> None:
    """Judge readiness from the view as it is now, and write the status (and its Events) if it
    changed; `active` as the watch shows it now (its status may be newer than `applied`'s)."""
    # NB: readiness is judged from the view as it is after this pass's writes, not as it began.
    seen = rt.view.snapshot()
    outcome, stack, watching = applied.outcome, applied.stack, applied.watching
    plan = outcome.plan if outcome is not None else None
    coverage = _coverage(seen, plan)
    apply_errors = dict(applied.label_errors)
    for operand in (outcome, *stack.values()):
        apply_errors |= dict(operand.errors) if operand else {}
    if not apply_errors:
        await _take_stock_of_leftovers(rt, active.ref())
    unready_nodes, rolling_out = (
        operand_reconciler.operand_readiness(rt, seen, applied.policy) if stack else ({}, frozenset())
    )
    outcome_of_pass = policy_status.PassOutcome(
        namespace=rt.namespace,
        platform=applied.detected.value,
        problems=applied.problems,
        apply_errors=apply_errors,
        plan=plan,
        coverage=coverage,
        summary=policy_status.plan_driver_summary(plan, coverage, seen.driver_daemonsets),
        # Per operand, the GPU nodes that should run it and have no Ready pod of it yet.
        unready_nodes=unready_nodes,
        rolling_out=rolling_out,
        update_on_delete=applied.policy.daemonsets.update_strategy is policy_spec.UpdateStrategy.ON_DELETE,
        gpu_nodes=sum(1 for facts in seen.node_facts.values() if facts.is_gpu_node),
        monitoring_problems=[problem.message for problem in watching.problems] if watching else [],
        unsupported=applied.unsupported,
        mig_failed=mig_planning.failed_nodes({name: facts.labels for name, facts in seen.node_facts.items()}),
        preflight=_preflight(rt, seen, applied),
        previous_template=_previous_template(rt, seen),
        migrated_from=rt.cache.migrated_from if rt.cache.leftovers_done_for == active.uid else None,
    )
    status = policy_status.plan_active_status(outcome_of_pass)
    if status.health is not None:
        metrics.reconciliation_status.set(status.health)
    if status.state == policy_status.STATE_READY:
        metrics.reconciliation_last_success.set(now.timestamp())
    if apply_errors:
        # A failed write is retried on the next change, and at the latest after this long.
        rt.scheduler.poke_after(RETRY_FAILED_WRITES_S)
    previous_messages = policy_status.true_condition_messages(active.status)
    await _write_status_if_changed(rt, active, status, now)
    for event in policy_status.plan_status_events(status, previous_messages):
        await asyncio.to_thread(
            reporting.post_event, rt.api_client, active.ref(), event.reason, event.message, event.type
        )
    if applied.gpu_clusters:
        dra = operand_catalog.DRA_DRIVER.name
        dra_outcome = stack.get(dra)
        await gpu_clusters.report(
            rt,
            applied.gpu_clusters,
            policy_name=active.name,
            policy_valid=applied.policy_valid,
            # NB: judged only where the operand was applied this pass (not with a spec error).
            unready_nodes=outcome_of_pass.unready_nodes.get(dra, []) if dra_outcome is not None else None,
            apply_errors=dict(dra_outcome.errors) if dra_outcome is not None else {},
            now=now,
        )


async def _reconcile_node_labels(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    changes: scheduling.Changes,
    auto_upgrade: bool | None,
    pool_auto_upgrade: Mapping[str, bool],
    mig_default: str | None,
    enabled_labels: frozenset[str] | None,
    workload_choices: Mapping[nodes.NodeName, workloads.WorkloadChoice],
) -> dict[str, str]:
    """Patch the labels (and upgrade annotation) of every changed node that needs it; errors by node.

    A node whose GPUs change hands (device plugin <-> DRA) has its pods read first, and is planned
    again every HANDOVER_RECHECK_S until its GPU pods are done (planning/operands/gpu_handover.py:
    no watch covers workload pods)."""
    names = set(seen.node_facts.keys() if (changes.everything or changes.policies) else changes.nodes)
    names |= rt.cache.handovers_waiting
    # and every node moving between stacks (its GPU pods going is no node change)
    names |= {name for name, facts in seen.node_facts.items() if _moving(facts, workload_choices)}
    moving = {
        name: node_labels.handovers(
            facts.labels, operand_catalog.DEPLOY_LABELS, enabled_labels, _workload(facts, workload_choices)
        )
        for name in names
        if (facts := seen.node_facts.get(name)) is not None
    }
    pods = await _gpu_pods(rt, [name for name, moves in moving.items() if moves])
    patches: dict[nodes.NodeName, tuple[node_labels.LabelPatch, node_labels.LabelPatch]] = {}
    waiting: set[nodes.NodeName] = set()
    for name in names:
        facts = seen.node_facts.get(name)
        if facts is None:
            continue
        label_patch = (
            node_labels.plan_node_labels(
                facts.labels,
                operand_catalog.DEPLOY_LABELS,
                mig_default,
                enabled_labels,
                gpu_pods=pods.get(name),
                workload=_workload(facts, workload_choices),
            )
            or {}
        )
        if any(gpu_handover.is_held(move, pods.get(name)) for move in moving.get(name, ())):
            # Still held by its GPU pods: planned again later.
            waiting.add(name)
        # NB: an NVIDIADriver pool's node by the pool's autoUpgrade (None stays None: nothing changes).
        node_auto_upgrade = (
            auto_upgrade
            if auto_upgrade is None
            else pool_auto_upgrade.get(facts.labels.get(labels.NVIDIA_DRIVER_OWNER, ""), auto_upgrade)
        )
        annotation_patch = (
            node_labels.plan_upgrade_annotation(facts.labels, facts.annotations, node_auto_upgrade) or {}
        )
        if label_patch or annotation_patch:
            patches[name] = (label_patch, annotation_patch)
    for name in waiting - rt.cache.handovers_waiting:
        logger.info(
            "node %s: the GPUs change hands once its GPU pods are done (%s)", name, pods.get(name, "unread")
        )
    rt.cache.handovers_waiting = waiting
    if waiting:
        rt.scheduler.poke_after(HANDOVER_RECHECK_S)
    # NB: before the writes: a node's echo can arrive before its patch's answer.
    rt.cache.label_echoes.update(patches)
    results = await runtime.in_threads(
        functools.partial(labelling.patch_node_labels, rt.api_client, node, *patch)
        for node, patch in patches.items()
    )
    errors: dict[str, str] = {}
    for node, result in zip(patches, results, strict=True):
        if isinstance(result, Exception):  # one node's failure never blocks the others
            rt.cache.label_echoes.pop(node, None)
            errors[node] = requesting.describe_error(result)
            logger.warning("could not label node %s: %s", node, errors[node])
    return errors


def _still_deployed(
    policy: policy_spec.Policy, seen: cluster_view.ViewSnapshot, enabled_labels: frozenset[str] | None
) -> policy_spec.Policy:
    """The policy the operands are applied from: the DRA driver switched off stays deployed while a
    node still waits for its claims to end (planning/operands/gpu_handover.owners_still_holding).

    NB: only the operands are applied from it; the status judges readiness by the policy itself,
    so a switched-off DRA driver is never waited for."""
    holding = gpu_handover.owners_still_holding(
        operand_catalog.DEPLOY_LABELS.exclusive,
        enabled_labels,
        (facts.labels for facts in seen.node_facts.values()),
    )
    if operand_catalog.DRA_DRIVER.deploy_label not in holding:
        return policy
    return dataclasses.replace(policy, dra_driver=dataclasses.replace(policy.dra_driver, enabled=True))


async def _gpu_pods(
    rt: runtime.Runtime, names: list[nodes.NodeName]
) -> dict[nodes.NodeName, gpu_handover.GpuPods]:
    """The GPU pods of each node named (one LIST per node); a node whose pods could not be read
    is left out (its handover waits)."""
    if not names:
        return {}
    listed = await runtime.in_threads(
        functools.partial(upgrading.list_pods_on_node, rt.api_client, name) for name in names
    )
    claims = rt.view.resource_claims if rt.view.resource_claim_api else None
    found: dict[nodes.NodeName, gpu_handover.GpuPods] = {}
    for name, result in zip(names, listed, strict=True):
        if isinstance(result, Exception):
            logger.warning("could not list the pods of node %s: %s", name, requesting.describe_error(result))
        else:
            found[name] = gpu_handover.gpu_pods(result, claims)
    return found


def _workload_choices(
    seen: cluster_view.ViewSnapshot, sandbox: policy_spec.SandboxWorkloadsSpec | None
) -> dict[nodes.NodeName, workloads.WorkloadChoice]:
    """Each GPU node's workload; with no valid policy (`sandbox` None), the stack it runs now."""
    choices: dict[nodes.NodeName, workloads.WorkloadChoice] = {}
    for name, facts in seen.node_facts.items():
        if not facts.is_gpu_node:
            continue
        if sandbox is None:
            # Nothing is known of the policy: every node keeps the stack it runs.
            current = workloads.stack_of(facts.labels, operand_catalog.DEPLOY_LABELS.vm)
            choices[name] = workloads.WorkloadChoice(current)
        else:
            choices[name] = workloads.select_workload(name, facts.labels, sandbox)
    return choices


def _moving(facts: nodes.NodeFacts, choices: Mapping[nodes.NodeName, workloads.WorkloadChoice]) -> bool:
    """The node's workload is not the stack its labels show (or a cordon or drain timer of a move is
    still on it)."""
    choice = choices.get(facts.name)
    current = workloads.stack_of(facts.labels, operand_catalog.DEPLOY_LABELS.vm)
    pending = choice is not None and choice.workload is not None and choice.workload is not current
    return pending or any(
        key in facts.annotations for key in (labels.WORKLOAD_MOVE_CORDON, labels.WORKLOAD_MOVE_DRAIN_START)
    )


# Seconds between looks at a node waiting to leave its stack (the pods holding its GPUs going
# is no event the operator watches).
MOVE_RECHECK_S = 5.0


async def _reconcile_moves(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    choices: Mapping[nodes.NodeName, workloads.WorkloadChoice],
    policy: policy_spec.UpgradePolicy,
    now: datetime.datetime,
) -> dict[nodes.NodeName, workload_moves.MoveStep]:
    """Each GPU node's step toward its workload (planning/operands/workload_moves.py): the cordon,
    the evictions, the drain timer and their Events done here; a node that must wait keeps its
    deploy labels."""
    steps: dict[nodes.NodeName, workload_moves.MoveStep] = {}
    waiting = False
    for name, choice in choices.items():
        facts = seen.node_facts[name]
        if not _moving(facts, choices):
            steps[name] = workload_moves.MoveStep(choice.workload)
            continue
        current = workloads.stack_of(facts.labels, operand_catalog.DEPLOY_LABELS.vm)
        leaving = choice.workload not in (None, current)
        try:
            pods = (
                await asyncio.to_thread(upgrading.list_pods_on_node, rt.api_client, name) if leaving else ()
            )
        except requesting.ApiException as error:
            # Unknown pods: hold the move (never under a pod holding the GPUs), try again.
            logger.warning("could not list the pods on node %s: %s", name, requesting.describe_error(error))
            steps[name], waiting = workload_moves.MoveStep(None), True
            continue
        step = workload_moves.plan_move(
            name,
            choice.workload,
            current,
            pods,
            policy,
            unschedulable=facts.unschedulable,
            cordoned_for_move=labels.WORKLOAD_MOVE_CORDON in facts.annotations,
            drain_started=upgrade_observations.parse_timestamp(
                facts.annotations.get(labels.WORKLOAD_MOVE_DRAIN_START)
            ),
            now=now,
        )
        steps[name] = step
        waiting = waiting or (step.workload is None and leaving)
        await _apply_move(rt, name, choice.workload, step, now)
    if waiting:
        rt.scheduler.poke_after(MOVE_RECHECK_S)
    return steps


async def _apply_move(
    rt: runtime.Runtime,
    node: str,
    target: workloads.Workload | None,
    step: workload_moves.MoveStep,
    now: datetime.datetime,
) -> None:
    """The cordon, drain timer and evictions of one node's move (the upgrade's own calls), each
    with an Event."""
    involved = {"apiVersion": "v1", "kind": "Node", "name": node}
    # The drain timer goes in the same patch as the cordon (or its lifting) when there is one.
    timer: dict[str, str | None] = {}
    if step.start_drain_timer:
        timer[labels.WORKLOAD_MOVE_DRAIN_START] = upgrade_observations.format_timestamp(now)
    elif step.clear_drain_timer:
        timer[labels.WORKLOAD_MOVE_DRAIN_START] = None
    try:
        if step.cordon:
            await asyncio.to_thread(
                upgrading.cordon,
                rt.api_client,
                node,
                True,
                {labels.WORKLOAD_MOVE_CORDON: str(target), **timer},
            )
            timer = {}
            await _move_event(rt, involved, f"cordoned node {node} to move it to {target} (drain.enable)")
        if timer and not step.uncordon:
            await asyncio.to_thread(upgrading.annotate, rt.api_client, node, timer)
        for pod in step.evict:
            if not await asyncio.to_thread(
                upgrading.evict_pod, rt.api_client, pod.ref.namespace, pod.ref.name, pod.ref.uid
            ):
                # A PodDisruptionBudget refuses for now: the next look tries again.
                continue
            said = f"evicted GPU pod {pod.ref} from node {node} to move it to {target}"
            await _move_event(rt, involved, said)
        if step.uncordon:
            await asyncio.to_thread(
                upgrading.cordon, rt.api_client, node, False, {labels.WORKLOAD_MOVE_CORDON: None, **timer}
            )
            await _move_event(rt, involved, f"uncordoned node {node}: it runs the {target} stack")
    except requesting.ApiException as error:
        # Retried on the next look (a pending move pokes the loop).
        logger.warning("moving node %s to %s: %s", node, target, requesting.describe_error(error))


# The Events of a node's move between stacks (on the Node).
MOVE_EVENT_REASON = "GPUWorkloadMove"


async def _move_event(rt: runtime.Runtime, involved: Mapping[str, str], message: str) -> None:
    logger.info("%s", message)
    await asyncio.to_thread(
        reporting.post_event, rt.api_client, involved, MOVE_EVENT_REASON, message, "Normal"
    )


def _workload_problems(
    choices: Mapping[nodes.NodeName, workloads.WorkloadChoice],
    moves: Mapping[nodes.NodeName, workload_moves.MoveStep],
) -> list[policy_problems.PolicyProblem]:
    """The workload labels named back (status and Event): one the operator cannot follow is an
    error, one it ignores (sandbox workloads off) or a move waiting on GPU pods a warning, a move
    whose drain outlasted its timeout an error."""
    found = []
    for name in sorted(choices):
        choice, step = choices[name], moves.get(name)
        if choice.problem is not None:
            found.append(
                policy_problems.PolicyProblem(
                    field=f"node {name} label {labels.GPU_WORKLOAD_CONFIG}",
                    message=choice.problem,
                    fix=choice.fix,
                    severity=policy_problems.Severity.WARNING
                    if choice.workload is not None
                    else policy_problems.Severity.ERROR,
                )
            )
        if step is not None and step.waiting is not None:
            found.append(
                policy_problems.PolicyProblem(
                    field=f"node {name} label {labels.GPU_WORKLOAD_CONFIG}",
                    message=step.waiting,
                    fix=step.fix,
                    severity=(
                        policy_problems.Severity.ERROR if step.failed else policy_problems.Severity.WARNING
                    ),
                )
            )
    return found


def _workload(
    facts: nodes.NodeFacts, choices: Mapping[nodes.NodeName, workloads.WorkloadChoice]
) -> workloads.Workload | None:
    """The workload whose labels the node gets (container for a node that is not a GPU node)."""
    choice = choices.get(facts.name)
    return workloads.Workload.CONTAINER if choice is None else choice.workload


def _coverage(
    seen: cluster_view.ViewSnapshot, plan: driver_plan.DriverPlan | None
) -> driver_coverage.DriverCoverage | None:
    if plan is None:
        return None
    return driver_coverage.plan_driver_coverage(
        {name: facts.labels for name, facts in seen.node_facts.items()}, plan.desired
    )


async def _take_stock_of_leftovers(rt: runtime.Runtime, owner: Mapping[str, str]) -> None:
    """Once per ClusterPolicy, after a pass that adopted another operator's objects and applied
    everything: that operator's objects ocp-gpu renders nothing for, deleted where the policy owns
    them (planning/takeover.plan_leftovers), listed in an Event and status.migratedFrom.

    NB: never on a cluster where nothing was adopted (a fresh install reads nothing more)."""
    uid = owner["uid"]
    if not rt.cache.adopted or rt.cache.leftovers_done_for == uid:
        return
    kinds = owning.watched_kinds(rt.view.api_groups)
    # NB: the LISTs and the deletions in threads, together: the first status (and so `ready`) waits
    # for this, and one after another they were seconds of a takeover under load.
    listed = await runtime.in_threads(
        functools.partial(adopting.list_foreign, rt.api_client, rt.namespace, kind) for kind in kinds
    )
    failed = next((result for result in listed if isinstance(result, Exception)), None)
    if failed is not None:  # a failed read: try again on a later pass, delete nothing
        logger.warning(
            "could not list what the previous operator left: %s", requesting.describe_error(failed)
        )
        return
    found = [item for result in listed if not isinstance(result, Exception) for item in result]
    plan = takeover.plan_leftovers(found, uid, rt.view.owned.keys())
    gone = await runtime.in_threads(
        functools.partial(applying.delete_foreign, rt.api_client, item, kinds) for item in plan.delete
    )
    deleted: list[str] = []
    kept = list(plan.keep)
    for item, result in zip(plan.delete, gone, strict=True):
        if isinstance(result, Exception):
            kept.append((item, f"could not delete it: {requesting.describe_error(result)}"))
        else:
            deleted.append(item.describe())
    leftovers = takeover.Leftovers(delete=(), keep=tuple(kept))
    rt.cache.migrated_from = takeover.migrated_from(rt.cache.adopted, leftovers, deleted)
    rt.cache.leftovers_done_for = uid
    message = (
        f"took over {len(rt.cache.adopted)} object(s) another operator made; deleted {len(deleted)} it "
        f"left that "
        f"ocp-gpu renders nothing for (owned by this ClusterPolicy): {', '.join(deleted) or 'none'}; "
        f"left {len(kept)}: {', '.join(f'{item.describe()} ({why})' for item, why in kept) or 'none'}"
    )
    logger.info("migrated from another operator: %s", message)
    await asyncio.to_thread(
        reporting.post_event, rt.api_client, owner, "MigratedFromNVIDIA", message, "Normal"
    )


def _previous_template(rt: runtime.Runtime, seen: cluster_view.ViewSnapshot) -> str:
    """The driver pods on an older template of their DaemonSet that run its driver, described."""
    current = upgrading.current_revisions(rt.view.driver_revisions.values())
    revisions = {
        name: upgrade_observations.driver_revision(daemonset, current.get(name))
        for name, daemonset in seen.driver_daemonsets.items()
    }
    return driver_check.describe_previous_template(
        driver_check.on_previous_template(rt.view.driver_pods.values(), revisions)
    )


async def _write_status_if_changed(
    rt: runtime.Runtime,
    obj: custom_resources.PolicyObject,
    decided: policy_status.PolicyStatus,
    now: datetime.datetime,
) -> None:
    status = decided.wire()
    status["conditions"] = conditions.merge_conditions(
        decided.conditions, obj.status.get("conditions") or [], now, obj.generation
    )
    status["observedGeneration"] = obj.generation
    if all(obj.status.get(key) == value for key, value in status.items()):
        return
    clock = asyncio.get_running_loop().time()
    delay = status_writes.write_delay(obj.status, status, rt.cache.status_written_at.get(obj.name), clock)
    if delay > 0:
        # Rollout progress only: written with the next change or when the interval ends (a pass
        # that only judges readiness again, not a full one).
        rt.scheduler.poke_progress_after(delay)
        return
    await asyncio.to_thread(reporting.patch_policy_status, rt.api_client, obj.name, status)
    rt.cache.status_written_at[obj.name] = clock
    if obj.status.get("state") != status.get("state"):
        # One line per change of state: when a policy became ready (bench/migrate_from_nvidia.py reads it).
        logger.info(
            "ClusterPolicy %s: state %s (was %s)",
            obj.name,
            status.get("state"),
            obj.status.get("state") or "none",
        )
