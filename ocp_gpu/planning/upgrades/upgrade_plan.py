"""Which driver upgrade transitions to make this pass, and what to do on each node to make them.

The whole state machine is one table, `TABLE` (planning/upgrades/upgrade_table.py); the budget is
planning/upgrades/upgrade_budget.py, the driver pod's check planning/drivers/driver_check.py, the pods that
wait, deletion and drain touch planning/upgrades/pod_selection.py, the actions
planning/upgrades/upgrade_actions.py.  This module walks the table for every node.  Semantics are
those of NVIDIA's k8s-operator-libs (pkg/upgrade), with its known failures fixed
(DESIGN §5, §6).

Decides, per GPU node and per pass: at most one transition (label value, Event
message), the actions before it (cordon, uncordon, delete GPU pods, evict pods for a
drain, delete the outdated driver pod), the annotations written with it (timers, the
record of an admin's cordon), and, when the node stays, why it waits (which pod,
which budget, which timeout) for `ocp-gpu status`.  Also the upgrade budget
(maxParallelUpgrades, maxUnavailable) and the six metrics' values.

Never does: read the cluster or the clock (the caller passes a snapshot and `now`),
patch nodes, delete or evict pods, post Events or set metrics.  It never raises on
a snapshot: a node whose driver pod is missing, whose DaemonSet has no known
revision or whose pods were not read waits with a reason, and the others go on.

Contract with the reconciler: for each `NodePlan`, run `actions` in order; only if
every one succeeded, write `transition` and `annotations` in one merge patch (or
`annotations` alone when there is no transition).  An eviction a
PodDisruptionBudget refuses is not an error: the node stays and retries next pass.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import UpgradeNode, UpgradeSnapshot, UpgradeState

# Re-exported: callers name the upgrade planner's parts through this module.
from ocp_gpu.planning.drivers.driver_check import CURRENT as CURRENT
from ocp_gpu.planning.drivers.driver_check import DRIVER_RESTART_LIMIT as DRIVER_RESTART_LIMIT
from ocp_gpu.planning.drivers.driver_check import DriverCheck as DriverCheck
from ocp_gpu.planning.drivers.driver_check import DriverStatus as DriverStatus
from ocp_gpu.planning.drivers.driver_check import check_driver as check_driver
from ocp_gpu.planning.upgrades.pod_selection import drain_pods as drain_pods
from ocp_gpu.planning.upgrades.pod_selection import drain_selector as drain_selector
from ocp_gpu.planning.upgrades.pod_selection import gpu_pods as gpu_pods
from ocp_gpu.planning.upgrades.pod_selection import selector_matches as selector_matches
from ocp_gpu.planning.upgrades.pod_selection import why_not_deletable as why_not_deletable
from ocp_gpu.planning.upgrades.pod_selection import why_not_drainable as why_not_drainable
from ocp_gpu.planning.upgrades.upgrade_actions import Action as Action
from ocp_gpu.planning.upgrades.upgrade_actions import Cordon as Cordon
from ocp_gpu.planning.upgrades.upgrade_actions import DeleteDriverPod as DeleteDriverPod
from ocp_gpu.planning.upgrades.upgrade_actions import DeletePods as DeletePods
from ocp_gpu.planning.upgrades.upgrade_actions import EvictPods as EvictPods
from ocp_gpu.planning.upgrades.upgrade_actions import Uncordon as Uncordon
from ocp_gpu.planning.upgrades.upgrade_budget import Budget as Budget
from ocp_gpu.planning.upgrades.upgrade_budget import select_starts as select_starts
from ocp_gpu.planning.upgrades.upgrade_table import HOLDS_SLOT as HOLDS_SLOT
from ocp_gpu.planning.upgrades.upgrade_table import IDLE as IDLE
from ocp_gpu.planning.upgrades.upgrade_table import IN_PROGRESS as IN_PROGRESS
from ocp_gpu.planning.upgrades.upgrade_table import TABLE as TABLE
from ocp_gpu.planning.upgrades.upgrade_table import VALIDATION_TIMEOUT_SECONDS as VALIDATION_TIMEOUT_SECONDS
from ocp_gpu.planning.upgrades.upgrade_table import Context as Context
from ocp_gpu.planning.upgrades.upgrade_table import Edge as Edge
from ocp_gpu.planning.upgrades.upgrade_table import Rule as Rule
from ocp_gpu.planning.upgrades.upgrade_table import S as S
from ocp_gpu.planning.upgrades.upgrade_table import Timeout as Timeout
from ocp_gpu.planning.upgrades.upgrade_table import forget_cordon

# --- the plan -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """What to do on one node this pass."""

    node: NodeName
    # The state as read.
    state: UpgradeState
    driver: DriverStatus
    # The new label value, or None to leave it.
    transition: UpgradeState | None = None
    # Run in order before the transition; the transition is written only if all succeed.
    actions: tuple[Action, ...] = ()
    # Node annotations to set (a value) or remove (None), in the same patch as the transition.
    annotations: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    # Why the node stays where it is ("" when it moves or has nothing to wait for).
    waiting: str = ""
    # The node carries the skip label.
    skipped: bool = False
    # False for a node opted out of the driver with no upgrade under way: it is not counted
    # in the metrics or the budget (NVIDIA counts only nodes with a driver pod).
    managed: bool = True
    # Further steps in the same pass, each planned on the node as the step before leaves it
    # (planning/upgrade_chain: transitions that wait on nothing external); flat, never nested.
    then: tuple[NodePlan, ...] = ()
    # Its upgrades are paused (autoUpgrade false) or held (its pool's spec is invalid): it moves
    # in no pass until that changes, so no pass need come back for it.
    paused: bool = False

    @property
    def steps(self) -> tuple[NodePlan, ...]:
        """This step and the ones chained after it, in the order they are carried out."""
        return (dataclasses.replace(self, then=()), *self.then)

    @property
    def state_after(self) -> UpgradeState:
        last = self.then[-1] if self.then else self
        return last.transition if last.transition is not None else last.state

    @property
    def event_message(self) -> str | None:
        """The GPUDriverUpgrade Event message of the transition."""
        return upgrade_observations.event_message(self.transition) if self.transition is not None else None


@dataclasses.dataclass(frozen=True)
class UpgradePlan:
    auto_upgrade: bool
    nodes: tuple[NodePlan, ...]
    budget: Budget
    # Nodes granted a slot that another node frees in this same pass (planning/upgrade_chain):
    # their steps run only once every other node's succeeded, so that maxParallelUpgrades and
    # maxUnavailable hold at every moment, not just between passes.
    after_others: frozenset[NodeName] = frozenset()
    # For some of them, the one node whose steps free their slot: they wait for that node's
    # steps only; the others in after_others wait for every other node's.
    slot_from: Mapping[NodeName, NodeName] = dataclasses.field(default_factory=dict)
    # With NVIDIADriver pools (planning/upgrades/pool_upgrades.py): the rules of each node whose
    # pool has its own (the others': the pass's), and each pool's budget with autoUpgrade on
    # (`budget` is then their sum, for the tasks and the status).
    node_policies: Mapping[NodeName, UpgradePolicy] = dataclasses.field(default_factory=dict)
    pool_budgets: tuple[Budget, ...] = ()

    def by_node(self) -> dict[NodeName, NodePlan]:
        return {plan.node: plan for plan in self.nodes}


@dataclasses.dataclass(frozen=True)
class UpgradeCounts:
    """The six gpu_operator_* upgrade metrics, as the labels will read after this pass."""

    auto_upgrade_enabled: int
    in_progress: int
    done: int
    failed: int
    available: int
    pending: int


def states_needing_pods(policy: UpgradePolicy) -> frozenset[UpgradeState]:
    """The states whose way out depends on the node's pods (which no watch keeps)."""
    if not policy.auto_upgrade:
        return frozenset()
    wanted = {S.POD_DELETION_REQUIRED, S.DRAIN_REQUIRED}
    if policy.wait_for_completion.pod_selector.strip():
        wanted.add(S.WAIT_FOR_JOBS_REQUIRED)
    return frozenset(wanted)


