"""Driver upgrades per NVIDIADriver pool: each pool's nodes planned under the pool's own rules.

With `driver.useNvidiaDriverCRD` each NVIDIADriver's `upgradePolicy`, laid field by field over
the ClusterPolicy's (model/nvidia_driver_spec.pool_upgrade_policy), rules the GPU nodes it owns
(the owner label `nvidia.com/gpu-operator.driver.owner`), as NVIDIA's upgrade controller splits
its state per NVIDIADriver (controllers/upgrade_controller.go, reconcileNVIDIADriverUpgrades):
- autoUpgrade per pool: a pool with it off is paused (its nodes stay where they are, as the
  ClusterPolicy's pause leaves them), the other pools go on;
- maxParallelUpgrades and maxUnavailable count within the pool (a percentage of the pool's
  nodes), so one pool's upgrade never takes another's slots;
- the wait for jobs, GPU pod deletion, drain and the timeouts of each node are its pool's.
Nodes that no pool owns (the ClusterPolicy's own driver DaemonSets during a hand-over) follow the
ClusterPolicy's rules, as one more pool.  A pool whose spec is invalid is held: its nodes are
planned as paused, with the reason, and nothing is written on them.

Without pools (the ClusterPolicy mode) a pass is exactly planning/upgrade_chain's.

Never does: read the cluster or the clock.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import UpgradeNode, UpgradeSnapshot
from ocp_gpu.planning.upgrades import upgrade_chain, upgrade_plan
from ocp_gpu.planning.upgrades.upgrade_budget import Budget

# Why an invalid NVIDIADriver's nodes do not move (`ocp-gpu status` says it on each of them).
HELD = "has an invalid spec (its status names the field): its nodes' upgrades are held"


@dataclasses.dataclass(frozen=True)
class PoolRules:
    """One NVIDIADriver pool's upgrade rules."""

    # The NVIDIADriver's name (what the wait reasons name).
    nvidia_driver: str
    policy: UpgradePolicy
    # Why its upgrades are held ("" when they are not): its spec is invalid, so nothing moves.
    held: str = ""


@dataclasses.dataclass(frozen=True)
class UpgradeRules:
    """The upgrade rules of a pass: the ClusterPolicy's, and each NVIDIADriver pool's."""

    default: UpgradePolicy
    # The owner label's value (planning/drivers/driver_pools.owner_label_value) -> the pool's rules.
    pools: Mapping[str, PoolRules] = dataclasses.field(default_factory=dict)

    @property
    def auto_upgrade(self) -> bool:
        """Some node may move: the ClusterPolicy's or some pool's autoUpgrade is on (and not held)."""
        return self.default.auto_upgrade or any(
            pool.policy.auto_upgrade and not pool.held for pool in self.pools.values()
        )

    def moves(self, pool: str | None) -> bool:
        """Whether the nodes of this pool (an owner label value; None or "": none) may move at all."""
        found = self.pools.get(pool or "")
        if found is None:
            return self.default.auto_upgrade
        return found.policy.auto_upgrade and not found.held

    def policy_of(self, node: UpgradeNode) -> UpgradePolicy:
        """The rules this node upgrades by: its pool's, else the ClusterPolicy's; paused when held."""
        pool = self.pools.get(node.pool)
        if pool is None:
            return self.default
        if pool.held:
            return dataclasses.replace(pool.policy, auto_upgrade=False)
        return pool.policy

    def map(self, change: Callable[[UpgradePolicy], UpgradePolicy]) -> UpgradeRules:
        """The same rules with `change` applied to every policy (the operator env's timeouts)."""
        return UpgradeRules(
            change(self.default),
            {key: dataclasses.replace(pool, policy=change(pool.policy)) for key, pool in self.pools.items()},
        )


def as_rules(rules: UpgradePolicy | UpgradeRules) -> UpgradeRules:
    """A ClusterPolicy's rules alone are rules without pools."""
    return rules if isinstance(rules, UpgradeRules) else UpgradeRules(rules)


def nodes_needing_pods(nodes: Iterable[UpgradeNode], rules: UpgradeRules) -> tuple[NodeName, ...]:
    """The nodes whose pods the reader must list for this pass, each judged by its own rules."""
    return tuple(
        node.name for node in nodes if node.state in upgrade_plan.states_needing_pods(rules.policy_of(node))
    )


def _pool_key(node: UpgradeNode, rules: UpgradeRules) -> str:
    # "" for the ClusterPolicy's nodes (no pool, or a pool the rules do not know: not yet planned).
    return node.pool if node.pool in rules.pools else ""


def _paused_wait(pool: PoolRules) -> str:
    if pool.held:
        return f"held: NVIDIADriver {pool.nvidia_driver} {pool.held}"
    return f"paused: NVIDIADriver {pool.nvidia_driver} sets spec.upgradePolicy.autoUpgrade false"


