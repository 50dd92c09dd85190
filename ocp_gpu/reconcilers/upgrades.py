"""Driver upgrades, node by node: build the upgrade snapshot, plan one pass, apply it, record metrics.

Runs in its own loop, beside the main pass (reconcilers/cluster.py), so that its
work never delays a driver DaemonSet's creation.  The snapshot comes from the
watches' in-memory view (node facts, driver and validator pods, ControllerRevisions,
driver DaemonSets); the only reads a pass makes are the pods of the few nodes
whose state needs them (wait, pod deletion, drain).  A pass runs only when
something can need it: a driver DaemonSet has outdated pods
(updatedNumberScheduled < desiredNumberScheduled), a GPU node's upgrade label is
not `upgrade-done`, or the upgrade rules changed.  While nodes are in flight it
repeats every RECHECK_S, since timeouts only fire on a pass; once every node is
done it goes quiet (zero writes, zero reads).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import logging
import time
from collections.abc import Mapping, Sequence

from ocp_gpu import metrics
from ocp_gpu.kube import reporting, requesting, upgrading
from ocp_gpu.model import labels, upgrades
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import UpgradePolicy
from ocp_gpu.model.upgrades import UpgradeState
from ocp_gpu.planning import batched_events, driver_coverage, pod_selection, upgrade, upgrade_chain
from ocp_gpu.reconcilers import runtime

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


def is_pass_needed(rt: runtime.Runtime) -> bool:
    """Whether anything in the in-memory view can make an upgrade pass do something (autoUpgrade on)."""
    if any(ds.updated_number_scheduled < ds.desired_number_scheduled for ds in rt.driver_daemonsets.values()):
        # Some driver pod runs an outdated template.
        return True
    # A GPU node not yet labelled, or somewhere in the state machine (opted-out nodes never count).
    return any(
        driver_coverage.wants_driver(facts.labels)
        and facts.labels.get(labels.UPGRADE_STATE) != UpgradeState.UPGRADE_DONE
        for facts in rt.node_facts.values()
    )


async def upgrade_forever(rt: runtime.Runtime, coalesce_s: float) -> None:
    """Wait for a change (or the recheck timer), let a burst settle, run one upgrade pass; forever."""
    await rt.listed.wait()
    recheck: float | None = None
    poll: float | None = None
    # The last pass wrote something: one more pass, so the metrics count the labels as they
    # are now (gpu_operator_nodes_upgrades_available agrees with `ocp-gpu status`).
    settle = False
    coalescer = runtime.Coalescer(coalesce_s)
    announcer = upgrading.Announcer(rt.api_client)
    echoes = upgrade_chain.Echoes()
    # The nodes' marks the last paused pass planned from, as the node view's count of their
    # changes (planning/paused_upgrades; None: the last pass was not paused).
    paused_seen: int | None = None
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rt.upgrade_wake.wait(), recheck)
        await coalescer.settle(rt.upgrade_urgent)
        await _until_echoed(rt, echoes, max(coalesce_s, ECHO_LIMIT_S))
        rules_changed = rt.take_upgrade_marks()
        rules = rt.upgrade_policy
        # NB: paused, a pass only counts labels and removes an annotation: a driver or validator
        # pod changing moves nothing, so only a node's marks changing costs a pass.
        paused_now = rt.paused_marks_version if rules is not None and not rules.auto_upgrade else None
        if paused_now is not None and not (rules_changed or settle) and paused_now == paused_seen:
            recheck = None
            continue
        if rules is None or not (rules_changed or settle or paused_now is not None or is_pass_needed(rt)):
            recheck = None
            continue
        paused_seen = paused_now
        rt.trimmer.worked()
        try:
            plan, failed, echoes = await reconcile_upgrades(
                rt, rules, datetime.datetime.now(datetime.UTC), announcer
            )
        except Exception:
            logger.exception("upgrade pass failed; retrying shortly")
            recheck = RETRY_S
            paused_seen = None
            continue
        finally:
            coalescer.ended()
        settle = bool(upgrading.busy_plans(plan.nodes))
        in_flight = any(
            node.state_after in upgrade.IN_PROGRESS or node.state_after is UpgradeState.UPGRADE_REQUIRED
            for node in plan.nodes
            if not node.skipped and node.managed
        )
        base = float(rt.env.get(RECHECK_ENV, RECHECK_S))
        if upgrade_chain.removes_pods(plan):
            poll = POLL_S
        elif poll is not None and upgrade_chain.waits_on_pods(plan, rules):
            poll = min(poll * 2, base)
        else:
            poll = None
        recheck = min(base, poll or base) if plan.auto_upgrade and (in_flight or failed) else None


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
    rules: UpgradePolicy,
    now: datetime.datetime,
    announcer: upgrading.Announcer | None = None,
) -> tuple[upgrade.UpgradePlan, bool, upgrade_chain.Echoes]:
    """One pass: snapshot from the view, plan, apply (nodes in parallel); True in [1] when a node
    failed; in [2] what the watches must show before the next pass (its writes' echoes).

    With an `announcer` the transitions' Events are posted beside the pass, not in it.
    """
    rules = _with_env_timeouts(rules, rt.env)
    began = time.monotonic()
    snap = await _snapshot(rt, rules)
    plan = upgrade_chain.plan_chained_upgrades(snap, rules, now)
    extra = upgrade_chain.pods_to_read(plan, snap.pods, rules)
    if extra:
        # Chains that reached pod deletion in this pass go on once those nodes' pods are read.
        pods = dict(snap.pods)
        pods.update(await _list_pods(rt, extra))
        snap = dataclasses.replace(snap, pods=pods)
        plan = upgrade_chain.plan_chained_upgrades(snap, rules, now)
    planned = time.monotonic()
    batched: list[upgrading.Announcement] = []
    outcomes = await _apply_all(rt, upgrading.busy_plans(plan.nodes), plan, now, announcer, batched)
    if batched:
        await _announce_batched(rt, batched)
    # NB: a node held back (the slot it was to take may still be held) starts next pass instead.
    busy = [node_plan for node_plan, _ in outcomes]
    results = [result for _, result in outcomes]
    later = [node_plan for node_plan in busy if node_plan.node in plan.after_others]
    # Where a pass's time goes (`ocp-gpu run -v`): reading and planning, then the writes.
    logger.debug(
        "upgrade pass: read and planned in %.3f s (pods of %d node(s) read again), %d node(s) "
        "wrote %d step(s) in %.3f s (%d after the others)",
        planned - began,
        len(extra),
        len(busy),
        sum(len(node_plan.steps) for node_plan in busy),
        time.monotonic() - planned,
        len(later),
    )
    failed = False
    for node_plan, result in zip(busy, results, strict=True):
        if isinstance(result, Exception):
            failed = True
            # NB: one node's error never blocks the others; the next pass plans it again.
            detail = (
                f"{result.status} {result.reason}"
                if isinstance(result, requesting.ApiException)
                else repr(result)
            )
            logger.warning("node %s: upgrade step failed (%s); other nodes carry on", node_plan.node, detail)
    counts = upgrade.summarize(plan)
    metrics.auto_upgrade_enabled.set(counts.auto_upgrade_enabled)
    metrics.driver_auto_upgrade_enabled.set(counts.auto_upgrade_enabled)
    metrics.upgrades_in_progress.set(counts.in_progress)
    metrics.upgrades_done.set(counts.done)
    metrics.upgrades_failed.set(counts.failed)
    metrics.upgrades_available.set(counts.available)
    metrics.upgrades_pending.set(counts.pending)
    done = [node_plan for node_plan, result in zip(busy, results, strict=True) if result is None]
    return plan, failed, upgrade_chain.awaited_echoes(done)


# How often the view is checked for the last pass's echoes.
ECHO_POLL_S = 0.01
# The longest wait for them (or the coalescing window, if longer). NB: not the window itself:
# a window of 0.05 s would often plan on a view without the last pass's writes, and write a
# label or delete a pod twice (session 6: 18.32 writes per node instead of 18.1-18.3). 0.4 s:
# at least the 0.2 s window plus 0.2 s echo wait a pass had before the window shrank (at load
# 14-19, 100 nodes, a 0.2 s limit let 2 of 200 pod deletions be sent twice). The wait ends as
# soon as the echoes are in, so on a healthy apiserver it costs nothing.
ECHO_LIMIT_S = 0.4


async def _until_echoed(rt: runtime.Runtime, echoes: upgrade_chain.Echoes, limit_s: float) -> None:
    """Wait (at most `limit_s`) until the watches show the last pass's writes (upgrade_chain.Echoes).

    NB: past the limit the pass plans on the view as it is: a write whose echo is that late is
    rare, and an admin may have changed the label since.
    """
    deadline = asyncio.get_running_loop().time() + limit_s
    while not upgrade_chain.is_echoed(echoes, _state_labels(rt, echoes), rt.driver_pods):
        if asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(ECHO_POLL_S)


def _state_labels(rt: runtime.Runtime, echoes: upgrade_chain.Echoes) -> dict[NodeName, str | None]:
    return {node: rt.upgrade_state(node) for node in echoes.labels}


async def _apply_all(
    rt: runtime.Runtime,
    busy: Sequence[upgrade.NodePlan],
    plan: upgrade.UpgradePlan,
    now: datetime.datetime,
    announcer: upgrading.Announcer | None,
    batched: list[upgrading.Announcement],
) -> list[tuple[upgrade.NodePlan, Exception | None]]:
    """Every busy node's steps, WRITE_CONCURRENCY nodes at a time, with what each raised.

    A node granted a slot freed in this pass (`after_others`) starts once the node that frees
    it (`slot_from`) succeeded, or, lacking one, once every other node did, so that
    maxParallelUpgrades and maxUnavailable hold at every moment; if one of those failed, it
    is held back (left out of the result).
    """
    gate = asyncio.Semaphore(runtime.WRITE_CONCURRENCY)

    async def run(node_plan: upgrade.NodePlan) -> Exception | None:
        async with gate:
            try:
                await asyncio.to_thread(_apply_steps, rt, node_plan, now, announcer, batched)
            except Exception as error:
                return error
            return None

    first = {
        node_plan.node: asyncio.ensure_future(run(node_plan))
        for node_plan in busy
        if node_plan.node not in plan.after_others
    }

    async def run_after(node_plan: upgrade.NodePlan) -> tuple[bool, Exception | None]:
        """(started, what it raised)."""
        giver = plan.slot_from.get(node_plan.node)
        awaited = [first[giver]] if giver in first else list(first.values())
        if any(result is not None for result in await asyncio.gather(*awaited)):
            return False, None
        return True, await run(node_plan)

    later = {
        node_plan.node: asyncio.ensure_future(run_after(node_plan))
        for node_plan in busy
        if node_plan.node in plan.after_others
    }
    outcomes: list[tuple[upgrade.NodePlan, Exception | None]] = []
    for node_plan in busy:
        if node_plan.node in first:
            outcomes.append((node_plan, await first[node_plan.node]))
            continue
        started, result = await later[node_plan.node]
        if started:
            outcomes.append((node_plan, result))
    return outcomes


def _apply_steps(
    rt: runtime.Runtime,
    plan: upgrade.NodePlan,
    now: datetime.datetime,
    announcer: upgrading.Announcer | None,
    batched: list[upgrading.Announcement],
) -> None:
    """One node's chained steps, in order; the first failure stops the rest (next pass plans again).

    The Events planning/batched_events says once for many nodes go to `batched` (list.append
    is atomic: the threads of one pass share it), the others to the announcer.
    """
    for step in plan.steps:
        applied = upgrading.apply_node_plan(rt.api_client, step, now=now, announcing=announcer is None)
        if announcer is None or applied.announcement is None:
            continue
        if batched_events.is_batched(step.state, step.transition):
            batched.append(applied.announcement)
        else:
            announcer.post(applied.announcement)


async def _announce_batched(rt: runtime.Runtime, batched: Sequence[upgrading.Announcement]) -> None:
    """One GPUDriverUpgrade Event on the active ClusterPolicy per state, naming the nodes."""
    active = rt.policies.get(rt.active_policy) if rt.active_policy else None
    if active is None:
        # Deleted meanwhile: nobody to tell (the nodes' labels say it).
        return
    for state in sorted({said.state for said in batched}):
        nodes = [said.node for said in batched if said.state is state]
        message = batched_events.batched_message(state, nodes)
        await asyncio.to_thread(
            reporting.post_event, rt.api_client, active.ref(), upgrades.EVENT_REASON, message
        )


async def _list_pods(
    rt: runtime.Runtime, wanted: Sequence[NodeName]
) -> dict[NodeName, tuple[upgrades.WorkloadPod, ...]]:
    """The pods of these nodes; a node whose list failed is left out (it alone waits for the next pass).

    Most of the nodes (an upgrade with no parallel limit, at scale): one paged LIST of every
    bound pod instead of a LIST per node; if it fails, every wanted node waits.
    """
    if upgrade_chain.reads_every_pod(len(wanted), len(rt.node_facts)):
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
    pods: dict[NodeName, tuple[upgrades.WorkloadPod, ...]] = {}
    for name, result in zip(wanted, listed, strict=True):
        if isinstance(result, Exception):
            logger.warning("could not list the pods of node %s: %s", name, requesting.describe_error(result))
        else:
            pods[name] = result
    return pods


async def _snapshot(rt: runtime.Runtime, rules: UpgradePolicy) -> upgrades.UpgradeSnapshot:
    """The upgrade snapshot from the watches' view, plus the pods of the nodes that need them."""
    mine = (
        pod
        for pod in rt.driver_pods.values()
        if pod_selection.is_driver_pod(dict(pod.selector_labels), rt.nvidia_driver_mode)
    )
    nodes = upgrades.upgrade_nodes(rt.node_facts.values(), mine)
    pods = await _list_pods(rt, upgrade.nodes_needing_pods(nodes, rules))
    # NB: a validator DaemonSet whose pods are not created yet still means "validation is coming".
    deployed = bool(rt.validator_pods) or await asyncio.to_thread(
        upgrading.validator_daemonset_exists, rt.api_client, rt.namespace
    )
    return upgrades.upgrade_snapshot(
        nodes,
        rt.driver_daemonsets.values(),
        upgrading.current_revisions(rt.driver_revisions.values()),
        pods,
        rt.validator_pods.values(),
        deployed,
    )