def nodes_needing_pods(snapshot_nodes: Iterable[UpgradeNode], policy: UpgradePolicy) -> tuple[NodeName, ...]:
    """The nodes whose pods the reader must list for this pass (the rest need none)."""
    wanted = states_needing_pods(policy)
    return tuple(node.name for node in snapshot_nodes if node.state in wanted)


@dataclasses.dataclass(frozen=True)
class PassInputs:
    """What every node's plan in one pass shares: the snapshot, the rules, the moment, the budget."""

    snapshot: UpgradeSnapshot
    policy: UpgradePolicy
    now: datetime.datetime
    budget: Budget
    # The nodes whose NVIDIADriver pool has rules of its own (UpgradePlan.node_policies).
    node_policies: Mapping[NodeName, UpgradePolicy] = dataclasses.field(default_factory=dict)

    def policy_for(self, node: NodeName) -> UpgradePolicy:
        """The rules of this node: its pool's, else the pass's."""
        return self.node_policies.get(node, self.policy)


def node_context(node: UpgradeNode, driver: DriverStatus, shared: PassInputs) -> Context:
    snapshot, now, budget = shared.snapshot, shared.now, shared.budget
    policy = shared.policy_for(node.name)
    rule = TABLE[node.state]
    started = node.timers.get(rule.timer) if rule.timer else None
    return Context(
        node=node,
        driver=driver,
        policy=policy,
        now=now,
        pods=snapshot.pods.get(node.name),
        claims=snapshot.claims,
        validator_deployed=snapshot.validator_deployed,
        validators=snapshot.validator_pods.get(node.name, ()),
        granted=node.name in budget.starts,
        slot_wait=budget.blocked_by,
        timeout=rule.timeout.seconds(policy) if rule.timeout else 0,
        elapsed=(now - started) if started is not None else None,
    )


