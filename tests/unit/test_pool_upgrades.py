"""We test these aspects of `planning.upgrades.pool_upgrades` (each NVIDIADriver pool under its own rules):

- without pools a pass is exactly upgrade_chain's (any cluster, any policy);
- a pool with autoUpgrade off is paused: its nodes neither move nor are written on but for the
  eviction annotation, and say which NVIDIADriver pauses them; the other pools go on;
- a held pool (invalid spec): nothing at all is written on its nodes;
- maxParallelUpgrades and maxUnavailable are counted within each pool (whole simulated upgrades,
  after every node's writes), so a slot one pool holds never blocks another;
- the wait for jobs, GPU pod deletion and drain of a node follow its pool's rules, in the pass and
  in its task (PassInputs.policy_for), as do which nodes' pods are read and whether a pass polls;
- nodes of no pool (or of a pool not yet known) follow the ClusterPolicy's rules;
- the metrics: available slots are the pools' sum;
- a paused pool's NVIDIADriver status names the field that pauses it and its outdated DaemonSets.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocp_gpu.model import driver_snapshot, labels, nvidia_driver_spec
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import UpgradeNode, UpgradeSnapshot, UpgradeState
from ocp_gpu.planning.drivers import driver_pools
from ocp_gpu.planning.upgrades import pool_upgrades, upgrade_chain, upgrade_plan
from ocp_gpu.planning.upgrades.pool_upgrades import PoolRules, UpgradeRules
from ocp_gpu.reconcilers import nvidia_drivers
from tests.unit._upgrades import (
    CURRENT,
    CURRENT_HASH,
    NOW,
    OUTDATED,
    S,
    World,
    apply_in_worst_order,
    node,
    pod,
    policy,
    snapshot,
)
from tests.unit.test_upgrade_planning import clusters, policies

hypothesis_settings = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def in_pool(n: UpgradeNode, pool: str) -> UpgradeNode:
    return dataclasses.replace(n, pool=pool)


def rules(default: UpgradePolicy | None = None, **pools: UpgradePolicy | str) -> UpgradeRules:
    """Pools by name: a policy, or a reason to hold it."""
    return UpgradeRules(
        default or policy(),
        {
            name: PoolRules(name, given, "")
            if isinstance(given, UpgradePolicy)
            else PoolRules(name, policy(), held=given)
            for name, given in pools.items()
        },
    )


@hypothesis_settings
@given(clusters(), policies)
def test_without_pools_a_pass_is_the_chained_one(
    snap: UpgradeSnapshot, upgrade_policy: UpgradePolicy
) -> None:
    expected = upgrade_chain.plan_chained_upgrades(snap, upgrade_policy, NOW)
    assert pool_upgrades.plan_pool_upgrades(snap, UpgradeRules(upgrade_policy), NOW) == expected
    # a pool no node belongs to changes nothing for the others' nodes either
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(upgrade_policy, other=policy(auto=False)), NOW)
    assert plan.nodes == expected.nodes and plan.budget == expected.budget


def test_a_paused_pool_stays_and_the_other_goes_on() -> None:
    snap = snapshot(
        in_pool(node("a1", S.UPGRADE_REQUIRED), "a"),
        in_pool(node("a2", S.POD_DELETION_REQUIRED, cordon="ours"), "a"),
        in_pool(node("b1", S.UPGRADE_REQUIRED), "b"),
    )
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(a=policy(auto=False), b=policy()), NOW)
    plans = plan.by_node()
    for name in ("a1", "a2"):
        paused = plans[NodeName(name)]
        assert paused.paused and paused.transition is None and paused.actions == () and paused.then == ()
        assert "NVIDIADriver a" in paused.waiting and "autoUpgrade false" in paused.waiting
    assert upgrade_chain.states_passed(plans[NodeName("b1")])[0] is S.CORDON_REQUIRED
    assert plan.auto_upgrade and not plans[NodeName("b1")].paused
    # the metrics count the moving pool's slots only
    assert len(plan.pool_budgets) == 1 and plan.pool_budgets[0].total == 1


def test_a_held_pool_writes_nothing() -> None:
    snap = snapshot(
        in_pool(node("a1", S.UPGRADE_REQUIRED, enabled=True), "a"),
        in_pool(node("a2", S.CORDON_REQUIRED, cordon="ours"), "a"),
    )
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(a="has an invalid spec"), NOW)
    assert not plan.auto_upgrade
    for held in plan.nodes:
        assert (held.transition, held.actions, dict(held.annotations)) == (None, (), {})
        assert held.paused and held.waiting == "held: NVIDIADriver a has an invalid spec"
    # whereas a paused pool hands eviction back to k8s-driver-manager (the annotation goes)
    paused = pool_upgrades.plan_pool_upgrades(snap, rules(a=policy(auto=False)), NOW)
    assert all(dict(p.annotations) == {"nvidia.com/gpu-driver-upgrade-enabled": None} for p in paused.nodes)
    assert (
        pool_upgrades.UpgradeRules(policy(auto=False), {"a": PoolRules("a", policy(), "bad")}).auto_upgrade
        is False
    )


def test_slots_are_counted_within_each_pool() -> None:
    # Pool a: one slot, held by a1. Pool b: one slot, free. The ClusterPolicy's alone would start nothing.
    snap = snapshot(
        in_pool(node("a1", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon="ours"), "a"),
        in_pool(node("a2", S.UPGRADE_REQUIRED), "a"),
        in_pool(node("b1", S.UPGRADE_REQUIRED), "b"),
        in_pool(node("b2", S.UPGRADE_REQUIRED), "b"),
    )
    one = policy(parallel=1, unavailable="100%")
    alone = upgrade_chain.plan_chained_upgrades(snap, one, NOW)
    # one pool of four nodes: one slot, one start
    assert len([p for p in alone.nodes if S.CORDON_REQUIRED in upgrade_chain.states_passed(p)]) == 1
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(a=one, b=one), NOW)
    started = {p.node for p in plan.nodes if S.CORDON_REQUIRED in upgrade_chain.states_passed(p)}
    # a2 takes the slot a1 frees in this pass (after a1's writes), b1 pool b's free one at once
    assert started == {"a2", "b1"}
    assert plan.after_others == {"a2"} and plan.slot_from == {"a2": "a1"}
    assert len(plan.pool_budgets) == 2
    # every pool's slot is taken again: none available
    assert upgrade_plan.summarize(plan).available == 0
    wider = pool_upgrades.plan_pool_upgrades(
        snap, rules(a=one, b=policy(parallel=4, unavailable="100%")), NOW
    )
    assert {p.node for p in wider.nodes if S.CORDON_REQUIRED in upgrade_chain.states_passed(p)} == {
        "a2",
        "b1",
        "b2",
    }


def test_max_unavailable_is_a_share_of_the_pools_nodes() -> None:
    # 4 nodes in pool a, 1 in pool b; 25% of pool b's one node rounds up to 1
    nodes = [in_pool(node(f"a{i}", S.UPGRADE_REQUIRED), "a") for i in range(4)]
    snap = snapshot(*nodes, in_pool(node("b1", S.UPGRADE_REQUIRED), "b"))
    quarter = policy(parallel=0, unavailable="25%")
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(a=quarter, b=quarter), NOW)
    budgets = {budget.total: budget for budget in plan.pool_budgets}
    assert budgets[4].max_unavailable == 1 and budgets[1].max_unavailable == 1
    started = sorted(p.node for p in plan.nodes if S.CORDON_REQUIRED in upgrade_chain.states_passed(p))
    assert started == ["a0", "b1"]


def test_each_node_deletes_its_gpu_pods_by_its_pools_rules() -> None:
    # a bare GPU pod (no controller): only force deletes it
    snap = snapshot(
        in_pool(node("a1", S.POD_DELETION_REQUIRED, cordon="ours"), "a"),
        in_pool(node("b1", S.POD_DELETION_REQUIRED, cordon="ours"), "b"),
        pods=[pod("bare-a", "a1", controller=None), pod("bare-b", "b1", controller=None)],
    )
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(a=policy(force=True), b=policy(force=False)), NOW)
    plans = plan.by_node()
    deleted = [a for a in plans[NodeName("a1")].actions if isinstance(a, upgrade_plan.DeletePods)]
    assert [ref.name for action in deleted for ref in action.pods] == ["bare-a"]
    # without force (and no drain) the bare pod cannot go: the node fails, nothing deleted
    assert upgrade_chain.states_passed(plans[NodeName("b1")]) == (S.UPGRADE_FAILED,)
    assert all(step.actions == () for step in plans[NodeName("b1")].steps)
    # the node tasks plan on with the same rules
    shared = upgrade_plan.PassInputs(snap, policy(force=False), NOW, plan.budget, plan.node_policies)
    assert shared.policy_for(NodeName("a1")).gpu_pod_deletion.force
    assert not shared.policy_for(NodeName("b1")).gpu_pod_deletion.force
    steps = upgrade_chain.continue_chain(snap.nodes[0], plans[NodeName("a1")].driver, shared)
    assert steps and any(isinstance(a, upgrade_plan.DeletePods) for a in steps[0].actions)


def test_whose_pods_are_read_and_whether_a_pass_polls_follow_each_pools_rules() -> None:
    waiting = [
        in_pool(node("a1", S.WAIT_FOR_JOBS_REQUIRED, cordon="ours"), "a"),
        in_pool(node("b1", S.WAIT_FOR_JOBS_REQUIRED, cordon="ours"), "b"),
        in_pool(node("p1", S.POD_DELETION_REQUIRED, cordon="ours"), "paused"),
        node("c1", S.WAIT_FOR_JOBS_REQUIRED, cordon="ours"),
    ]
    given = rules(
        policy(wait_selector="app=training"),
        a=policy(wait_selector="app=training"),
        b=policy(wait_selector=""),
        paused=policy(auto=False),
    )
    # b waits for no job (no selector); a paused pool's nodes wait for no pod; c is the ClusterPolicy's
    assert pool_upgrades.nodes_needing_pods(waiting, given) == ("a1", "c1")
    snap = snapshot(*waiting, pods=[pod("job", "a1", pod_labels={"app": "training"}, gpu=False)])
    plan = pool_upgrades.plan_pool_upgrades(snap, given, NOW)
    assert upgrade_chain.waits_on_pods(plan, given.default)
    quiet = rules(policy(), paused=policy(auto=False))
    paused_only = pool_upgrades.plan_pool_upgrades(snapshot(waiting[2]), quiet, NOW)
    assert not upgrade_chain.waits_on_pods(paused_only, quiet.default)


def test_a_node_of_an_unknown_pool_follows_the_cluster_policy() -> None:
    stray = in_pool(node("x1", S.UPGRADE_REQUIRED), "not-yet-known")
    plan = pool_upgrades.plan_pool_upgrades(snapshot(stray), rules(policy(auto=False), a=policy()), NOW)
    assert plan.nodes[0].paused and plan.nodes[0].waiting == upgrade_plan.PAUSED_WAIT
    assert pool_upgrades.UpgradeRules(policy()).policy_of(stray) == policy()


def test_env_timeouts_reach_every_pool() -> None:
    given = rules(policy(), a=policy(parallel=2))
    changed = given.map(lambda p: dataclasses.replace(p, validation_timeout_seconds=5))
    assert changed.default.validation_timeout_seconds == 5
    assert changed.pools["a"].policy.validation_timeout_seconds == 5
    assert changed.pools["a"].policy.max_parallel_upgrades == 2


# --- whole upgrades of two pools (hypothesis) -----------------------------------------------------


def _apply(world: World, plan: upgrade_plan.UpgradePlan, limits: dict[str, int]) -> None:
    """Each node's steps in order, as the tasks write them (nodes started on a freed slot last),
    checking every pool's maxParallelUpgrades after each node's writes."""

    def check_slots(node: NodeName) -> None:
        for pool, limit in limits.items():
            if limit:
                holding = sum(
                    n.state in upgrade_plan.HOLDS_SLOT for n in world.nodes.values() if n.pool == pool
                )
                assert holding <= limit, f"pool {pool}: {holding} nodes upgrading after {node}'s writes"

    apply_in_worst_order(world, plan, check_slots)


@hypothesis_settings
@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(0, 2),
    st.sampled_from(["25%", "100%", 1, 2]),
    st.booleans(),
)
def test_two_pools_upgrade_each_by_its_own_rules(
    paused_nodes: int, moving_nodes: int, parallel: int, unavailable: int | str, gpu_pods: bool
) -> None:
    names = {f"a{i}": "a" for i in range(paused_nodes)} | {f"b{i}": "b" for i in range(moving_nodes)}
    world = World(
        nodes={
            NodeName(name): in_pool(node(name, S.UPGRADE_DONE, driver=OUTDATED), pool)
            for name, pool in names.items()
        },
        pods={
            NodeName(name): [pod(f"job-{name}", name, controller="ReplicaSet")] if gpu_pods else []
            for name in names
        },
    )
    b_rules = policy(parallel=parallel, unavailable=unavailable)
    given = rules(policy(parallel=0, unavailable="100%"), a=policy(auto=False), b=b_rules)
    for _ in range(12 * (moving_nodes + 1)):
        snap = world.snapshot(policy())
        wanted = pool_upgrades.nodes_needing_pods(snap.nodes, given)
        snap = dataclasses.replace(snap, pods={name: tuple(world.pods.get(name, ())) for name in wanted})
        plan = pool_upgrades.plan_pool_upgrades(snap, given, world.now)
        _apply(world, plan, {"b": parallel})
        for name, pool in names.items():
            if pool == "b":
                continue
            # the paused pool: its outdated driver stays, its label never moves
            paused = world.nodes[NodeName(name)]
            assert paused.state is S.UPGRADE_DONE and paused.driver_pod is not None
            assert paused.driver_pod.revision_hash != CURRENT_HASH and not paused.unschedulable
    for name, pool in names.items():
        if pool == "b":
            assert world.nodes[NodeName(name)].state is S.UPGRADE_DONE
            assert not world.nodes[NodeName(name)].unschedulable
    moved = [world.nodes[NodeName(n)] for n, p in names.items() if p == "b"]
    # every node of the moving pool has a current driver now
    assert all(n.driver_pod is not None and n.driver_pod.revision_hash == CURRENT_HASH for n in moved)


def test_the_paused_pool_of_a_real_pass_keeps_its_outdated_driver_marked_upgrade_required() -> None:
    """As the e2e test sees it: a paused pool's node, once labelled upgrade-required, stays there."""
    snap = snapshot(in_pool(node("a1", S.UPGRADE_REQUIRED, driver=OUTDATED), "a"))
    plan = pool_upgrades.plan_pool_upgrades(snap, rules(a=policy(auto=False)), NOW)
    assert plan.nodes[0].state_after is UpgradeState.UPGRADE_REQUIRED and plan.nodes[0].paused
    assert upgrade_plan.summarize(plan).auto_upgrade_enabled == 0


