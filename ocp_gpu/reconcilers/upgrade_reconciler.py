"""Driver upgrades, node by node: build the upgrade snapshot, plan one pass, apply it, record metrics.

Runs in its own loop, beside the main pass (reconcilers/cluster.py), so that its
work never delays a driver DaemonSet's creation.  A pass plans from one frozen snapshot of
the watches' view (node facts, driver and validator pods, ControllerRevisions, driver
DaemonSets: reconcilers/cluster_view.ClusterView.snapshot), taken as it begins; the only
reads a pass makes are the pods of the few nodes whose state needs them (wait, pod
deletion, drain) and no task of their own reads.  A pass
starts its nodes' writes as tasks (reconcilers/upgrade_tasks) and does not wait for them: the
next pass plans every node but those still in flux (planning/upgrade_pipeline).  A pass runs only when
something can need it: a driver DaemonSet has outdated pods
(updatedNumberScheduled < desiredNumberScheduled), a GPU node's upgrade label is
not `upgrade-done`, or the upgrade rules changed.  While nodes are in flight it
repeats every RECHECK_S, since timeouts only fire on a pass; once every node is
done it goes quiet (zero writes, zero reads).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
import time
import types
from collections.abc import Mapping, Sequence

from ocp_gpu import metrics
from ocp_gpu.kube import requesting, upgrade_gating, upgrading
from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.drivers import driver_coverage, driver_pools
from ocp_gpu.planning.upgrades import (
    pod_selection,
    pool_upgrades,
    upgrade_chain,
    upgrade_gate,
    upgrade_pipeline,
    upgrade_plan,
)
from ocp_gpu.planning.upgrades.pool_upgrades import UpgradeRules
from ocp_gpu.reconcilers import cluster_view, runtime, scheduling, upgrade_tasks

logger = logging.getLogger(labels.UPGRADE_LOGGER)

# How often a pass repeats while any node is mid-upgrade (NVIDIA requeues every 2 minutes);
# the env var overrides it (tests use short timeouts).
RECHECK_S = 10.0
RECHECK_ENV = "OCP_GPU_UPGRADE_RECHECK_SECONDS"
# Seconds a node waits in pod-restart-required for a current, Ready driver pod (default 600).
POD_RESTART_TIMEOUT_ENV = "OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS"
# Seconds a node waits in validation-required for Ready validator pods (default 600).
VALIDATION_TIMEOUT_ENV = "OCP_GPU_VALIDATION_TIMEOUT_SECONDS"
# A pass that raised is retried after this long.
RETRY_S = 2.0
# After a pass deleted or evicted pods, the next one reads the node's pods again this soon
# (no watch covers workload pods); doubling while they are still there, up to the recheck.
POLL_S = 0.25


def is_pass_needed(rt: runtime.Runtime, rules: UpgradeRules | None = None) -> bool:
    """Whether anything in the in-memory view can make an upgrade pass do something (autoUpgrade on).

    With `rules`, what only an NVIDIADriver pool whose upgrades are paused (or held) shows needs
    no pass: its outdated DaemonSet and its nodes stay so until its rules change, which is a
    pass of its own.

    NB: from the live view, not a snapshot: it decides whether to take one (and a pass), in one
    step with no await, so the watches cannot change what it reads meanwhile.
    """
    daemonsets = rt.view.driver_daemonsets.values()
    if any(
        ds.updated_number_scheduled < ds.desired_number_scheduled
        and (rules is None or rules.moves(driver_pools.pool_of(ds)))
        for ds in daemonsets
    ):
        # Some driver pod runs an outdated template.
        return True
    # A GPU node not yet labelled, or somewhere in the state machine (opted-out nodes never count).
    # NB: the label first: once every node is done this runs at each wake-up, over every node.
    return any(
        facts.labels.get(labels.UPGRADE_STATE) != UpgradeState.UPGRADE_DONE
        and driver_coverage.wants_driver(facts.labels)
        and (rules is None or rules.moves(facts.labels.get(labels.NVIDIA_DRIVER_OWNER)))
        for facts in rt.view.node_facts.values()
    )


async def upgrade_forever(rt: runtime.Runtime, coalesce_s: float) -> None:
    """Wait for a change (or the recheck timer), let a burst settle, run one upgrade pass; forever.

    A pass starts its nodes' writes and returns (reconcilers/upgrade_tasks); the nodes still
    being written, or not yet seen written, are left to a later pass.
    """
    await rt.view.listed.wait()
    recheck: float | None = None
    poll: float | None = None
    # The last pass started writes: one more pass once they are seen, so the metrics count the
    # labels as they are now (gpu_operator_nodes_upgrades_available agrees with `ocp-gpu status`).
    settle = False
    coalescer = scheduling.Coalescer(coalesce_s)
    pipeline = upgrade_tasks.Pipeline(rt, upgrading.Announcer(rt.api_client))
    # OLM's Upgradeable, said after each pass (written only when it changes; nothing without OLM).
    gate = upgrade_gating.UpgradeGate(rt.api_client, rt.namespace, rt.env)
    # The nodes' marks the last paused pass planned from, as the node view's count of their
    # changes (planning/paused_upgrades; None: the last pass was not paused).
    paused_seen: int | None = None
    try:
        while True:
            await scheduling.wait_event(rt.scheduler.upgrade_wake, recheck)
            # NB: while node tasks run, most wake-ups are their own writes coming back: a longer window.
            coalescer.window_s = upgrade_pipeline.BUSY_WINDOW_S if pipeline.active else coalesce_s
            await coalescer.settle(rt.scheduler.upgrade_urgent)
            rules_changed = rt.scheduler.take_upgrade_marks()
            rules = rt.scheduler.upgrade_policy
            # NB: paused, a pass only counts labels and removes an annotation: a driver or validator
            # pod changing moves nothing, so only a node's marks changing costs a pass.
            paused = rules is not None and not rules.auto_upgrade
            paused_now = rt.view.paused_marks_version if paused else None
            if paused_now is not None and not (rules_changed or settle) and paused_now == paused_seen:
                recheck = None
                await _say_upgradeable(rt, gate)
                continue
            if rules is None or not (
                rules_changed or settle or paused_now is not None or is_pass_needed(rt, rules)
            ):
                recheck = None
                if rules is not None:
                    # NB: no pass, but a driver DaemonSet's counters catching up after the last one
                    # (its status lags the labels) still turn Upgradeable back to True.
                    await _say_upgradeable(rt, gate)
                continue
            paused_seen = paused_now
            rt.trimmer.worked()
            try:
                plan, started = await reconcile_upgrades(
                    rt, rules, datetime.datetime.now(datetime.UTC), pipeline
                )
            except Exception:
                logger.exception("upgrade pass failed; retrying shortly")
                recheck = RETRY_S
                paused_seen = None
                continue
            finally:
                coalescer.ended()
            await _say_upgradeable(rt, gate)
            failed = pipeline.take_failed()
            settle = bool(started) or pipeline.active
            in_flight = any(
                node.state_after in upgrade_plan.IN_PROGRESS
                or node.state_after is UpgradeState.UPGRADE_REQUIRED
                for node in plan.nodes
                # NB: a paused pool's nodes wait for its policy to change, not for time.
                if not node.skipped and node.managed and not node.paused
            )
            base = float(rt.env.get(RECHECK_ENV, RECHECK_S))
            if upgrade_chain.waits_on_pods(plan, rules.default):
                # NB: a node's task reads its pods until the ones it removed are gone; past that
                # (a pod's long grace period, a PodDisruptionBudget) the passes read them.
                poll = POLL_S if poll is None else min(poll * 2, base)
            else:
                poll = None
            recheck = min(base, poll or base) if plan.auto_upgrade and (in_flight or failed) else None
            if pipeline.awaiting_echoes:
                # A write whose echo never comes (the label changed meanwhile) is given up on then.
                recheck = min(recheck or upgrade_pipeline.ECHO_LIMIT_S, upgrade_pipeline.ECHO_LIMIT_S)
    finally:
        await pipeline.close()


def plan_upgradeable(rt: runtime.Runtime) -> upgrade_gate.Upgradeable:
    """OLM's Upgradeable from the watches' view: the node labels and the driver DaemonSets' counters.

    NB: the live view, after the pass (its writes included), read in one step with no await.
    """
    return upgrade_gate.plan_upgradeable(
        {name: facts.labels for name, facts in rt.view.node_facts.items()},
        (
            upgrade_gate.OutdatedDaemonSet(ds.name, ds.desired_number_scheduled, ds.updated_number_scheduled)
            for ds in rt.view.driver_daemonsets.values()
            if ds.status_is_current
        ),
    )


async def _say_upgradeable(rt: runtime.Runtime, gate: upgrade_gating.UpgradeGate) -> None:
    if gate.idle:
        return  # no OLM, and the log said so: nothing to plan at each wake-up
    wanted = plan_upgradeable(rt)
    if not gate.enabled:
        gate.update(wanted)  # logs once that there is nothing to gate
        return
    if gate.says(wanted):
        return  # most wake-ups change nothing here: no thread, no request
    try:
        await asyncio.to_thread(gate.update, wanted)
    except Exception as error:  # a transport failure: said again after the next pass
        logger.warning("could not report Upgradeable to OLM: %s", requesting.describe_error(error))


def _with_env_timeouts(rules: UpgradePolicy, env: Mapping[str, str]) -> UpgradePolicy:
    """The operator's env may shorten or lengthen the pod-restart and validation timeouts (no CRD fields)."""
    restart = env.get(POD_RESTART_TIMEOUT_ENV, "").strip()
    if restart.isdigit():
        rules = dataclasses.replace(rules, pod_restart_timeout_seconds=int(restart))
    validation = env.get(VALIDATION_TIMEOUT_ENV, "").strip()
    if validation.isdigit():
        rules = dataclasses.replace(rules, validation_timeout_seconds=int(validation))
    return rules


