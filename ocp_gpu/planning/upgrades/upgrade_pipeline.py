"""Pipelined upgrade passes: how nodes whose steps are still being written count, and when a
node's own task goes on without a pass.

A pass (reconcilers/upgrade_reconciler.py) no longer waits for every node's chain of steps
(planning/upgrade_chain) before the next pass: each chain runs as its own task, and the
next pass, woken by any node's event, plans every node but those "in flux":

- a node whose task is still writing counts as holding a slot and as unavailable if it
  does either before or after its steps (`counted`), so maxParallelUpgrades and
  maxUnavailable hold at every instant, whatever the order of the writes;
- a node whose task is done but whose writes the watches do not show yet counts as its
  writes left it; planning it on the stale view would write a label or delete a pod twice
  (upgrade_chain.Echoes).  It is planned again once they show, or after `ECHO_LIMIT_S`.

A node's task also goes on by itself where only the node's own pods stop it (no watch
covers workload pods): it reads the node's pods once the chain needs them (after the
cordon, so no pod bound meanwhile is missed), and after deleting or evicting pods it
watches them from that read's resourceVersion (kube/pod_following, at most `FOLLOW_S`)
until those pods are gone, then plans the rest of the chain on the pods as the watch left
them (upgrade_chain.continue_chain).  Should the watch fail, it reads them again on
`POD_POLL_DELAYS` instead.  So a node's GPU pod going costs a watch, not a pass.

The node tasks share a gate of a few concurrent calls; who goes first is `gate_rank`'s:
the node furthest along its chain (depth first), so that with no parallel limit the first
driver pods are deleted within seconds and their restarts overlap the other nodes' label
writes, instead of every node reaching its restart together at the end (issue 13).

Never does: read the cluster or the clock, or decide a transition (planning/upgrade does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Final

from ocp_gpu.model.upgrade_observations import PodRef, UpgradeNode, UpgradeState, WorkloadPod
from ocp_gpu.planning.upgrades import upgrade_chain, upgrade_plan
from ocp_gpu.planning.upgrades.upgrade_actions import DeletePods, EvictPods
from ocp_gpu.planning.upgrades.upgrade_budget import Budget, is_unavailable
from ocp_gpu.planning.upgrades.upgrade_table import HOLDS_SLOT

# How long a node whose writes are done stays unplanned, waiting for the watches to show them.
# NB: past it the node is planned on the view as it is (an admin may have relabelled it meanwhile);
# only that node waits, so this may be generous (at load 14-19 an echo took over 0.2 s).
ECHO_LIMIT_S: Final = 2.0

# Seconds between a node task's reads of the node's pods while the pods it deleted or evicted
# are still there (kwok removes a deleted pod in tens of milliseconds; a kubelet within the
# pod's grace period).  After the last one the task ends and the passes poll instead
# (reconcilers/upgrades.POLL_S, doubling): a pod that takes its 30 s grace costs no reads here.
POD_POLL_DELAYS: Final = (0.02, 0.03, 0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 0.8, 1.0)

# How long a node task watches the node's pods for the ones it deleted or evicted to go
# (kube/pod_following), instead of reading them on POD_POLL_DELAYS: as long as those reads
# covered. NB: past it the passes read them (a pod's long grace period costs no watch).
FOLLOW_S: Final = sum(POD_POLL_DELAYS)

# How many times one task reads a node's pods and goes on (a guard: a chain needs two, the
# read after the cordon and the read that sees the GPU pods gone).
MAX_ROUNDS: Final = 4


# The seed's states in the order a node passes them (drain-required between pod deletion and
# restart; upgrade-failed last: a failed node's writes are its way back out).
CHAIN_ORDER: Final = (
    UpgradeState.UNKNOWN,
    UpgradeState.UPGRADE_DONE,
    UpgradeState.UPGRADE_REQUIRED,
    UpgradeState.CORDON_REQUIRED,
    UpgradeState.WAIT_FOR_JOBS_REQUIRED,
    UpgradeState.POD_DELETION_REQUIRED,
    UpgradeState.DRAIN_REQUIRED,
    UpgradeState.POD_RESTART_REQUIRED,
    UpgradeState.VALIDATION_REQUIRED,
    UpgradeState.UNCORDON_REQUIRED,
    UpgradeState.UPGRADE_FAILED,
)
_PROGRESS: Final = {state: index for index, state in enumerate(CHAIN_ORDER)}


def gate_rank(state: UpgradeState, ticket: int) -> tuple[int, int]:
    """The order in which node tasks waiting for the gate get it: lowest first.

    A node's call in a later state goes before one in an earlier state (depth first: a node
    that started goes on to its driver restart before more nodes start); in the same state,
    first come first served (`ticket`: the order of asking).
    """
    return (-_PROGRESS.get(state, 0), ticket)


def counted(before: UpgradeNode, after: UpgradeNode) -> UpgradeNode:
    """The node as the budget counts it while steps taking it from `before` to `after` are written.

    NB: the writes land one by one, in an order the next pass does not know: the node holds
    a slot, and is unavailable, if it is so at either end (a node finishing its upgrade
    gives its slot back only once its upgrade-done is written; a node starting takes one
    from its first write).
    """
    holds = after.state if after.state in HOLDS_SLOT else before.state if before.state in HOLDS_SLOT else None
    down = is_unavailable(before) or is_unavailable(after)
    node = after
    if holds is not None and holds is not after.state:
        # Still holding the slot it frees in these writes.
        node = dataclasses.replace(node, state_label=holds.value)
    if down and not is_unavailable(node):
        # Cordoned or about to be at some point of these writes.
        node = dataclasses.replace(node, unschedulable=True)
    return node


def runs_alone(plan: upgrade_plan.NodePlan, budget: Budget) -> bool:
    """Whether the node's steps run as a task of its own (an upgrade under way on it).

    The others (a label on a node that takes no slot: upgrade-done -> upgrade-required on
    every node as an upgrade begins, a first upgrade-done) are written by a few workers for
    the whole pass, after the nodes under way (reconcilers/upgrade_tasks: their gate).
    """
    return plan.node in budget.starts or plan.state in HOLDS_SLOT or plan.state_after in HOLDS_SLOT


def removed_pods(steps: Iterable[upgrade_plan.NodePlan]) -> tuple[PodRef, ...]:
    """The pods these steps delete or evict (their going is seen only by reading the node's pods)."""
    return tuple(
        ref
        for step in steps
        for action in step.actions
        if isinstance(action, DeletePods | EvictPods)
        for ref in action.pods
    )


def are_gone(removed: Sequence[PodRef], pods: Iterable[WorkloadPod]) -> bool:
    """None of the `removed` pods is still Pending or Running on the node (a new pod of the same
    name is another pod)."""
    uids = {ref.uid for ref in removed}
    return not any(pod.active and pod.ref.uid in uids for pod in pods)


def read_beside(
    node: UpgradeNode, steps: Sequence[upgrade_plan.NodePlan], wanted: frozenset[UpgradeState]
) -> int | None:
    """Where the node's pods may be read beside the rest of `steps`: the index of a last step
    that only writes the label of a state needing them, once the steps before it leave the node
    cordoned; None when they are read after every step.

    NB: read once the node is cordoned, no pod bound after the read can be missed (but a
    DaemonSet's, which pod deletion leaves alone); the label itself changes nothing on the node.
    Saves one round trip per node on the way to its GPU pods' deletion.
    """
    if not steps:
        return None
    *head, last = steps
    if last.transition not in wanted or last.actions:
        return None
    for step in head:
        node = upgrade_chain.node_after(node, step)
    return len(head) if node.unschedulable else None


# The upgrade loop's coalescing window while node tasks run or their writes are not yet seen:
# then nearly every wake-up is a node's own write coming back (8 labels a node, its pods'
# events), which moves no other node; what does (a driver or validator pod turning Ready, a
# slot freed with a node waiting for it) runs the next pass at once (`hands_on_slot`,
# planning/urgency).  NB: at 0.05 s the passes ran back to back at 1,000 nodes (93 s of operator
# CPU for an upgrade that took 46.9 s one pass at a time).
BUSY_WINDOW_S: Final = 0.25


def hands_on_slot(before: UpgradeNode, after: UpgradeNode, giver: bool, waiting: bool) -> bool:
    """Whether a node's finished writes freed a slot that a waiting node should get at once.

    Not when the pass that planned them already granted that slot (the node is a `giver`: its
    taker starts right after it), nor when no node was waiting for a slot in that pass.
    """
    return waiting and not giver and before.state in HOLDS_SLOT and after.state not in HOLDS_SLOT
