"""Per-pool drivers: each NVIDIADriver's driver DaemonSets, its nodes' owner label, its status.

Runs instead of the ClusterPolicy's driver reconciler when the policy sets
`driver.useNvidiaDriverCRD: true`.  Read: the NVIDIADrivers, node facts and driver
DaemonSets from the in-memory view.  Plan: desired.pool_manifests, shared with `ocp-gpu
render` (each pool's spec laid over the ClusterPolicy's and validated by the one policy
model, node owners and conflicts by planning.drivers.driver_pools, and per pool the same driver
planner and renderer as the ClusterPolicy's, desired.driver_manifests), and
planning.drivers.driver_pools for the ClusterPolicy's DaemonSets handed over.  Apply: owner labels
on nodes, server-side apply of each pool's DaemonSets owned by its NVIDIADriver (deleting
the NVIDIADriver garbage-collects them), deletion of stale ones, the NVIDIADrivers' status
and Events.

An NVIDIADriver with an invalid spec changes nothing: its DaemonSets and nodes stay as
they are, and its status and an Event name the field and the fix.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ocp_gpu.desired import driver_manifests, pool_manifests
from ocp_gpu.kube import applying, fetching, labelling, owning, reporting, requesting
from ocp_gpu.model import driver_snapshot, labels, nvidia_driver_spec
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_findings, driver_plan, driver_pools
from ocp_gpu.planning.status import conditions
from ocp_gpu.planning.status.policy_status import finding_conditions
from ocp_gpu.planning.upgrades import pool_upgrades
from ocp_gpu.reconcilers import cluster_view, operand_reconciler, runtime
from ocp_gpu.reconcilers.driver_reconciler import DriverOutcome, read_driver_view

logger = logging.getLogger("ocp_gpu.nvidia_drivers")

STATE_READY, STATE_NOT_READY, STATE_DISABLED = "ready", "notReady", "disabled"
CONFLICT = driver_pools.SelectorConflict.reason
UNSUPPORTED = "UnsupportedSetting"
# The pool's driver upgrades are paused (its autoUpgrade, or the ClusterPolicy's it inherits, is false).
UPGRADES_PAUSED = "UpgradesPaused"
# Conditions that also become an Event when they appear or change: type -> Event reason.
EVENTED = {"Error": "InvalidNVIDIADriver", CONFLICT: CONFLICT, UNSUPPORTED: UNSUPPORTED}
# How many node names the status lists.
NODES_LISTED = 100
CONFIG_MAP_RECHECK_S = 10.0


@dataclasses.dataclass(frozen=True)
class PoolOutcome:
    """One NVIDIADriver after a pass: its plan (None when nothing was planned) and what to report."""

    driver: nvidia_driver_spec.NvidiaDriver
    problems: tuple[PolicyProblem, ...] = ()
    plan: driver_plan.DriverPlan | None = None
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The field whose autoUpgrade false pauses this pool's driver upgrades ("" when they run).
    paused_by: str = ""


async def reconcile_nvidia_drivers(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    policy_owner: Mapping[str, str],
    cluster_policy_spec: Mapping[str, Any],
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    now: datetime.datetime,
) -> DriverOutcome:
    """One pass over every NVIDIADriver; the outcome sums them up for the ClusterPolicy's status."""
    selection = pool_manifests.select_pools(
        seen.nvidia_drivers.values(),
        cluster_policy_spec,
        rt.env,
        {name: facts.labels for name, facts in seen.node_facts.items()},
    )
    owners = selection.owners
    errors = await _write_owner_labels(rt, owners.label_changes)

    outcomes: list[PoolOutcome] = []
    shared_applied: set[owning.ObjectIdent] = set()
    for driver in selection.drivers:
        if driver.name in selection.invalid:
            # bad input: nothing applied or deleted for this pool, its nodes stay as they are
            outcomes.append(PoolOutcome(driver, problems=selection.invalid[driver.name]))
            continue
        extra = selection.default_problems(driver)
        outcome = await _reconcile_pool(
            rt,
            seen,
            policy_owner,
            driver,
            selection.policies[driver.name],
            platform,
            owners,
            now,
            shared_applied,
        )
        outcomes.append(
            dataclasses.replace(
                outcome,
                problems=(*extra, *outcome.problems),
                paused_by=paused_by(driver, selection.policies[driver.name]),
            )
        )
        errors |= dict(outcome.errors)

    # The ClusterPolicy's own driver DaemonSets go once the pools own all their nodes.
    planned = [driver_pools.owner_label_value(o.driver.name) for o in outcomes if o.plan is not None]
    gpu_nodes = tuple(
        driver_snapshot.GpuNode.from_facts(facts) for facts in seen.node_facts.values() if facts.is_gpu_node
    )
    handover = driver_pools.plan_policy_handover(
        seen.driver_daemonsets.values(), gpu_nodes, owners.owners, planned
    )
    for name in handover.delete:
        await operand_reconciler.delete_daemonset(rt, name, errors)
        logger.info("deleted the ClusterPolicy's driver DaemonSet %s: NVIDIADrivers own its nodes", name)

    for outcome in outcomes:
        # NB: the statuses count Ready driver pods after this pass's writes: from the view as it is now.
        await _report(rt, outcome, owners, now)

    findings: list[driver_findings.Finding] = [f for o in outcomes if o.plan for f in o.plan.findings]
    findings.extend(handover.kept)
    unowned = pool_manifests.unowned_finding(owners)
    if unowned is not None:
        # GPU nodes no NVIDIADriver selects: the ClusterPolicy is not ready while they exist
        findings.append(unowned)
    combined = driver_plan.DriverPlan(
        desired=tuple(entry for o in outcomes if o.plan for entry in o.plan.desired),
        stale=tuple(entry for o in outcomes if o.plan for entry in o.plan.stale),
        findings=tuple(findings),
    )
    return DriverOutcome(combined, errors=errors, upgrade_pools=upgrade_pools(selection, policy))