def plan_pool_upgrades(
    snapshot: UpgradeSnapshot,
    rules: UpgradeRules,
    now: datetime.datetime,
    in_flux: Mapping[NodeName, UpgradeNode] | None = None,
    *,
    chained: bool = True,
) -> upgrade_plan.UpgradePlan:
    """Every pool's nodes planned under its rules (upgrade_chain.plan_chained_upgrades per pool),
    as one plan: its nodes, the union of the pools' starts, `node_policies` for the pools' nodes.

    `chained` False: one step per node, the next one, as `ocp-gpu status` shows it
    (upgrade_plan.plan_upgrades).
    """

    def plan(
        part: UpgradeSnapshot, policy: UpgradePolicy, members: Sequence[UpgradeNode], paused_wait: str
    ) -> upgrade_plan.UpgradePlan:
        frozen = _within(in_flux, members)
        if chained:
            return upgrade_chain.plan_chained_upgrades(part, policy, now, frozen, paused_wait)
        return upgrade_plan.plan_upgrades(part, policy, now, frozenset(frozen), paused_wait)

    if not rules.pools or not snapshot.nodes:
        return plan(snapshot, rules.default, snapshot.nodes, upgrade_plan.PAUSED_WAIT)
    groups: dict[str, list[UpgradeNode]] = {}
    for node in snapshot.nodes:
        groups.setdefault(_pool_key(node, rules), []).append(node)
    plans: list[upgrade_plan.UpgradePlan] = []
    node_policies: dict[NodeName, UpgradePolicy] = {}
    for key in sorted(groups):
        members = groups[key]
        part = dataclasses.replace(snapshot, nodes=tuple(members))
        pool = rules.pools.get(key)
        if pool is None:
            plans.append(plan(part, rules.default, members, upgrade_plan.PAUSED_WAIT))
            continue
        policy = rules.policy_of(members[0])
        node_policies.update(dict.fromkeys((node.name for node in members), policy))
        if pool.held:
            plans.append(_held(part, policy, now, _paused_wait(pool)))
            continue
        plans.append(plan(part, policy, members, _paused_wait(pool)))
    return merge_plans(plans, node_policies)


def _within(
    in_flux: Mapping[NodeName, UpgradeNode] | None, members: Sequence[UpgradeNode]
) -> dict[NodeName, UpgradeNode]:
    names = {node.name for node in members}
    return {name: node for name, node in (in_flux or {}).items() if name in names}


def _held(
    part: UpgradeSnapshot, policy: UpgradePolicy, now: datetime.datetime, why: str
) -> upgrade_plan.UpgradePlan:
    """A held pool: planned as paused, but nothing written (its spec may change any moment)."""
    paused = upgrade_plan.plan_upgrades(part, policy, now, paused_wait=why)
    return dataclasses.replace(
        paused, nodes=tuple(dataclasses.replace(node, annotations={}) for node in paused.nodes)
    )


def merge_plans(
    plans: Sequence[upgrade_plan.UpgradePlan], node_policies: Mapping[NodeName, UpgradePolicy]
) -> upgrade_plan.UpgradePlan:
    """The pools' plans as one: autoUpgrade on where any pool's is, the budgets summed."""
    moving = [plan for plan in plans if plan.auto_upgrade]
    return upgrade_plan.UpgradePlan(
        auto_upgrade=bool(moving),
        nodes=tuple(node for plan in plans for node in plan.nodes),
        budget=sum_budgets([plan.budget for plan in moving] or [plan.budget for plan in plans]),
        after_others=frozenset(name for plan in plans for name in plan.after_others),
        slot_from={name: giver for plan in plans for name, giver in plan.slot_from.items()},
        node_policies=dict(node_policies),
        # NB: never empty with a pool moving, so the metric sums the pools' slots.
        pool_budgets=tuple(plan.budget for plan in moving),
    )


def sum_budgets(budgets: Sequence[Budget]) -> Budget:
    """The pools' budgets as one: what the node tasks read (the starts, whether some node waits
    for a slot) and the status's totals.  NB: its `available` is not the pools' sum (that is
    UpgradePlan.pool_budgets')."""
    if len(budgets) == 1:
        return budgets[0]
    return Budget(
        total=sum(budget.total for budget in budgets),
        max_parallel=0
        if any(budget.max_parallel == 0 for budget in budgets)
        else sum(budget.max_parallel for budget in budgets),
        max_unavailable=sum(budget.max_unavailable for budget in budgets),
        holding=tuple(name for budget in budgets for name in budget.holding),
        unavailable=tuple(name for budget in budgets for name in budget.unavailable),
        starts=tuple(name for budget in budgets for name in budget.starts),
        newly_unavailable=sum(budget.newly_unavailable for budget in budgets),
        blocked_by="; ".join(budget.blocked_by for budget in budgets if budget.blocked_by),
    )