def test_which_pools_may_move_decides_whether_a_pass_is_needed() -> None:
    given = rules(policy(), paused=policy(auto=False), held="has an invalid spec", moving=policy())
    assert given.moves("moving") and given.moves(None) and given.moves("") and given.moves("unknown")
    assert not given.moves("paused") and not given.moves("held")
    # the ClusterPolicy paused: nodes of no pool stay, a pool with autoUpgrade on still moves
    quiet = rules(policy(auto=False), moving=policy())
    assert not quiet.moves(None) and quiet.moves("moving") and quiet.auto_upgrade


# --- the NVIDIADriver's status (reconcilers/nvidia_drivers) -------------------------------------------


def test_a_paused_pools_status_names_the_field_and_its_outdated_daemonsets() -> None:
    def driver(spec: dict[str, object]) -> nvidia_driver_spec.NvidiaDriver:
        return nvidia_driver_spec.NvidiaDriver("pool-p", "uid", "2026-01-01T00:00:00Z", 1, spec)

    def pool_policy(cluster_policy: dict[str, object], spec: dict[str, object]) -> policy_spec.Policy:
        laid = nvidia_driver_spec.cluster_policy_spec({"driver": {"upgradePolicy": cluster_policy}}, spec)
        return policy_parser.parse_policy(laid)

    own = driver({"upgradePolicy": {"autoUpgrade": False}})
    assert nvidia_drivers.paused_by(own, pool_policy({}, own.spec)) == "spec.upgradePolicy.autoUpgrade"
    inherited = driver({})
    assert nvidia_drivers.paused_by(inherited, pool_policy({"autoUpgrade": False}, {})).startswith(
        "the ClusterPolicy's spec.driver.upgradePolicy.autoUpgrade"
    )
    assert nvidia_drivers.paused_by(inherited, pool_policy({}, {})) == ""

    behind = driver_snapshot.DriverDaemonSet(
        "nvidia-gpu-driver-pool-p-x",
        labels={labels.NVIDIA_DRIVER: "pool-p"},
        desired_number_scheduled=2,
        updated_number_scheduled=1,
        number_ready=2,
    )
    owners = driver_pools.OwnerPlan({}, {}, (), ())
    outcome = nvidia_drivers.PoolOutcome(own, paused_by="spec.upgradePolicy.autoUpgrade")
    status = nvidia_drivers.pool_status(outcome, owners, {behind.name: behind}, "ns")
    (paused,) = [c for c in status["_conditions"] if c.type == nvidia_drivers.UPGRADES_PAUSED]
    assert paused.status and paused.message == (
        "spec.upgradePolicy.autoUpgrade is false: this pool's driver upgrades are paused; "
        "outdated driver pods stay in nvidia-gpu-driver-pool-p-x"
    )
    running = nvidia_drivers.pool_status(
        dataclasses.replace(outcome, paused_by=""), owners, {behind.name: behind}, "ns"
    )
    assert nvidia_drivers.UPGRADES_PAUSED not in [c.type for c in running["_conditions"]]