def _entering(ctx: Context, target: UpgradeState) -> dict[str, str | None]:
    """Annotations written with a transition into `target`."""
    rule = TABLE[target]
    changes: dict[str, str | None] = {
        # Timers of other states are stale from now on.
        key: None
        for key in ctx.node.timers
        if key != rule.timer
    }
    if rule.timer:
        changes[rule.timer] = upgrade_observations.format_timestamp(ctx.now)
    if rule.on_enter:
        changes.update(rule.on_enter(ctx))
    if target is S.UPGRADE_DONE:
        # The run is over: forget its cordon records.
        changes.update(forget_cordon(ctx))
    return changes


def plan_node(ctx: Context) -> NodePlan:
    node = ctx.node
    rule = TABLE[node.state]
    annotations: dict[str, str | None] = {}
    if not node.upgrade_enabled:
        # The controller, not k8s-driver-manager, owns eviction on this node.
        annotations[labels.UPGRADE_ENABLED_ANNOTATION] = "true"
    for edge in rule.edges:
        if edge.condition(ctx):
            actions = edge.actions(ctx) if edge.actions else ()
            annotations.update(_entering(ctx, edge.target))
            return NodePlan(
                node.name, node.state, ctx.driver, edge.target, actions, annotations, skipped=node.skip
            )
    # No way out yet: do this state's work and say why.
    if rule.timer and ctx.elapsed is None:
        # Labelled by hand or by another controller: the timer starts now.
        annotations[rule.timer] = upgrade_observations.format_timestamp(ctx.now)
    if rule.on_stay:
        annotations.update(rule.on_stay(ctx))
    actions = rule.work(ctx) if rule.work else ()
    return NodePlan(
        node.name, node.state, ctx.driver, None, actions, annotations, rule.wait(ctx), skipped=node.skip
    )


# Why the nodes of a paused ClusterPolicy wait (an NVIDIADriver pool's say which: pool_upgrades).
PAUSED_WAIT = "paused: driver.upgradePolicy.autoUpgrade is false"


def _paused(node: UpgradeNode, driver: DriverStatus, why: str) -> NodePlan:
    # autoUpgrade false: every label stays; k8s-driver-manager takes eviction back.
    annotations: dict[str, str | None] = {}
    if node.upgrade_enabled:
        annotations[labels.UPGRADE_ENABLED_ANNOTATION] = None
    return NodePlan(
        node.name,
        node.state,
        driver,
        annotations=annotations,
        waiting=why,
        skipped=node.skip,
        paused=True,
    )