async def reconcile_upgrades(
    rt: runtime.Runtime,
    given: UpgradePolicy | UpgradeRules,
    now: datetime.datetime,
    pipeline: upgrade_tasks.Pipeline,
) -> tuple[upgrade_plan.UpgradePlan, int]:
    """One pass: snapshot from the view, plan every node not in flux (each NVIDIADriver pool's
    under its own rules: planning/upgrades/pool_upgrades), start their writes (`pipeline`), set
    the metrics; and how many nodes' writes it started."""
    rules = pool_upgrades.as_rules(given).map(lambda policy: _with_env_timeouts(policy, rt.env))
    began = time.monotonic()
    in_flux = pipeline.in_flux()
    seen = rt.view.snapshot(upgrade=True)
    snap = await _snapshot(rt, seen, rules, frozenset(in_flux))
    plan = pool_upgrades.plan_pool_upgrades(snap, rules, now, in_flux)
    planned = time.monotonic()
    started = pipeline.start(
        plan,
        snap,
        upgrade_plan.PassInputs(snap, rules.default, now, plan.budget, node_policies=plan.node_policies),
    )
    # Where a pass's time goes (`ocp-gpu run -v`).
    logger.debug(
        "upgrade pass: read and planned in %.3f s, %d node(s) in flux, %d node(s) started (%d on a "
        "slot freed in the pass)",
        planned - began,
        len(in_flux),
        started,
        len(plan.after_others),
    )
    counts = upgrade_plan.summarize(plan)
    metrics.auto_upgrade_enabled.set(counts.auto_upgrade_enabled)
    metrics.driver_auto_upgrade_enabled.set(counts.auto_upgrade_enabled)
    metrics.upgrades_in_progress.set(counts.in_progress)
    metrics.upgrades_done.set(counts.done)
    metrics.upgrades_failed.set(counts.failed)
    metrics.upgrades_available.set(counts.available)
    metrics.upgrades_pending.set(counts.pending)
    return plan, started


