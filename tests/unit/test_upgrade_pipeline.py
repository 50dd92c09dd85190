"""We test these aspects of `planning.upgrades.upgrade_pipeline` (passes that do not wait for the nodes'
writes):

- a node whose writes are under way counts as holding a slot, and as unavailable, if it is so
  before or after them; once written, as its writes left it;
- a pass never plans a node in flux, never starts it, and never grants the slot it still holds;
- a node under way runs as a task of its own; a label on a node that takes no slot does not;
- the node's pods are read beside its last label once the node is cordoned, not before;
- a freed slot runs the next pass at once only when no node took it in the pass and one waits;
- the pods a step deletes or evicts, and when they are gone (another pod of the same name is not them);
- whole upgrades with passes at any moment between any two writes of the nodes' tasks (random
  interleavings, tasks going on through the node's pods by themselves): maxParallelUpgrades and
  maxUnavailable hold after every single write, and every node goes through exactly the states
  of one step per pass.
"""

from __future__ import annotations

import dataclasses
import datetime
import random

import pytest

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy, scaled_max_unavailable
from ocp_gpu.model.upgrade_observations import PodRef, UpgradeNode, UpgradeState
from ocp_gpu.planning.upgrades import upgrade_chain, upgrade_pipeline, upgrade_plan
from ocp_gpu.planning.upgrades.upgrade_budget import is_unavailable
from tests.unit._upgrades import CURRENT, NOW, OURS, S, World, annotate, node, pod, policy, snapshot


