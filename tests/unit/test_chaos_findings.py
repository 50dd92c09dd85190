"""We test these aspects: bugs the chaos benchmarks found, reduced to the pure planner.

- An MCO cordon seen at the moment a node enters cordon-required is recorded as the node's
  initial state (never to be lifted); when the MCO uncordons a moment later, the upgrade
  cordons the node itself, and then never uncordons it: the node stays cordoned forever
  (found by bench/chaos_apiserver.py's baseline at 300 nodes, no fault needed: gpu-00269
  went upgrade-required -> cordon-required -> wait-for-jobs-required -> pod-restart-required
  -> upgrade-done without uncordon-required, left unschedulable). Fixed: the cordon the upgrade
  makes itself drops the stale record (planning/upgrade_table._cordon).
"""

from __future__ import annotations

import dataclasses

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.planning.upgrades import upgrade_plan

from ._upgrades import OUTDATED, S, World, node, policy


def test_a_transient_mco_cordon_at_upgrade_start_does_not_strand_the_node() -> None:
    n1 = NodeName("n1")
    world = World(nodes={n1: node("n1", S.UPGRADE_REQUIRED, driver=OUTDATED)}, pods={n1: []})
    upgrade_policy = policy(parallel=1, unavailable="100%")
    # The MCO cordons the node just as the upgrade gives it a slot...
    world.admin_cordon(n1)
    world.apply(upgrade_plan.plan_upgrades(world.snapshot(upgrade_policy), upgrade_policy, world.now))
    assert world.nodes[n1].state is S.CORDON_REQUIRED
    # ...and uncordons it a moment later (its update was quick).
    world.nodes[n1] = dataclasses.replace(world.nodes[n1], unschedulable=False)
    for _ in range(20):
        world.apply(upgrade_plan.plan_upgrades(world.snapshot(upgrade_policy), upgrade_policy, world.now))
        if world.nodes[n1].state is S.UPGRADE_DONE:
            break
    assert world.nodes[n1].state is S.UPGRADE_DONE
    # Nobody but the upgrade cordoned it last: it must not stay cordoned.
    assert not world.nodes[n1].unschedulable