def paused_by(driver: nvidia_driver_spec.NvidiaDriver, pool_policy: policy_spec.Policy) -> str:
    """The field that pauses the pool's upgrades: its own, or the ClusterPolicy's it inherits; "" none."""
    if pool_policy.driver.upgrade_policy.auto_upgrade:
        return ""
    own = driver.spec.get("upgradePolicy")
    if isinstance(own, Mapping) and own.get("autoUpgrade") is False:
        return "spec.upgradePolicy.autoUpgrade"
    return "the ClusterPolicy's spec.driver.upgradePolicy.autoUpgrade (this NVIDIADriver sets none)"


def upgrade_pools(
    selection: pool_manifests.PoolSelection, policy: policy_spec.Policy
) -> dict[str, pool_upgrades.PoolRules]:
    """Each NVIDIADriver's upgrade rules (its spec.upgradePolicy over the ClusterPolicy's, laid
    by the pool's policy), by owner label value; an invalid one's are held."""
    rules: dict[str, pool_upgrades.PoolRules] = {}
    for driver in selection.drivers:
        key = driver_pools.owner_label_value(driver.name)
        if driver.name in selection.invalid:
            rules[key] = pool_upgrades.PoolRules(
                driver.name, policy.driver.upgrade_policy, held=pool_upgrades.HELD
            )
        else:
            rules[key] = pool_upgrades.PoolRules(
                driver.name, selection.policies[driver.name].driver.upgrade_policy
            )
    return rules


async def _reconcile_pool(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    policy_owner: Mapping[str, str],
    driver: nvidia_driver_spec.NvidiaDriver,
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    owners: driver_pools.OwnerPlan,
    now: datetime.datetime,
    shared_applied: set[owning.ObjectIdent],
) -> PoolOutcome:
    value = driver_pools.owner_label_value(driver.name)
    facts, daemonsets = pool_manifests.pool_members(
        driver, owners, seen.node_facts.values(), seen.driver_daemonsets.values()
    )
    view = await read_driver_view(rt, seen, policy, now, facts, daemonsets)
    if isinstance(view, str):  # a failed read changes nothing; the pass is retried
        return PoolOutcome(driver, errors={"configmaps": view})
    desired = pool_manifests.desired_pool_manifests(driver, policy, platform, view)
    if isinstance(desired, PolicyProblem):
        # an image that cannot be resolved, a missing ConfigMap: change nothing, say what to fix
        if desired.field in {
            nvidia_driver_spec.nvidia_driver_field(field) or field
            for field in driver_manifests.named_config_maps(policy)
        }:
            rt.scheduler.poke_after(CONFIG_MAP_RECHECK_S)
        return PoolOutcome(driver, problems=(desired,))
    errors: dict[str, str] = {}
    for manifest in desired.manifests:
        if manifest["kind"] == "DaemonSet":
            # the pool's DaemonSets: owned by its NVIDIADriver, collected with it
            await applying.apply_if_changed(rt.api_client, rt.ledger, driver.ref(), manifest, errors)
            continue
        ident = owning.manifest_ident(manifest)
        if ident not in shared_applied:
            # the driver pods' RBAC and ConfigMaps, one set for every pool: the ClusterPolicy's
            shared_applied.add(ident)
            await applying.apply_if_changed(rt.api_client, rt.ledger, policy_owner, manifest, errors)
    for stale in desired.plan.stale:
        await _delete_stale(rt, seen, stale, value, errors)
    return PoolOutcome(driver, plan=desired.plan, errors=errors)