def is_unmanaged(node: UpgradeNode) -> bool:
    """Opted out of the driver and no upgrade under way: nothing to upgrade or count.

    NB: a node opted out mid-upgrade stays managed, so the upgrade's cordon is still lifted.
    Its driver pod may still be terminating: it is not upgraded (nor labelled upgrade-done,
    which the node labeller would remove again: no flapping).
    """
    return node.driver_opted_out and node.state in IDLE


def _unmanaged(node: UpgradeNode) -> NodePlan:
    # Its stale state label is removed by the node labeller (planning/node_labels).
    return NodePlan(
        node.name,
        node.state,
        DriverStatus(DriverCheck.MISSING, node.driver_pod, "opted out of the driver"),
        waiting=f"opted out of the driver ({labels.deploy_label('driver')}=false, or a VM workload):"
        " not upgraded or counted",
        skipped=node.skip,
        managed=False,
    )


# Why a frozen node (planning/upgrade_pipeline: its writes are under way) is not planned this pass.
IN_FLUX_WAIT = "its upgrade steps are being written"


def _in_flux(node: UpgradeNode, driver: DriverStatus) -> NodePlan:
    # Its writes are under way (or not yet seen by the watches): planned once they are.
    return NodePlan(node.name, node.state, driver, waiting=IN_FLUX_WAIT, skipped=node.skip)


def plan_upgrades(
    snapshot: UpgradeSnapshot,
    policy: UpgradePolicy,
    now: datetime.datetime,
    frozen: frozenset[NodeName] = frozenset(),
    paused_wait: str = PAUSED_WAIT,
) -> UpgradePlan:
    """Per node, at most one transition and the actions before it, for one pass.

    `frozen` nodes are counted in the budget as the snapshot gives them, never moved;
    `paused_wait`: why the nodes wait when `policy` pauses upgrades.
    """
    unmanaged = tuple(_unmanaged(node) for node in snapshot.nodes if is_unmanaged(node))
    if unmanaged:
        # Opted-out nodes are planned apart: the state machine and the budget never see them.
        managed = dataclasses.replace(
            snapshot, nodes=tuple(node for node in snapshot.nodes if not is_unmanaged(node))
        )
        plan = plan_upgrades(managed, policy, now, frozen, paused_wait)
        return dataclasses.replace(plan, nodes=plan.nodes + unmanaged)
    drivers = {node.name: check_driver(node, snapshot) for node in snapshot.nodes}
    if not policy.auto_upgrade:
        # Paused: freeze every node where it is.
        budget = dataclasses.replace(
            select_starts(snapshot.nodes, drivers, policy),
            starts=(),
            newly_unavailable=0,
            blocked_by="paused",
        )
        plans = tuple(_paused(node, drivers[node.name], paused_wait) for node in snapshot.nodes)
        return UpgradePlan(False, plans, budget)
    budget = select_starts(snapshot.nodes, drivers, policy, frozen)
    shared = PassInputs(snapshot, policy, now, budget)
    plans = tuple(
        _in_flux(node, drivers[node.name])
        if node.name in frozen
        else plan_node(node_context(node, drivers[node.name], shared))
        for node in snapshot.nodes
    )
    return UpgradePlan(True, plans, budget)


def summarize(plan: UpgradePlan) -> UpgradeCounts:
    """The six metrics' values, from the states the labels will have after this pass."""
    after = [node.state_after for node in plan.nodes if node.managed]
    return UpgradeCounts(
        auto_upgrade_enabled=int(plan.auto_upgrade),
        in_progress=sum(state in IN_PROGRESS for state in after),
        done=after.count(S.UPGRADE_DONE),
        failed=after.count(S.UPGRADE_FAILED),
        available=(
            sum(budget.available for budget in plan.pool_budgets)
            if plan.pool_budgets
            else plan.budget.available
            if plan.auto_upgrade
            else 0
        ),
        # Waiting for a slot: skipped nodes never get one.
        pending=sum(
            node.state_after is S.UPGRADE_REQUIRED and not node.skipped for node in plan.nodes if node.managed
        ),
    )
