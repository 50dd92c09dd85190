"""Driver DaemonSets: one per RHCOS version (or OS, or kernel), applied and garbage-collected.

Read: GPU node facts, our driver DaemonSets, the driver-toolkit ImageStream,
ClusterVersion, Proxy and the driver pods' pulls from the pass's snapshot of the view.  Plan and render:
desired.driver_manifests (planning.drivers.driver_plan, rendering.operands.driver_rendering; shared with
`ocp-gpu render`).  Apply: kube.applying (server-side apply, skipped
when the applied hash is unchanged) and deletion of stale DaemonSets (no GPU node in
the view carries their key) after a targeted re-read confirms no node matches their
nodeSelector.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Mapping
from typing import Any

from ocp_gpu import metrics
from ocp_gpu.desired import driver_manifests
from ocp_gpu.kube import applying, fetching, owning, reading, reporting, requesting
from ocp_gpu.model import driver_snapshot, imagestream_tags, labels, nodes
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import delivery, platforms
from ocp_gpu.planning.drivers import (
    driver_downgrades,
    driver_fallback,
    driver_plan,
    driver_pools,
    driver_strategy,
    dtk_images,
)
from ocp_gpu.planning.status import operator_health
from ocp_gpu.planning.upgrades import pool_upgrades, upgrade_preflight
from ocp_gpu.reconcilers import cluster_view, operand_reconciler, runtime
from ocp_gpu.rendering import prepull_rendering

logger = logging.getLogger("ocp_gpu.drivers")
# How soon a missing ConfigMap named by the policy is looked for again.
CONFIG_MAP_RECHECK_S = 10.0


@dataclasses.dataclass(frozen=True)
class DriverOutcome:
    """What the status and events report about drivers after one pass."""

    plan: driver_plan.DriverPlan | None
    problem: PolicyProblem | None = None
    # Objects that could not be applied or deleted, with the error (per object, never fatal).
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # With NVIDIADriver pools: each pool's upgrade rules, by owner label value (reconcilers/nvidia_drivers).
    upgrade_pools: Mapping[str, pool_upgrades.PoolRules] = dataclasses.field(default_factory=dict)


async def reconcile_drivers(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    now: datetime.datetime,
) -> DriverOutcome:
    if not policy.driver.enabled:
        # driver.enabled: false: the admin removes our drivers (e.g. drivers preinstalled on the host).
        _record_driver_toolkit_gauges(seen, policy, platform)
        return DriverOutcome(None, errors=await _delete_all(rt, seen))
    pending = [
        name
        for name, singleton in (
            ("the driver-toolkit ImageStream", seen.dtk_imagestream),
            ("ClusterVersion", seen.cluster_version),
            ("Proxy", seen.cluster_proxy),
        )
        if not delivery.is_delivered(singleton)
    ]
    if pending:
        # NB: the loops wait for every watched kind (cluster_view.ClusterView.listed); this only
        # guards that promise.
        return DriverOutcome(None, errors={"watches": f"not listed yet: {', '.join(pending)}"})
    view = await read_driver_view(
        rt,
        seen,
        policy,
        now,
        tuple(seen.node_facts.values()),
        # NB: an NVIDIADriver's DaemonSets are its own, never the ClusterPolicy's to plan or collect.
        tuple(d for d in seen.driver_daemonsets.values() if driver_pools.pool_of(d) is None),
        _pull_failures(seen),
    )
    if isinstance(view, str):  # a failed read changes nothing; the pass is retried
        return DriverOutcome(None, errors={"configmaps": view})
    # Plan and render: the same pure function `ocp-gpu render` prints (desired/driver_manifests).
    desired = driver_manifests.desired_driver_manifests(policy, platform, view)
    if isinstance(desired, PolicyProblem):
        # The driver or manager image cannot be resolved: change nothing, say what to fix.
        if desired.field in driver_manifests.named_config_maps(policy):
            # NB: ConfigMaps are not watched: look again soon for the one the admin creates.
            rt.scheduler.poke_after(CONFIG_MAP_RECHECK_S)
        return DriverOutcome(None, problem=desired)
    plan, manifests = desired.plan, desired.manifests
    if desired.fallback_pending:
        # A key falls back when its grace period ends, even if nothing else changes by then.
        due = min(desired.fallback_pending.values())
        rt.scheduler.poke_after(max(0.5, (due - now).total_seconds() + 0.5))
    _record_driver_toolkit_gauges(seen, policy, platform)
    errors: dict[str, str] = {}
    for manifest in manifests:
        if manifest["kind"] == "DaemonSet":
            await _say_if_downgrade(rt, seen, owner, manifest)
    # The driver pods' RBAC and ConfigMaps, then the DaemonSets (kube/applying.apply_all's stages),
    # in the drivers' lane: never queued behind the other operands' objects.
    await applying.apply_all(
        rt.api_client, rt.ledger, owner, ((m, None) for m in manifests), errors, driver_lane=True
    )
    for stale in plan.stale:
        await delete_stale_daemonset(rt, seen.driver_daemonsets.get(stale.name), stale, errors)
    await _reconcile_prepulls(rt, seen, owner, policy, platform, errors)
    return DriverOutcome(plan, errors=errors)


async def _reconcile_prepulls(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    errors: dict[str, str],
) -> None:
    """While OpenShift applies an upgrade, the pre-pull DaemonSets of its target builds
    (planning/upgrades/upgrade_preflight.plan_prepulls); the others deleted, as the watch shows them
    (so no request in steady state)."""
    pulls: tuple[upgrade_preflight.PrePull, ...] = ()
    cluster_version = delivery.present(seen.cluster_version)
    if upgrade_preflight.upgrading_to(cluster_version) is not None:
        settings = driver_plan.settings_for_policy(policy, platform, rt.env)
        if (
            not isinstance(settings, PolicyProblem)
            and settings.strategy is not driver_strategy.Strategy.VANILLA
        ):
            precompiled = settings.strategy is driver_strategy.Strategy.PRECOMPILED
            stream = reading.image_stream_singleton(seen.dtk_imagestream)
            pulls = upgrade_preflight.plan_prepulls(
                cluster_version,
                stream if isinstance(stream, imagestream_tags.ImageStream) else None,
                (
                    str(facts.labels.get(labels.OSTREE_VERSION, ""))
                    for facts in seen.node_facts.values()
                    if facts.is_gpu_node and facts.labels.get(labels.OSTREE_VERSION)
                ),
                settings.driver_image,
                kernels=upgrade_preflight.kernels_of_nodes(seen.node_facts.values()) if precompiled else None,
            )
    wanted = {prepull_rendering.prepull_name(pull) for pull in pulls}
    for pull in pulls:
        manifest = prepull_rendering.render_prepull(pull, policy, rt.namespace)
        await applying.apply_if_changed(rt.api_client, rt.ledger, owner, manifest, errors)
    # NB: `owned` live, not from the snapshot: the applies of this pass write through it.
    leftover = [
        (namespace, name)
        for (kind, namespace, name), record in list(rt.view.owned.items())
        if kind == "DaemonSet" and record.component == prepull_rendering.COMPONENT and name not in wanted
    ]
    for namespace, name in leftover:
        stub = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace},
        }
        await applying.delete_if_present(rt.api_client, rt.ledger, stub, errors)


async def read_driver_view(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    policy: policy_spec.Policy,
    now: datetime.datetime,
    node_facts: tuple[nodes.NodeFacts, ...],
    daemonsets: tuple[driver_snapshot.DriverDaemonSet, ...],
    pull_failures: tuple[driver_fallback.PullFailure, ...] = (),
) -> driver_manifests.DriverView | str:
    """The DriverView of these nodes and DaemonSets from the pass's snapshot, with the keys of
    the ConfigMaps the policy names read now (they decide the driver pods' mounts); the
    error's description when that read fails."""
    named = driver_manifests.named_config_maps(policy).values()
    config_map_keys: dict[str, tuple[str, ...] | None] = {}
    try:
        if named:
            # NB: only then a thread: the hop alone costs milliseconds of a pass's latency.
            config_map_keys = await asyncio.to_thread(
                fetching.config_map_keys, rt.api_client, rt.namespace, named
            )
    except Exception as error:
        return requesting.describe_error(error)
    return driver_manifests.DriverView(
        namespace=rt.namespace,
        env=rt.env,
        node_facts=node_facts,
        daemonsets=daemonsets,
        dtk_imagestream=seen.dtk_imagestream,
        cluster_version=seen.cluster_version,
        cluster_proxy=seen.cluster_proxy,
        pull_failures=pull_failures,
        now=now,
        config_map_keys=config_map_keys,
    )


async def delete_stale_daemonset(
    rt: runtime.Runtime,
    daemonset: driver_snapshot.DriverDaemonSet | None,
    stale: driver_plan.StaleDriverDaemonSet,
    errors: dict[str, str],
) -> None:
    """Delete a per-key DaemonSet the plan found stale (the driver's, the vGPU manager's), unless a
    targeted read finds a node its nodeSelector still matches."""
    # NB: a last, targeted read of the nodes before an irreversible step: if the watch
    # missed a node the DaemonSet still selects, we keep the DaemonSet (the node's event,
    # when it arrives, plans it again).
    # (A superseded DaemonSet's nodes keep its key by design: the replacement proved itself there.)
    if (
        daemonset is not None
        and not stale.superseded
        and await asyncio.to_thread(fetching.nodes_still_selected, rt.api_client, daemonset)
    ):
        logger.warning("kept %s: a node still matches its nodeSelector", stale.name)
        return
    await operand_reconciler.delete_daemonset(rt, stale.name, errors, stale_reason=stale.reason)


def _record_driver_toolkit_gauges(
    seen: cluster_view.ViewSnapshot, policy: policy_spec.Policy, platform: platforms.Platform
) -> None:
    """NVIDIA's gpu_operator_openshift_driver_toolkit_* gauges and ours per RHCOS version."""
    gauges = operator_health.plan_driver_toolkit_gauges(
        requested=driver_strategy.should_use_driver_toolkit(platform, policy),
        stream=dtk_images.resolve_driver_toolkit_stream(reading.image_stream_singleton(seen.dtk_imagestream)),
        gpu_node_labels=[facts.labels for facts in seen.node_facts.values() if facts.is_gpu_node],
    )
    metrics.driver_toolkit_enabled.set(gauges.enabled)
    metrics.driver_toolkit_nfd_too_old.set(gauges.nfd_too_old)
    metrics.driver_toolkit_imagestream_missing.set(gauges.imagestream_missing)
    metrics.driver_toolkit_imagestream_broken.set(gauges.imagestream_broken)
    metrics.driver_toolkit_rhcos_tags_missing.set(gauges.rhcos_tags_missing)
    # NB: cleared first so a version that got its tag (or lost its nodes) leaves the series.
    metrics.driver_toolkit_tag_missing.clear()
    for version in gauges.missing_versions:
        metrics.driver_toolkit_tag_missing.labels(version).set(1)


async def _say_if_downgrade(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    manifest: Mapping[str, Any],
) -> None:
    """A driver DaemonSet about to be re-applied with an older driver: log it and a Warning Event.

    NB: it still proceeds (the admin asked for that version, as NVIDIA's operator does);
    said once, when the change is applied (the next pass finds it current).
    """
    name = str(manifest["metadata"]["name"])
    existing = seen.driver_daemonsets.get(name)
    wanted = applying.applied_hash(manifest)
    # NB: `owned` live, not from the snapshot: the applies of this pass write through it.
    if existing is None or owning.is_current(
        rt.view.owned.get(owning.manifest_ident(manifest)), wanted, owner["uid"]
    ):
        return
    downgrade = driver_downgrades.plan_downgrade(
        name, existing.image, reading.driver_daemonset(manifest).image
    )
    if downgrade is None:
        return
    logger.warning("driver downgrade: %s", downgrade.message)
    await asyncio.to_thread(
        reporting.post_event, rt.api_client, owner, "DriverDowngrade", downgrade.message, "Warning"
    )


def _pull_failures(seen: cluster_view.ViewSnapshot) -> tuple[driver_fallback.PullFailure, ...]:
    """Per precompiled key and image, since when its driver pods fail to pull (the earliest pod)."""
    earliest: dict[tuple[str, str], datetime.datetime] = {}
    for name, since in seen.pull_failing_since.items():
        pull = seen.driver_pod_pulls.get(name)
        if pull is None or pull.key is None or pull.strategy != driver_strategy.Strategy.PRECOMPILED:
            continue
        ident = (pull.key, pull.image)
        earliest[ident] = min(since, earliest.get(ident, since))
    return tuple(
        driver_fallback.PullFailure(driver_snapshot.DriverKey(key), image, since)
        for (key, image), since in earliest.items()
    )


async def _delete_all(rt: runtime.Runtime, seen: cluster_view.ViewSnapshot) -> dict[str, str]:
    errors: dict[str, str] = {}
    for name in seen.driver_daemonsets:
        await operand_reconciler.delete_daemonset(rt, name, errors)
    return errors
