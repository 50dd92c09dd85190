"""How far each node's driver upgrade goes within one pass: transitions chained until one must wait.

`planning.upgrades.upgrade_plan.plan_upgrades` plans one step per node, as the labels read.  Most
steps wait on nothing outside the operator (upgrade-required with a free slot ->
cordon-required -> wait-for-jobs-required with no podSelector -> pod-deletion-required
with no GPU pod -> pod-restart-required; a Ready driver pod -> validation-required ->
uncordon-required -> upgrade-done): without chaining each costs a pass (its watch echo
and the coalescing window).  Here each node's plan goes on with the next step, planned
on the node as the previous step leaves it (label, annotations, cordon), until a step
stays (waits for a pod, a validator, a job, a timeout) or does work whose outcome only the
cluster can tell (deleting or evicting pods, deleting the driver pod).  The sequence of
states, labels and Events is exactly that of one step per pass: only the waits between
passes go.

Slots freed by nodes that finish in this pass are granted again in the same pass (a
second budget round over the nodes as the chains leave them), so the next nodes start
without waiting for the watch echo of the last ones; the plan names them
(`after_others`): the reconciler starts each once the steps of the node that frees its slot
(`slot_from`) succeeded, or, where no single node does, once every other node's did.  A
node granted in the second round a slot that was free as read (it became upgrade-required
in this very pass) is not among them: it starts at once.

Never does: read the cluster or the clock, or change what a single step decides.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence

from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import DriverPod, UpgradeNode, UpgradeSnapshot, UpgradeState
from ocp_gpu.planning.drivers.driver_check import DriverStatus
from ocp_gpu.planning.upgrades import upgrade_plan, upgrade_table
from ocp_gpu.planning.upgrades.upgrade_actions import Cordon, DeleteDriverPod, Uncordon
from ocp_gpu.planning.upgrades.upgrade_budget import Budget, is_unavailable, select_starts

# No chain can be longer than the table has states (a guard: no two edges form a loop today).
MAX_STEPS = len(upgrade_table.TABLE)


def node_after(node: UpgradeNode, step: upgrade_plan.NodePlan) -> UpgradeNode:
    """The node as the reconciler leaves it once `step` succeeded (label, annotations, cordon)."""
    if not step.actions and not step.annotations and step.state_after.value == node.state_label:
        # The node stays as it is (most nodes of a large upgrade, every pass): no copy.
        return node
    changes: dict[str, str | None] = {}
    unschedulable = node.unschedulable
    for action in step.actions:
        if isinstance(action, Cordon):
            unschedulable = True
            changes.update(action.annotations)
        elif isinstance(action, Uncordon):
            unschedulable = False
    # NB: the step's own annotations are written after (or with) the cordon's: theirs win.
    changes.update(step.annotations)

    def present(key: str, was: bool) -> bool:
        return changes[key] is not None if key in changes else was

    timers = {key: moment for key, moment in node.timers.items() if changes.get(key, "") is not None}
    for key, value in changes.items():
        if key in upgrade_observations.TIMER_ANNOTATIONS and value is not None:
            moment = upgrade_observations.parse_timestamp(value)
            if moment is not None:
                timers[key] = moment
    enabled = node.upgrade_enabled
    if labels.UPGRADE_ENABLED_ANNOTATION in changes:
        enabled = changes[labels.UPGRADE_ENABLED_ANNOTATION] == "true"
    return dataclasses.replace(
        node,
        state_label=step.state_after.value,
        unschedulable=unschedulable,
        upgrade_enabled=enabled,
        initially_unschedulable=present(
            upgrade_observations.INITIAL_UNSCHEDULABLE, node.initially_unschedulable
        ),
        cordoned_by_upgrade=present(upgrade_observations.CORDONED_BY_UPGRADE, node.cordoned_by_upgrade),
        timers=timers,
    )


def _is_noop(step: upgrade_plan.NodePlan) -> bool:
    return step.transition is None and not step.actions and not step.annotations


def _chain(
    steps: list[upgrade_plan.NodePlan],
    node: UpgradeNode,
    driver: DriverStatus,
    shared: upgrade_plan.PassInputs,
) -> tuple[list[upgrade_plan.NodePlan], UpgradeNode]:
    """Extend `steps` (which leave the node as `node`) while each step moved the node on."""
    while steps and steps[-1].transition is not None and len(steps) < MAX_STEPS:
        following = upgrade_plan.plan_node(upgrade_plan.node_context(node, driver, shared))
        if _is_noop(following):
            # It waits and has nothing to write: the chain ends where the last transition left it.
            break
        steps.append(following)
        node = node_after(node, following)
    return steps, node


def continue_chain(
    node: UpgradeNode, driver: DriverStatus, shared: upgrade_plan.PassInputs
) -> tuple[upgrade_plan.NodePlan, ...]:
    """The steps a node's chain goes on with from `node` (as its last steps left it), planned on
    `shared` (fresh pods of the node, a fresh `now`); () when it waits and has nothing to write.

    The reconciler's task for the node calls this once it has read the node's pods (the chain
    reached a state that needs them) or seen the pods it deleted gone: the node goes on without
    waiting for a pass.  NB: past the grant nothing here reads the budget.
    """
    first = upgrade_plan.plan_node(upgrade_plan.node_context(node, driver, shared))
    if _is_noop(first):
        return ()
    steps, _ = _chain([first], node_after(node, first), driver, shared)
    return tuple(steps)


def _as_plan(steps: list[upgrade_plan.NodePlan]) -> upgrade_plan.NodePlan:
    first, *rest = steps
    if not rest and not first.then:
        # A single step (most nodes, every pass): already the plan.
        return first
    return dataclasses.replace(first, then=tuple(rest))


def plan_chained_upgrades(
    snapshot: UpgradeSnapshot,
    policy: UpgradePolicy,
    now: datetime.datetime,
    in_flux: Mapping[NodeName, UpgradeNode] | None = None,
    paused_wait: str = upgrade_plan.PAUSED_WAIT,
) -> upgrade_plan.UpgradePlan:
    """Per node, every transition of this pass up to the first that must wait (see the module doc).

    `in_flux`: the nodes whose steps are still being written (or not yet seen by the watches),
    as the budget must count them (planning/upgrade_pipeline.counted); they replace the
    snapshot's and are not planned (`upgrade.IN_FLUX_WAIT`).
    """
    frozen = frozenset(in_flux or ())
    if in_flux:
        snapshot = dataclasses.replace(
            snapshot, nodes=tuple(in_flux.get(node.name, node) for node in snapshot.nodes)
        )
    single = upgrade_plan.plan_upgrades(snapshot, policy, now, frozen, paused_wait)
    if not single.auto_upgrade:
        # Paused: nothing moves, nothing chains.
        return single
    by_name = {node.name: node for node in snapshot.nodes}
    chains: dict[NodeName, list[upgrade_plan.NodePlan]] = {}
    after: dict[NodeName, UpgradeNode] = {}
    drivers: dict[NodeName, DriverStatus] = {}
    first_round = upgrade_plan.PassInputs(snapshot, policy, now, single.budget)
    for plan in single.nodes:
        if not plan.managed:
            continue
        node = by_name[plan.node]
        drivers[plan.node] = plan.driver
        chains[plan.node], after[plan.node] = _chain([plan], node_after(node, plan), plan.driver, first_round)
    # Second round: slots the finished nodes gave back go to the next nodes in this pass.
    managed_after = tuple(after.values())
    first_after = dict(after)
    budget = select_starts(managed_after, drivers, policy, frozen)
    shared = upgrade_plan.PassInputs(snapshot, policy, now, budget)
    for name in budget.starts:
        steps = chains[name]
        granted = upgrade_plan.plan_node(upgrade_plan.node_context(after[name], drivers[name], shared))
        if steps[-1].transition is None:
            # The node stayed (waiting for a slot) and now starts: what its stay wrote is
            # written with the grant instead (one patch, not two).
            stay = steps.pop()
            granted = dataclasses.replace(granted, annotations={**stay.annotations, **granted.annotations})
        steps.append(granted)
        chains[name], after[name] = _chain(steps, node_after(after[name], granted), drivers[name], shared)
    nodes = tuple(_as_plan(chains[plan.node]) if plan.managed else plan for plan in single.nodes)
    free = _free_as_read(budget.starts, single.budget, first_after)
    later = tuple(name for name in budget.starts if name not in free)
    return upgrade_plan.UpgradePlan(
        True,
        nodes,
        budget,
        after_others=frozenset(later),
        slot_from=_slot_givers(later, by_name, after),
    )


def _free_as_read(
    starts: Sequence[NodeName], read: Budget, first_after: Mapping[NodeName, UpgradeNode]
) -> frozenset[NodeName]:
    """The nodes started in the second round that fit in slots free as read: they wait for nobody.

    A node that became upgrade-required in this pass (the first pass of an upgrade: every
    node) could not take a slot in the first round, though the slot was free all along; no
    write of this pass frees it, so the node starts at once instead of after every other
    node's writes (at 1,000 nodes, the first ten started only after 990 label patches).
    NB: the first round's writes never take a slot or make a node unavailable beyond the
    starts `read` counts, so maxParallelUpgrades and maxUnavailable hold at every moment.
    """
    parallel_left = (
        read.max_parallel - len(read.holding) - len(read.starts) if read.max_parallel else len(starts)
    )
    unavailable_left = read.max_unavailable - len(read.unavailable) - read.newly_unavailable
    free: list[NodeName] = []
    for name in starts:
        if parallel_left < 1:
            # Every slot free as read is taken: the rest take slots this pass frees.
            break
        # NB: as the first round left it (before its own cordon).
        costs = not is_unavailable(first_after[name])
        if costs and unavailable_left < 1:
            # Cordoning it fits only once a node this pass uncordons is uncordoned.
            continue
        free.append(name)
        parallel_left -= 1
        unavailable_left -= costs
    return frozenset(free)


def _slot_givers(
    starts: Sequence[NodeName], before: Mapping[NodeName, UpgradeNode], after: Mapping[NodeName, UpgradeNode]
) -> dict[NodeName, NodeName]:
    """Each node started in the second round paired with one node whose first-round steps free its slot.

    A giver held a parallel slot and was unavailable as read, and leaves both (upgrade-done,
    uncordoned): it frees exactly what a started node takes, so the started node need wait
    for the giver's writes only, not for every node's.  Started nodes beyond the givers
    (their slot came from elsewhere) are left out: they wait for all.
    """
    givers = sorted(
        name
        for name, node in after.items()
        if before[name].state in upgrade_plan.HOLDS_SLOT
        and node.state not in upgrade_plan.HOLDS_SLOT
        and is_unavailable(before[name])
        and not is_unavailable(node)
    )
    return dict(zip(starts, givers, strict=False))


@dataclasses.dataclass(frozen=True)
class Echoes:
    """What a pass wrote that the watches must show before the next pass plans on it.

    NB: a pass that starts at once (an urgent change) can find the watches' view still without
    the last pass's writes: planned on it, a node written upgrade-done was written upgrade-done
    again, and a deleted driver pod deleted again (10 of 100 nodes at maxParallelUpgrades 0).
    """

    # The state label each node's steps wrote last.
    labels: Mapping[NodeName, UpgradeState] = dataclasses.field(default_factory=dict)
    # Driver pods deleted (by name, in the operator namespace).
    deleted: frozenset[str] = frozenset()


def awaited_echoes(done: Sequence[upgrade_plan.NodePlan]) -> Echoes:
    """The echoes of the node plans whose steps all succeeded (`done`)."""
    labels_written: dict[NodeName, UpgradeState] = {}
    deleted: set[str] = set()
    for plan in done:
        for step in plan.steps:
            if step.transition is not None:
                labels_written[plan.node] = step.transition
            deleted.update(action.pod.name for action in step.actions if isinstance(action, DeleteDriverPod))
    return Echoes(labels_written, frozenset(deleted))


def is_echoed(
    echoes: Echoes, state_labels: Mapping[NodeName, str | None], driver_pods: Mapping[str, DriverPod]
) -> bool:
    """The view shows every label written and every deleted driver pod terminating or gone."""
    return all(state_labels.get(node) == state.value for node, state in echoes.labels.items()) and all(
        name not in driver_pods or driver_pods[name].terminating for name in echoes.deleted
    )


# From this many nodes whose pods a pass reads, if they are at least half the nodes, one paged
# LIST of every bound pod replaces a LIST per node (1,000 nodes at once: a few pages, not 1,000 calls).
READ_EVERY_POD_MIN_NODES = 50


def reads_every_pod(wanted: int, nodes: int) -> bool:
    """Whether the pods of `wanted` of the cluster's `nodes` are read by one LIST of every bound pod.

    NB: that LIST costs all the cluster's pods; a LIST per node costs a request each.  With most
    nodes wanted the pods are nearly the same, and the requests are what is saved.
    """
    return wanted >= READ_EVERY_POD_MIN_NODES and 2 * wanted >= nodes


def waits_on_pods(plan: upgrade_plan.UpgradePlan, policy: UpgradePolicy) -> bool:
    """Some node waits in a state whose way out only a read of its pods shows (no watch covers them).

    `policy`: the pass's rules; a node of an NVIDIADriver pool with its own is judged by them.
    """
    wanted = upgrade_plan.states_needing_pods(policy)
    # NB: a node in flux is not planned: its task reads its pods, or the pass after it does.
    return any(
        node.managed
        and node.state_after
        in (
            upgrade_plan.states_needing_pods(plan.node_policies[node.node])
            if node.node in plan.node_policies
            else wanted
        )
        and node.waiting != upgrade_plan.IN_FLUX_WAIT
        for node in plan.nodes
    )


def states_passed(plan: upgrade_plan.NodePlan) -> tuple[UpgradeState, ...]:
    """The labels a node takes this pass, in order (tests and the docs)."""
    return tuple(step.transition for step in plan.steps if step.transition is not None)
