"""Driver upgrades, node by node: read the upgrade snapshot, plan one pass, apply it, record metrics.

Runs only when something can need it: a driver DaemonSet has outdated pods
(updatedNumberScheduled < desiredNumberScheduled), a GPU node's upgrade label
is not `upgrade-done`, or the policy changed.  While nodes are in flight it
re-runs itself every RECHECK_S, since timeouts only fire on a pass; once every
node is done it goes quiet (zero writes, zero lists).
"""

from __future__ import annotations

import asyncio
import datetime
import logging

from ocp_gpu import metrics
from ocp_gpu.kube import upgrading
from ocp_gpu.model import labels
from ocp_gpu.model import policy as policy_model
from ocp_gpu.model.upgrades import UpgradeState
from ocp_gpu.planning import upgrade
from ocp_gpu.reconcilers import runtime

logger = logging.getLogger(labels.UPGRADE_LOGGER)

# How often a pass repeats while any node is mid-upgrade (NVIDIA requeues every 2 minutes);
# the env var overrides it (tests use short timeouts).
RECHECK_S = 10.0
RECHECK_ENV = "OCP_GPU_UPGRADE_RECHECK_SECONDS"


def is_pass_needed(rt: runtime.Runtime, changes: runtime.Changes) -> bool:
    """Whether anything in the in-memory view can make an upgrade pass do something."""
    if changes.policies or changes.everything:
        # autoUpgrade or the driver spec may have changed.
        return True
    if any(ds.updated_number_scheduled < ds.desired_number_scheduled for ds in rt.driver_daemonsets.values()):
        # Some driver pod runs an outdated template.
        return True
    # A GPU node not yet labelled, or somewhere in the state machine.
    return any(
        facts.is_gpu_node and facts.labels.get(labels.UPGRADE_STATE) != UpgradeState.UPGRADE_DONE
        for facts in rt.node_facts.values()
    )


async def reconcile_upgrades(
    rt: runtime.Runtime, policy: policy_model.Policy, now: datetime.datetime
) -> upgrade.UpgradePlan:
    rules = policy.driver.upgrade_policy
    snap = await asyncio.to_thread(upgrading.read_upgrade_snapshot, rt.api_client, rt.namespace, rules)
    plan = upgrade.plan_upgrades(snap, rules, now)
    _, errors = await asyncio.to_thread(upgrading.apply_upgrade_plan, rt.api_client, plan, now=now)
    for node, error in errors.items():
        logger.warning(
            "node %s: upgrade step failed (%s %s); other nodes carry on", node, error.status, error.reason
        )
    counts = upgrade.summarize(plan)
    metrics.auto_upgrade_enabled.set(counts.auto_upgrade_enabled)
    metrics.upgrades_in_progress.set(counts.in_progress)
    metrics.upgrades_done.set(counts.done)
    metrics.upgrades_failed.set(counts.failed)
    metrics.upgrades_available.set(counts.available)
    metrics.upgrades_pending.set(counts.pending)
    in_flight = any(
        node.state_after in upgrade.IN_PROGRESS or node.state_after is UpgradeState.UPGRADE_REQUIRED
        for node in plan.nodes
        if not node.skipped
    )
    if plan.auto_upgrade and (in_flight or errors):
        rt.poke_after(float(rt.env.get(RECHECK_ENV, RECHECK_S)))
    return plan
