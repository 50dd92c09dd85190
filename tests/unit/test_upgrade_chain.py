"""We test these aspects of `planning.upgrades.upgrade_chain` (the transitions chained within one pass):

- a node goes as far in one pass as nothing external stops it, and stops where it must wait
  (a pod deletion, the driver pod's restart, a validator, jobs, pods not read);
- the states (labels, hence Events) a node goes through are exactly those of one step per
  pass, for whole simulated upgrades across policies, validators and GPU pods;
- chained, the same upgrade takes fewer passes, and maxParallelUpgrades / maxUnavailable
  hold after every pass;
- a slot freed in a pass is granted again in that pass; a slot free as read, granted to a
  node that became upgrade-required in the pass, starts it at once (waits for nobody);
- a paused upgrade chains nothing;
- the echoes a pass awaits: the last label each node's steps wrote and the driver pods deleted;
  echoed once the view shows those labels and those pods terminating or gone;
- the pods of most nodes, from 50 on, are read by one LIST of every bound pod, fewer by a LIST each.
"""

from __future__ import annotations

import dataclasses

import pytest

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import DriverPod, UpgradeState
from ocp_gpu.planning.upgrades import upgrade_chain, upgrade_plan
from tests.unit._upgrades import (
    ADMIN,
    CURRENT,
    NOW,
    OURS,
    S,
    World,
    apply_in_worst_order,
    node,
    plan_one,
    pod,
    policy,
    snapshot,
    validator,
)


def chained_one(
    n: object, upgrade_policy: UpgradePolicy | None = None, **snapshot_args: object
) -> upgrade_plan.NodePlan:
    snap = snapshot(n, **snapshot_args)  # type: ignore[arg-type]
    return upgrade_chain.plan_chained_upgrades(snap, upgrade_policy or policy(), NOW).nodes[0]


def test_a_granted_node_goes_to_its_driver_restart_in_one_pass() -> None:
    plan = chained_one(node("n1", S.UPGRADE_REQUIRED))
    assert upgrade_chain.states_passed(plan) == (
        S.CORDON_REQUIRED,
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.POD_RESTART_REQUIRED,
    )
    # The last step stays and deletes the outdated driver pod: its replacement is the cluster's work.
    last = plan.steps[-1]
    assert last.transition is None
    assert [type(action) for action in last.actions] == [upgrade_plan.DeleteDriverPod]
    # The cordon is made on the way (with the transition out of cordon-required).
    assert any(isinstance(action, upgrade_plan.Cordon) for step in plan.steps for action in step.actions)
    assert plan.state_after is S.POD_RESTART_REQUIRED


def test_the_chain_stops_at_gpu_pods_being_deleted() -> None:
    plan = chained_one(node("n1", S.UPGRADE_REQUIRED), pods=[pod("train")])
    assert plan.state_after is S.POD_DELETION_REQUIRED
    last = plan.steps[-1]
    assert last.transition is None
    assert last.actions == (upgrade_plan.DeletePods((pod("train").ref,)),)


def test_pods_not_read_stop_the_chain_and_reading_them_goes_on() -> None:
    upgrade_policy = policy()
    snap = snapshot(node("n1", S.UPGRADE_REQUIRED), read_pods=False)
    plan = upgrade_chain.plan_chained_upgrades(snap, upgrade_policy, NOW)
    assert plan.nodes[0].state_after is S.POD_DELETION_REQUIRED
    assert plan.nodes[0].steps[-1].transition is S.POD_DELETION_REQUIRED
    # The node's task reads its pods (after the cordon) and goes on from where the chain stopped.
    left = snap.nodes[0]
    for step in plan.nodes[0].steps:
        left = upgrade_chain.node_after(left, step)
    read = upgrade_plan.PassInputs(
        dataclasses.replace(snap, pods={NodeName("n1"): ()}), upgrade_policy, NOW, plan.budget
    )
    more = upgrade_chain.continue_chain(left, plan.nodes[0].driver, read)
    assert [step.transition for step in more] == [S.POD_RESTART_REQUIRED, None]
    assert [type(action) for action in more[-1].actions] == [upgrade_plan.DeleteDriverPod]
    # The same in one pass with the pods read: the same states.
    again = upgrade_chain.plan_chained_upgrades(snapshot(node("n1", S.UPGRADE_REQUIRED)), upgrade_policy, NOW)
    assert upgrade_chain.states_passed(again.nodes[0]) == (
        *upgrade_chain.states_passed(plan.nodes[0]),
        S.POD_RESTART_REQUIRED,
    )