async def _delete_stale(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    stale: driver_plan.StaleDriverDaemonSet,
    pool: str,
    errors: dict[str, str],
) -> None:
    # NB: the planner saw no node of this pool with the key; one targeted read agrees first.
    daemonset = seen.driver_daemonsets.get(stale.name)
    if daemonset is not None and not stale.superseded:
        # Its nodeSelector names the pool (the owner label); without one, its RHCOS build in this pool.
        rhcos = daemonset.labels.get(labels.DTK_RHCOS)
        if daemonset.node_selector:
            still = await asyncio.to_thread(fetching.nodes_still_selected, rt.api_client, daemonset)
        elif rhcos:
            selector = f"{labels.OSTREE_VERSION}={rhcos},{labels.NVIDIA_DRIVER_OWNER}={pool}"
            still = await asyncio.to_thread(fetching.any_node, rt.api_client, selector)
        else:
            still = False
        if still:
            logger.warning("kept %s: a node of NVIDIADriver %s still carries its key", stale.name, pool)
            return
    await operand_reconciler.delete_daemonset(rt, stale.name, errors, stale_reason=stale.reason)


async def _write_owner_labels(rt: runtime.Runtime, changes: Mapping[NodeName, str | None]) -> dict[str, str]:
    """Record each node's owner; one node's failure never blocks the others."""
    results = await runtime.in_threads(
        functools.partial(
            labelling.patch_node_labels, rt.api_client, node, {labels.NVIDIA_DRIVER_OWNER: owner}
        )
        for node, owner in changes.items()
    )
    errors: dict[str, str] = {}
    for node, result in zip(changes, results, strict=True):
        if isinstance(result, Exception):
            errors[f"Node {node}"] = requesting.describe_error(result)
            logger.warning("could not label node %s with its NVIDIADriver: %s", node, errors[f"Node {node}"])
    return errors


# --- status ---------------------------------------------------------------------


def pool_status(
    outcome: PoolOutcome,
    owners: driver_pools.OwnerPlan,
    daemonsets: Mapping[str, driver_snapshot.DriverDaemonSet],
    namespace: str,
) -> dict[str, Any]:
    """The NVIDIADriver's status as decided this pass; `_conditions` holds the fresh conditions."""
    driver = outcome.driver
    value = driver_pools.owner_label_value(driver.name)
    nodes = owners.nodes_of(value)
    found: list[conditions.Condition] = []
    summary: list[dict[str, Any]] = []
    errors = [p for p in outcome.problems if p.severity is Severity.ERROR]
    if outcome.plan is not None:
        for entry in outcome.plan.desired:
            observed = daemonsets.get(entry.name)
            summary.append(
                {
                    "name": entry.name,
                    "key": str(entry.key),
                    "image": entry.driver_image,
                    "dtkImage": entry.dtk_image or "",
                    "nodes": len(entry.nodes),
                    "ready": observed.number_ready if observed else 0,
                }
            )
    else:
        # nothing planned (bad input): describe what runs, unchanged
        for observed in sorted(daemonsets.values(), key=lambda d: d.name):
            if driver_pools.pool_of(observed) == value:
                summary.append(
                    {
                        "name": observed.name,
                        "key": observed.key or "",
                        "image": observed.image,
                        "dtkImage": observed.dtk_image or "",
                        "nodes": observed.desired_number_scheduled,
                        "ready": observed.number_ready,
                    }
                )
    unready = [
        item["name"]
        for item in summary
        if (observed := daemonsets.get(item["name"])) is None
        or not observed.status_is_current
        or observed.number_ready < observed.desired_number_scheduled
        or observed.desired_number_scheduled < item["nodes"]
    ]
    if errors:
        message = "; ".join(f"{p.field}: {p.message} (fix: {p.fix})" for p in errors)
        found.append(conditions.Condition("Ready", False, "InvalidSpec", message))
        found.append(conditions.Condition("Error", True, "InvalidSpec", message))
    elif outcome.errors:
        message = "; ".join(f"{what}: {error}" for what, error in sorted(outcome.errors.items()))
        found.append(conditions.Condition("Ready", False, "ApplyFailed", message))
        found.append(conditions.Condition("Error", True, "ApplyFailed", message))
    elif unready:
        found.append(
            conditions.Condition(
                "Ready", False, "DriverNotReady", f"driver pods not ready in {', '.join(unready)}"
            )
        )
        found.append(conditions.Condition("Error", False, "Reconciled", ""))
    else:
        message = (
            f"{len(nodes)} GPU node(s), {len(summary)} driver DaemonSet(s)"
            if nodes
            else "no GPU node in this pool"
        )
        found.append(conditions.Condition("Ready", True, "Reconciled", message))
        found.append(conditions.Condition("Error", False, "Reconciled", ""))
    clashes = owners.conflicts_of(value)
    if clashes:
        message = "; ".join(c.message_for(value) for c in clashes)
        found.append(conditions.Condition(CONFLICT, True, CONFLICT, message))
    if outcome.paused_by:
        # The pool's upgrades wait: say so on it, with the DaemonSets whose pods stay outdated.
        behind = [
            item["name"]
            for item in summary
            if (observed := daemonsets.get(item["name"])) is not None
            and observed.updated_number_scheduled < observed.desired_number_scheduled
        ]
        found.append(
            conditions.Condition(
                UPGRADES_PAUSED,
                True,
                "AutoUpgradeDisabled",
                f"{outcome.paused_by} is false: this pool's driver upgrades are paused"
                + (f"; outdated driver pods stay in {', '.join(behind)}" if behind else ""),
            )
        )
    refused = nvidia_driver_spec.refused_settings(driver.spec)
    if refused:
        message = "; ".join(f"{path}: not acted on, {instead}" for path, instead in refused.items())
        found.append(conditions.Condition(UNSUPPORTED, True, UNSUPPORTED, message))
    if outcome.plan is not None:
        found.extend(finding_conditions(outcome.plan))
    return {
        "state": STATE_READY if found[0].status else STATE_NOT_READY,
        "namespace": namespace,
        "nodes": list(nodes[:NODES_LISTED]),
        "driverDaemonSets": summary,
        "_conditions": found,
    }