async def _list_pods(
    rt: runtime.Runtime, seen: cluster_view.ViewSnapshot, wanted: Sequence[NodeName]
) -> dict[NodeName, tuple[upgrade_observations.WorkloadPod, ...]]:
    """The pods of these nodes; a node whose list failed is left out (it alone waits for the next pass).

    Most of the nodes (an upgrade with no parallel limit, at scale): one paged LIST of every
    bound pod instead of a LIST per node; if it fails, every wanted node waits.
    """
    if upgrade_chain.reads_every_pod(len(wanted), len(seen.node_facts)):
        try:
            return await asyncio.to_thread(upgrading.list_pods_on_nodes, rt.api_client, wanted)
        except Exception as error:
            logger.warning(
                "could not list the pods of %d nodes: %s", len(wanted), requesting.describe_error(error)
            )
            return {}
    listed = await runtime.in_threads(
        functools.partial(upgrading.list_pods_on_node, rt.api_client, name) for name in wanted
    )
    pods: dict[NodeName, tuple[upgrade_observations.WorkloadPod, ...]] = {}
    for name, result in zip(wanted, listed, strict=True):
        if isinstance(result, Exception):
            logger.warning("could not list the pods of node %s: %s", name, requesting.describe_error(result))
        else:
            pods[name] = result
    return pods


async def _snapshot(
    rt: runtime.Runtime, seen: cluster_view.ViewSnapshot, rules: UpgradeRules, frozen: frozenset[NodeName]
) -> upgrade_observations.UpgradeSnapshot:
    """The upgrade snapshot from the pass's snapshot of the view, plus the pods of the nodes that
    need them (but the `frozen` ones: not planned this pass)."""
    mine = (
        pod
        for pod in seen.driver_pods.values()
        if pod_selection.is_driver_pod(dict(pod.selector_labels), rt.cache.nvidia_driver_mode)
    )
    nodes = upgrade_observations.upgrade_nodes(seen.node_facts.values(), mine)
    pods = await _list_pods(
        rt,
        seen,
        tuple(name for name in pool_upgrades.nodes_needing_pods(nodes, rules) if name not in frozen),
    )
    # NB: a validator DaemonSet whose pods are not created yet still means "validation is coming".
    deployed = bool(seen.validator_pods) or await asyncio.to_thread(
        upgrading.validator_daemonset_exists, rt.api_client, rt.namespace
    )
    return upgrade_observations.upgrade_snapshot(
        nodes,
        seen.driver_daemonsets.values(),
        upgrading.current_revisions(seen.driver_revisions.values()),
        pods,
        seen.validator_pods.values(),
        deployed,
        claims=_claims(rt),
    )


def _claims(rt: runtime.Runtime) -> Mapping[str, ClaimHold] | None:
    """What each ResourceClaim holds, as the claim watch shows it; None when resource.k8s.io/v1
    is not served (every claim of a pod then counts as a GPU).

    NB: a read-only window on the live view, not a copy: a node's task reads its pods again
    later in the pass (reconcilers/upgrade_tasks.py) and their claims must be judged as they
    are then; planning only looks claims up (`.get`), never iterates them.
    """
    if not rt.view.resource_claim_api:
        return None
    return types.MappingProxyType(rt.view.resource_claims)