def test_jobs_to_wait_for_stop_the_chain() -> None:
    upgrade_policy = policy(wait_selector="app=train")
    plan = chained_one(
        node("n1", S.UPGRADE_REQUIRED),
        upgrade_policy,
        pods=[pod("train", gpu=False, pod_labels={"app": "train"})],
    )
    assert plan.state_after is S.WAIT_FOR_JOBS_REQUIRED
    assert plan.steps[-1].transition is S.WAIT_FOR_JOBS_REQUIRED


@pytest.mark.parametrize(
    ("validators", "expected"),
    [
        pytest.param(None, (S.UNCORDON_REQUIRED, S.UPGRADE_DONE), id="no-validator"),
        pytest.param(
            [validator("n1")], (S.VALIDATION_REQUIRED, S.UNCORDON_REQUIRED, S.UPGRADE_DONE), id="validated"
        ),
        pytest.param([validator("n1", ready=False)], (S.VALIDATION_REQUIRED,), id="validator-not-ready"),
    ],
)
def test_a_ready_driver_finishes_as_far_as_validation_allows(
    validators: list[object] | None, expected: tuple[UpgradeState, ...]
) -> None:
    n = node("n1", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
    plan = chained_one(n, validators=validators)
    assert upgrade_chain.states_passed(plan) == expected
    if expected[-1] is S.UPGRADE_DONE:
        assert any(
            isinstance(action, upgrade_plan.Uncordon) for step in plan.steps for action in step.actions
        )


def test_a_slot_freed_in_a_pass_is_granted_in_that_pass() -> None:
    finishing = node("n1", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
    waiting = node("n2", S.UPGRADE_REQUIRED)
    upgrade_policy = policy(parallel=1, unavailable="100%")
    single = upgrade_plan.plan_upgrades(snapshot(finishing, waiting), upgrade_policy, NOW).by_node()
    assert single[NodeName("n2")].transition is None  # one step per pass: n2 waits for the slot
    chained = upgrade_chain.plan_chained_upgrades(snapshot(finishing, waiting), upgrade_policy, NOW)
    plan = chained.by_node()
    assert plan[NodeName("n1")].state_after is S.UPGRADE_DONE
    assert upgrade_chain.states_passed(plan[NodeName("n2")])[0] is S.CORDON_REQUIRED
    # n2 takes the slot n1 frees: its steps are carried out only after n1's.
    assert chained.after_others == {NodeName("n2")}
    assert chained.slot_from == {NodeName("n2"): NodeName("n1")}


def test_each_freed_slot_pairs_one_started_node_with_the_node_that_frees_it() -> None:
    finishing = [node(f"a{i}", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS) for i in range(2)]
    # Held by an admin's cordon: its upgrade-done leaves the node unschedulable, so it frees
    # a parallel slot but no maxUnavailable one, and pairs with nobody.
    admin = node("b0", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=ADMIN)
    still = node("c0", S.POD_RESTART_REQUIRED, driver="starting", cordon=OURS)
    waiting = [node(f"w{i}", S.UPGRADE_REQUIRED) for i in range(5)]
    chained = upgrade_chain.plan_chained_upgrades(
        snapshot(*finishing, admin, still, *waiting), policy(parallel=4, unavailable="100%"), NOW
    )
    # Three slots freed (a0, a1, b0): three nodes start; two of them have a giver of their own.
    assert chained.after_others == {NodeName("w0"), NodeName("w1"), NodeName("w2")}
    assert chained.slot_from == {NodeName("w0"): NodeName("a0"), NodeName("w1"): NodeName("a1")}


def test_the_first_pass_of_an_upgrade_starts_its_nodes_at_once() -> None:
    # Every node upgrade-done with an outdated driver: the upgrade has just begun.
    fresh = [node(f"n{i}", S.UPGRADE_DONE) for i in range(4)]
    upgrade_policy = policy(parallel=2, unavailable="100%")
    chained = upgrade_chain.plan_chained_upgrades(snapshot(*fresh), upgrade_policy, NOW)
    plan = chained.by_node()
    assert upgrade_chain.states_passed(plan[NodeName("n0")])[:2] == (S.UPGRADE_REQUIRED, S.CORDON_REQUIRED)
    assert chained.budget.starts == (NodeName("n0"), NodeName("n1"))
    # Both slots were free as read: nobody's writes need to come first.
    assert chained.after_others == frozenset()
    assert chained.slot_from == {}


def test_slots_free_as_read_go_first_and_freed_ones_wait_for_their_giver() -> None:
    busy = node("a0", S.POD_RESTART_REQUIRED, driver="starting", cordon=OURS)
    finishing = node("b0", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
    fresh = [node(f"w{i}", S.UPGRADE_DONE) for i in range(3)]
    chained = upgrade_chain.plan_chained_upgrades(
        snapshot(busy, finishing, *fresh), policy(parallel=3, unavailable="100%"), NOW
    )
    # One slot free as read (3 - a0 - b0), one freed by b0 in this pass.
    assert chained.budget.starts == (NodeName("w0"), NodeName("w1"))
    assert chained.after_others == {NodeName("w1")}
    assert chained.slot_from == {NodeName("w1"): NodeName("b0")}


def test_a_slot_free_as_read_but_over_max_unavailable_still_waits() -> None:
    # maxUnavailable 1 of 3: the node b0 uncordons is the one a new cordon may replace.
    finishing = node("b0", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
    fresh = [node(f"w{i}", S.UPGRADE_DONE) for i in range(2)]
    chained = upgrade_chain.plan_chained_upgrades(
        snapshot(finishing, *fresh), policy(parallel=0, unavailable="1"), NOW
    )
    assert chained.budget.starts == (NodeName("w0"),)
    assert chained.after_others == {NodeName("w0")}
    assert chained.slot_from == {NodeName("w0"): NodeName("b0")}


def test_a_slot_still_held_is_not_granted_twice() -> None:
    busy = node("n1", S.POD_RESTART_REQUIRED, driver="starting", cordon=OURS)
    waiting = node("n2", S.UPGRADE_REQUIRED)
    plan = upgrade_chain.plan_chained_upgrades(
        snapshot(busy, waiting), policy(parallel=1, unavailable="100%"), NOW
    ).by_node()
    assert plan[NodeName("n2")].state_after is S.UPGRADE_REQUIRED
    assert plan[NodeName("n2")].transition is None


def test_paused_chains_nothing() -> None:
    n = node("n1", S.UPGRADE_REQUIRED)
    assert chained_one(n, policy(auto=False)) == plan_one(n, policy(auto=False))


# --- whole upgrades: chained against one step per pass --------------------------------------------


def _apply(
    world: World,
    plan: upgrade_plan.UpgradePlan,
    log: dict[NodeName, list[UpgradeState]],
    max_parallel: int = 0,
) -> None:
    """Carry out every step of every node plan as the reconciler does (World: a healthy cluster).

    In the worst order the reconciler allows: the nodes that wait for nobody first, those that
    free a slot last among them, then the nodes started after others; with `max_parallel`,
    the slots held are checked after each node's writes.
    """

    def check_slots(node: NodeName) -> None:
        if max_parallel:
            assert _in_flight(world) <= max_parallel, f"after {node}'s writes"

    apply_in_worst_order(world, plan, check_slots, lambda node, state: log.setdefault(node, []).append(state))


def _in_flight(world: World) -> int:
    return sum(n.state in upgrade_plan.HOLDS_SLOT for n in world.nodes.values())


def _run(
    chained: bool, upgrade_policy: UpgradePolicy, count: int, gpu_pods: bool, validators: bool
) -> tuple[dict[NodeName, list[UpgradeState]], int]:
    world = World(
        nodes={NodeName(f"n{i:02d}"): node(f"n{i:02d}", S.UPGRADE_DONE) for i in range(count)},
        pods={NodeName(f"n{i:02d}"): [pod(f"job{i}", f"n{i:02d}")] if gpu_pods else [] for i in range(count)},
        validator_deployed=validators,
    )
    log: dict[NodeName, list[UpgradeState]] = {}
    for passes in range(1, 500):
        snap = world.snapshot(upgrade_policy)
        if chained:
            plan = upgrade_chain.plan_chained_upgrades(snap, upgrade_policy, world.now)
            needing = upgrade_plan.states_needing_pods(upgrade_policy)
            wanted = [p.node for p in plan.nodes if p.state_after in needing and p.node not in snap.pods]
            if wanted:
                pods = {**snap.pods, **{name: tuple(world.pods.get(name, ())) for name in wanted}}
                plan = upgrade_chain.plan_chained_upgrades(
                    dataclasses.replace(snap, pods=pods), upgrade_policy, world.now
                )
        else:
            plan = upgrade_plan.plan_upgrades(snap, upgrade_policy, world.now)
        _apply(world, plan, log, upgrade_policy.max_parallel_upgrades if chained else 0)
        held = _in_flight(world)
        if upgrade_policy.max_parallel_upgrades:
            assert held <= upgrade_policy.max_parallel_upgrades
        if all(n.state is S.UPGRADE_DONE for n in world.nodes.values()) and not any(
            step.transition or step.actions for p in plan.nodes for step in p.steps
        ):
            return log, passes
    raise AssertionError("the upgrade never finished")


@pytest.mark.parametrize("parallel", [1, 3, 0])
@pytest.mark.parametrize("gpu_pods", [False, True], ids=["no-gpu-pods", "gpu-pods"])
@pytest.mark.parametrize("validators", [False, True], ids=["no-validator", "validator"])
def test_chaining_keeps_every_nodes_states_and_saves_passes(
    parallel: int, gpu_pods: bool, validators: bool
) -> None:
    upgrade_policy = policy(parallel=parallel, unavailable="100%")
    single, single_passes = _run(False, upgrade_policy, 7, gpu_pods, validators)
    chained, chained_passes = _run(True, upgrade_policy, 7, gpu_pods, validators)
    assert chained == single
    assert all(states[-1] is S.UPGRADE_DONE for states in chained.values())
    assert chained_passes < single_passes


def test_an_admins_cordon_survives_a_chained_upgrade() -> None:
    n = dataclasses.replace(node("n1", S.UPGRADE_REQUIRED), unschedulable=True)
    plan = chained_one(n)
    # The admin's cordon is recorded on entering cordon-required, and never replaced by ours.
    assert not any(isinstance(action, upgrade_plan.Cordon) for step in plan.steps for action in step.actions)
    after = n
    for step in plan.steps:
        after = upgrade_chain.node_after(after, step)
    assert after.initially_unschedulable and after.unschedulable and not after.cordoned_by_upgrade


def test_most_nodes_pods_are_read_at_once() -> None:
    assert upgrade_chain.reads_every_pod(1000, 1000)
    assert upgrade_chain.reads_every_pod(50, 100)
    # A few nodes (maxParallelUpgrades 10 at 1,000 nodes), or a minority of a large cluster: one each.
    assert not upgrade_chain.reads_every_pod(10, 1000)
    assert not upgrade_chain.reads_every_pod(49, 60)
    assert not upgrade_chain.reads_every_pod(400, 1000)


def test_a_pass_awaits_the_echo_of_its_last_labels_and_deleted_driver_pods() -> None:
    chained = upgrade_chain.plan_chained_upgrades(
        snapshot(
            node("n1", S.UPGRADE_REQUIRED), node("n2", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
        ),
        policy(parallel=2, unavailable="100%"),
        NOW,
    )
    plans = chained.by_node()
    echoes = upgrade_chain.awaited_echoes(list(chained.nodes))
    assert echoes.labels == {NodeName("n1"): S.POD_RESTART_REQUIRED, NodeName("n2"): S.UPGRADE_DONE}
    (deleted,) = [
        a.pod
        for step in plans[NodeName("n1")].steps
        for a in step.actions
        if isinstance(a, upgrade_plan.DeleteDriverPod)
    ]
    assert echoes.deleted == {deleted.name}
    # Only the nodes whose steps succeeded are awaited.
    assert upgrade_chain.awaited_echoes([plans[NodeName("n2")]]).labels == {NodeName("n2"): S.UPGRADE_DONE}

    written = {NodeName("n1"): S.POD_RESTART_REQUIRED.value, NodeName("n2"): S.UPGRADE_DONE.value}
    old = DriverPod(ref=deleted, node=NodeName("n1"), daemonset="ds", revision_hash="old", ready=True)
    stale = {**written, NodeName("n2"): S.UNCORDON_REQUIRED.value}
    assert not upgrade_chain.is_echoed(echoes, stale, {})
    # The label is there, the deleted pod not yet seen terminating: not yet.
    assert not upgrade_chain.is_echoed(echoes, written, {deleted.name: old})
    assert upgrade_chain.is_echoed(
        echoes, written, {deleted.name: dataclasses.replace(old, terminating=True)}
    )
    assert upgrade_chain.is_echoed(echoes, written, {})
    assert upgrade_chain.is_echoed(upgrade_chain.Echoes(), {}, {})