async def _report(
    rt: runtime.Runtime, outcome: PoolOutcome, owners: driver_pools.OwnerPlan, now: datetime.datetime
) -> None:
    status = pool_status(outcome, owners, rt.view.driver_daemonsets, rt.namespace)
    driver = outcome.driver
    previous = {
        str(item.get("message", ""))
        for item in driver.status.get("conditions") or []
        if item.get("status") == "True"
    }
    await write_status_if_changed(rt, driver, status, now)
    for condition in status["_conditions"]:
        if condition.status and condition.type in EVENTED and condition.message not in previous:
            # a new or different problem: said once as an Event too (the status holds it meanwhile)
            if condition.type == "Error":
                logger.warning("NVIDIADriver %s: %s", driver.name, condition.message)
            await asyncio.to_thread(
                reporting.post_event,
                rt.api_client,
                driver.ref(),
                EVENTED[condition.type],
                condition.message,
                "Warning",
            )


async def write_status_if_changed(
    rt: runtime.Runtime,
    driver: nvidia_driver_spec.NvidiaDriver,
    decided: Mapping[str, Any],
    now: datetime.datetime,
) -> None:
    fresh: Sequence[conditions.Condition] = decided["_conditions"]
    status = {key: value for key, value in decided.items() if key != "_conditions"}
    status["conditions"] = conditions.merge_conditions(
        fresh, driver.status.get("conditions") or [], now, driver.generation
    )
    status["observedGeneration"] = driver.generation
    if all(driver.status.get(key) == value for key, value in status.items()):
        return
    try:
        await asyncio.to_thread(reporting.patch_nvidia_driver_status, rt.api_client, driver.name, status)
    except Exception as error:  # deleted meanwhile, or a conflict: the next pass writes it
        logger.warning(
            "could not write the status of NVIDIADriver %s: %s", driver.name, requesting.describe_error(error)
        )


async def report_disabled(rt: runtime.Runtime, policy_name: str | None, now: datetime.datetime) -> None:
    """Without driver.useNvidiaDriverCRD every NVIDIADriver says so (as NVIDIA's does); nothing is deleted."""
    message = (
        f"ClusterPolicy {policy_name} does not set spec.driver.useNvidiaDriverCRD: true: "
        "its spec.driver deploys the drivers, this NVIDIADriver deploys nothing"
        if policy_name
        else "no ClusterPolicy: this NVIDIADriver deploys nothing"
    )
    for driver in list(rt.view.nvidia_drivers.values()):
        status = {
            "state": STATE_DISABLED,
            "namespace": rt.namespace,
            "_conditions": [
                conditions.Condition("Ready", False, "Disabled", message),
                conditions.Condition("Error", False, "Disabled", ""),
            ],
        }
        await write_status_if_changed(rt, driver, status, now)