def test_a_node_finishing_holds_its_slot_and_stays_unavailable_until_written() -> None:
    before = node("n1", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
    after = dataclasses.replace(before, state_label=S.UPGRADE_DONE.value, unschedulable=False)
    counted = upgrade_pipeline.counted(before, after)
    assert counted.state in upgrade_plan.HOLDS_SLOT
    assert is_unavailable(counted)


def test_a_node_starting_holds_a_slot_from_its_first_write() -> None:
    before = node("n1", S.UPGRADE_REQUIRED)
    after = dataclasses.replace(before, state_label=S.POD_DELETION_REQUIRED.value, unschedulable=True)
    counted = upgrade_pipeline.counted(before, after)
    assert counted.state is S.POD_DELETION_REQUIRED
    assert is_unavailable(counted)


def test_a_label_that_takes_no_slot_counts_as_written() -> None:
    before = node("n1", S.UPGRADE_DONE)
    after = dataclasses.replace(before, state_label=S.UPGRADE_REQUIRED.value)
    counted = upgrade_pipeline.counted(before, after)
    assert counted == after
    assert not is_unavailable(counted)


def test_a_pass_plans_no_node_in_flux_and_grants_no_slot_it_holds() -> None:
    finishing = node("n1", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)
    waiting = node("n2", S.UPGRADE_REQUIRED)
    labelling = node("n3", S.UPGRADE_REQUIRED)
    upgrade_policy = policy(parallel=1, unavailable="100%")
    done = dataclasses.replace(finishing, state_label=S.UPGRADE_DONE.value, unschedulable=False)
    in_flux = {
        NodeName("n1"): upgrade_pipeline.counted(finishing, done),
        NodeName("n3"): labelling,
    }
    plan = upgrade_chain.plan_chained_upgrades(
        snapshot(finishing, waiting, labelling), upgrade_policy, NOW, in_flux
    )
    plans = plan.by_node()
    for name in ("n1", "n3"):
        assert plans[NodeName(name)].waiting == upgrade_plan.IN_FLUX_WAIT
        assert not plans[NodeName(name)].steps[0].actions
        assert plans[NodeName(name)].transition is None
    # n1 still holds its slot while its upgrade-done is being written: n2 waits.
    assert plan.budget.starts == ()
    assert plans[NodeName("n2")].transition is None
    # Once n1 is written and seen, the next pass grants it.
    again = upgrade_chain.plan_chained_upgrades(snapshot(done, waiting), upgrade_policy, NOW)
    assert upgrade_chain.states_passed(again.by_node()[NodeName("n2")])[0] is S.CORDON_REQUIRED


def test_an_upgrade_required_node_in_flux_is_never_started() -> None:
    labelling = node("n1", S.UPGRADE_REQUIRED)
    plan = upgrade_chain.plan_chained_upgrades(
        snapshot(labelling), policy(parallel=0, unavailable="100%"), NOW, {NodeName("n1"): labelling}
    )
    assert plan.budget.starts == ()
    assert upgrade_chain.states_passed(plan.nodes[0]) == ()


def test_nodes_under_way_run_alone_and_labels_do_not() -> None:
    fresh = [node(f"n{i}", S.UPGRADE_DONE) for i in range(3)]
    plan = upgrade_chain.plan_chained_upgrades(snapshot(*fresh), policy(parallel=1, unavailable="100%"), NOW)
    alone = [p.node for p in plan.nodes if upgrade_pipeline.runs_alone(p, plan.budget)]
    assert alone == [NodeName("n0")]
    assert all(p.state_after is S.UPGRADE_REQUIRED for p in plan.nodes if p.node != "n0")


def test_removed_pods_and_when_they_are_gone() -> None:
    plan = upgrade_chain.plan_chained_upgrades(
        snapshot(node("n1", S.UPGRADE_REQUIRED), pods=[pod("train")]), policy(), NOW
    )
    (removed,) = upgrade_pipeline.removed_pods(plan.nodes[0].steps)
    assert removed == pod("train").ref
    assert not upgrade_pipeline.are_gone([removed], [pod("train")])
    # Terminating but still Running: not gone.
    terminating = dataclasses.replace(pod("train"), terminating=True)
    assert not upgrade_pipeline.are_gone([removed], [terminating])
    assert upgrade_pipeline.are_gone([removed], [dataclasses.replace(pod("train"), phase="Succeeded")])
    assert upgrade_pipeline.are_gone([removed], [])
    # A new pod of the same name (another uid) is not the one deleted.
    newcomer = dataclasses.replace(
        pod("train"), ref=PodRef(namespace=removed.namespace, name=removed.name, uid="x")
    )
    assert upgrade_pipeline.are_gone([removed], [newcomer])
    assert upgrade_pipeline.are_gone([], [pod("train")])


def test_pods_are_read_beside_the_last_label_once_the_node_is_cordoned() -> None:
    upgrade_policy = policy()
    wanted = upgrade_plan.states_needing_pods(upgrade_policy)
    snap = snapshot(node("n1", S.UPGRADE_REQUIRED), read_pods=False)
    (plan,) = upgrade_chain.plan_chained_upgrades(snap, upgrade_policy, NOW).nodes
    steps = plan.steps
    assert [step.transition for step in steps][-1] is S.POD_DELETION_REQUIRED
    # The cordon goes with wait-for-jobs-required: pod-deletion-required's label and the read go together.
    assert upgrade_pipeline.read_beside(snap.nodes[0], steps, wanted) == len(steps) - 1
    # Not cordoned before that label (a schedulable node labelled by hand): read after it.
    schedulable = node("n1", S.WAIT_FOR_JOBS_REQUIRED)
    (by_hand,) = upgrade_chain.plan_chained_upgrades(
        snapshot(schedulable, read_pods=False), upgrade_policy, NOW
    ).nodes
    assert by_hand.steps[-1].transition is S.POD_DELETION_REQUIRED
    assert upgrade_pipeline.read_beside(schedulable, by_hand.steps, wanted) is None
    # A last step that does something on the node (deletes pods), or a state needing no pods: no.
    with_pods = upgrade_chain.plan_chained_upgrades(
        snapshot(node("n1", S.UPGRADE_REQUIRED), pods=[pod("train")]), upgrade_policy, NOW
    ).nodes[0]
    assert upgrade_pipeline.read_beside(snap.nodes[0], with_pods.steps, wanted) is None
    assert upgrade_pipeline.read_beside(snap.nodes[0], (), wanted) is None


def test_a_freed_slot_runs_the_next_pass_at_once_only_if_nobody_took_it_and_somebody_waits() -> None:
    before = node("n1", S.VALIDATION_REQUIRED, driver=CURRENT, cordon=OURS)
    done = dataclasses.replace(before, state_label=S.UPGRADE_DONE.value, unschedulable=False)
    assert upgrade_pipeline.hands_on_slot(before, done, giver=False, waiting=True)
    # Its taker was started by the pass that planned it, right after its writes.
    assert not upgrade_pipeline.hands_on_slot(before, done, giver=True, waiting=True)
    # Nobody waits for a slot (maxParallelUpgrades 0, or the last nodes).
    assert not upgrade_pipeline.hands_on_slot(before, done, giver=False, waiting=False)
    # Still holding its slot (its driver restart under way).
    restarting = dataclasses.replace(before, state_label=S.POD_RESTART_REQUIRED.value)
    assert not upgrade_pipeline.hands_on_slot(before, restarting, giver=False, waiting=True)


# --- whole upgrades, passes between any two writes ----------------------------------------------


@dataclasses.dataclass
class Task:
    """A node's task: the steps left to write, as a reconciler task would carry them."""

    name: NodeName
    steps: list[upgrade_plan.NodePlan]
    driver: upgrade_plan.DriverStatus
    before: UpgradeNode
    after: UpgradeNode
    # Must not write before these tasks wrote their first steps (the slot's giver, or every first-round node).
    after_tasks: list[Task]
    first_written: bool = False
    # Steps written since the node's pods were last read (the pods they removed).
    written: list[upgrade_plan.NodePlan] = dataclasses.field(default_factory=list)


def _counts(world: World, upgrade_policy: UpgradePolicy) -> tuple[int, int]:
    nodes = list(world.nodes.values())
    return (
        sum(n.state in upgrade_plan.HOLDS_SLOT for n in nodes),
        sum(is_unavailable(n) for n in nodes),
    )


def _start(
    world: World, upgrade_policy: UpgradePolicy, tasks: dict[NodeName, Task], unechoed: dict[NodeName, int]
) -> None:
    """One pass: plan on the world as it is, nodes with a task (or whose writes the watches do
    not show yet: `unechoed`, passes left) in flux; new tasks for the busy nodes."""
    for name in list(unechoed):
        unechoed[name] -= 1
        if unechoed[name] < 0:
            del unechoed[name]
    in_flux = {name: world.nodes[name] for name in unechoed}
    in_flux.update({name: upgrade_pipeline.counted(task.before, task.after) for name, task in tasks.items()})
    snap = world.snapshot(upgrade_policy)
    snap = dataclasses.replace(
        snap, pods={name: pods for name, pods in snap.pods.items() if name not in in_flux}
    )
    plan = upgrade_chain.plan_chained_upgrades(snap, upgrade_policy, world.now, in_flux)
    firsts: dict[NodeName, Task] = {}
    started: list[Task] = []
    for node_plan in plan.nodes:
        if node_plan.node in in_flux or not (
            node_plan.transition or node_plan.actions or node_plan.annotations or node_plan.then
        ):
            continue
        before = world.nodes[node_plan.node]
        after = before
        for step in node_plan.steps:
            after = upgrade_chain.node_after(after, step)
        task = Task(node_plan.node, list(node_plan.steps), node_plan.driver, before, after, [])
        started.append(task)
        if node_plan.node not in plan.after_others:
            firsts[node_plan.node] = task
    for task in started:
        if task.name in plan.after_others:
            giver = plan.slot_from.get(task.name)
            task.after_tasks = [firsts[giver]] if giver in firsts else list(firsts.values())
        tasks[task.name] = task


def _write_one(
    world: World, upgrade_policy: UpgradePolicy, task: Task, log: dict[NodeName, list[UpgradeState]]
) -> bool:
    """Write the task's next step; when its steps are out, go on through the node's pods as the
    reconciler's task does. False when the task is over."""
    if task.steps:
        step = task.steps.pop(0)
        n = world.nodes[task.name]
        for action in step.actions:
            n = world._act(n, action)
        if step.transition is not None:
            n = dataclasses.replace(n, state_label=step.transition.value)
            log.setdefault(task.name, []).append(step.transition)
        world.nodes[task.name] = annotate(n, step.annotations)
        task.written.append(step)
        if not task.steps:
            task.first_written = True
        return True
    left = world.nodes[task.name]
    if left.state not in upgrade_plan.states_needing_pods(upgrade_policy):
        return False
    pods = tuple(world.pods.get(task.name, ()))
    if not upgrade_pipeline.are_gone(upgrade_pipeline.removed_pods(task.written), pods):
        return False
    shared = upgrade_plan.PassInputs(
        dataclasses.replace(world.snapshot(upgrade_policy), pods={task.name: pods}),
        upgrade_policy,
        world.now,
        upgrade_plan.select_starts((), {}, upgrade_policy),
    )
    more = upgrade_chain.continue_chain(left, task.driver, shared)
    task.written = []
    task.steps = list(more)
    return bool(more)


def _run_pipelined(
    upgrade_policy: UpgradePolicy, count: int, gpu_pods: bool, validators: bool, seed: int
) -> dict[NodeName, list[UpgradeState]]:
    rng = random.Random(seed)
    world = World(
        nodes={NodeName(f"n{i:02d}"): node(f"n{i:02d}", S.UPGRADE_DONE) for i in range(count)},
        pods={NodeName(f"n{i:02d}"): [pod(f"job{i}", f"n{i:02d}")] if gpu_pods else [] for i in range(count)},
        validator_deployed=validators,
    )
    unavailable_limit = scaled_max_unavailable(upgrade_policy.max_unavailable, count)
    log: dict[NodeName, list[UpgradeState]] = {}
    tasks: dict[NodeName, Task] = {}
    unechoed: dict[NodeName, int] = {}
    for _ in range(20_000):
        runnable = [task for task in tasks.values() if all(other.first_written for other in task.after_tasks)]
        if not tasks or rng.random() < 0.15 or not runnable:
            _start(world, upgrade_policy, tasks, unechoed)
            world.now += datetime.timedelta(seconds=1)
            if not tasks and not unechoed and all(n.state is S.UPGRADE_DONE for n in world.nodes.values()):
                return log
            continue
        task = rng.choice(runnable)
        if not _write_one(world, upgrade_policy, task, log):
            del tasks[task.name]
            # The watches show its writes some passes later.
            unechoed[task.name] = rng.choice((0, 1, 2, 30))
            continue
        held, down = _counts(world, upgrade_policy)
        if upgrade_policy.max_parallel_upgrades:
            assert held <= upgrade_policy.max_parallel_upgrades, f"after a write of {task.name}"
        assert down <= unavailable_limit, f"after a write of {task.name}"
    raise AssertionError("the upgrade never finished")


@pytest.mark.parametrize("parallel", [1, 3, 0])
@pytest.mark.parametrize("unavailable", ["100%", "2"])
@pytest.mark.parametrize("gpu_pods", [False, True], ids=["no-gpu-pods", "gpu-pods"])
@pytest.mark.parametrize("validators", [False, True], ids=["no-validator", "validator"])
@pytest.mark.parametrize("seed", range(4))
def test_pipelined_passes_keep_the_budget_at_every_write_and_every_nodes_states(
    parallel: int, unavailable: str, gpu_pods: bool, validators: bool, seed: int
) -> None:
    upgrade_policy = policy(parallel=parallel, unavailable=unavailable)
    log = _run_pipelined(upgrade_policy, 7, gpu_pods, validators, seed)
    expected = [
        S.UPGRADE_REQUIRED,
        S.CORDON_REQUIRED,
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.POD_RESTART_REQUIRED,
        *([S.VALIDATION_REQUIRED] if validators else []),
        S.UNCORDON_REQUIRED,
        S.UPGRADE_DONE,
    ]
    assert log == {NodeName(f"n{i:02d}"): expected for i in range(7)}


def test_the_gate_serves_the_node_furthest_along_its_chain_first() -> None:
    # Asked in this order: a node starting, one about to delete its GPU pods, one restarting.
    asked = [S.UPGRADE_DONE, S.POD_DELETION_REQUIRED, S.CORDON_REQUIRED, S.POD_RESTART_REQUIRED]
    ranks = {state: upgrade_pipeline.gate_rank(state, ticket) for ticket, state in enumerate(asked)}
    assert sorted(asked, key=ranks.__getitem__) == [
        S.POD_RESTART_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.CORDON_REQUIRED,
        S.UPGRADE_DONE,
    ]


def test_the_gate_serves_nodes_in_the_same_state_in_the_order_they_asked() -> None:
    first = upgrade_pipeline.gate_rank(S.WAIT_FOR_JOBS_REQUIRED, 7)
    second = upgrade_pipeline.gate_rank(S.WAIT_FOR_JOBS_REQUIRED, 8)
    assert first < second


def test_every_state_of_the_seed_has_a_place_in_the_gate_order() -> None:
    assert set(upgrade_pipeline.CHAIN_ORDER) == set(UpgradeState)
    # The states a chain passes, in the seed's order, rank ever earlier at the gate.
    chain = [
        S.UPGRADE_REQUIRED,
        S.CORDON_REQUIRED,
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.POD_RESTART_REQUIRED,
        S.VALIDATION_REQUIRED,
        S.UNCORDON_REQUIRED,
    ]
    ranks = [upgrade_pipeline.gate_rank(state, 0) for state in chain]
    assert ranks == sorted(ranks, reverse=True)
