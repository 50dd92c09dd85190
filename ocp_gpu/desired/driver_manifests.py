"""The driver manifests the operator would apply for one view of the cluster: plan, then render.

Shared by the driver reconciler (reconcilers/driver_reconciler.py, which applies the result)
and `ocp-gpu render` (commands/render.py, which prints it), so what an admin
reviews is byte for byte what the operator applies.  No I/O, no clock, no metrics;
the caller reads the cluster (or files) into a `DriverView` and does whatever it
wants with the `DriverManifests`.  Its one state is the render cache at the end
(`render_driver_state`): only a changed driver key is rendered again.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ocp_gpu.kube import reading
from ocp_gpu.model import driver_snapshot, images, imagestream_tags, nodes
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import config_maps, delivery, platforms
from ocp_gpu.planning.drivers import driver_fallback, driver_plan, driver_strategy, dtk_images
from ocp_gpu.planning.drivers.driver_plan import DesiredDriverDaemonSet
from ocp_gpu.planning.upgrades import upgrade_preflight
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import driver_rendering

# The field naming the vGPU topology ConfigMap; its one key is required (the pod mounts only it).
VIRTUAL_TOPOLOGY_FIELD: Final = "spec.driver.virtualTopology.config"


@dataclasses.dataclass(frozen=True)
class DriverView:
    """What the driver manifests depend on besides the policy and the platform.

    The raw OpenShift objects are JSON dicts as the API returns them (None: absent),
    so the operator's watches and `ocp-gpu render`'s files feed the same code.
    """

    # The operand namespace the manifests go to.
    namespace: str
    # The operator's environment: image defaults (DRIVER_IMAGE, DRIVER_MANAGER_IMAGE, ...).
    env: Mapping[str, str]
    # Every node's facts; non-GPU nodes are left out here, not by the caller.
    node_facts: tuple[nodes.NodeFacts, ...]
    # The driver DaemonSets that exist now (their names are kept; stale ones are planned for GC).
    daemonsets: tuple[driver_snapshot.DriverDaemonSet, ...] = ()
    # openshift/driver-toolkit, ClusterVersion `version` and Proxy `cluster`.
    # None: absent; delivery.NOT_DELIVERED: the watch has not listed the kind yet (no pass runs then).
    dtk_imagestream: delivery.Singleton = None
    cluster_version: delivery.Singleton = None
    cluster_proxy: delivery.Singleton = None
    # Precompiled driver pods that cannot pull their image (for the DTK fallback), and `now`.
    pull_failures: tuple[driver_fallback.PullFailure, ...] = ()
    now: datetime.datetime | None = None
    # The data keys of the ConfigMaps the policy names (driver.repoConfig, certConfig,
    # kernelModuleConfig): one file each is mounted.  None: not read (offline render);
    # a name mapped to None: no such ConfigMap in the namespace.
    config_map_keys: Mapping[str, tuple[str, ...] | None] | None = None


@dataclasses.dataclass(frozen=True)
class DriverManifests:
    """The plan and its rendering: what to apply (in order) and what to delete."""

    plan: driver_plan.DriverPlan
    # Apply order; without ownership metadata (kube.applying.owned adds it at apply time).
    manifests: tuple[dict[str, Any], ...]
    settings: driver_plan.DriverSettings
    # Precompiled keys that fall back to a DTK build at these times unless their pull recovers.
    fallback_pending: Mapping[driver_snapshot.DriverKey, datetime.datetime] = dataclasses.field(
        default_factory=dict
    )


def desired_driver_manifests(
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    view: DriverView,
    adjust: Callable[[driver_plan.DriverPlan], driver_plan.DriverPlan] | None = None,
) -> DriverManifests | PolicyProblem:
    """The driver manifests for `policy` on `view`, or the problem that prevents any.

    `adjust` rewrites the plan before it is rendered (an NVIDIADriver's pool names and
    selects its DaemonSets itself: planning/driver_pools.for_pool).

    NB: `policy.driver.enabled` is the caller's to check first: with drivers disabled the
    operator deletes its DaemonSets, which is not a rendering.
    """
    settings = driver_plan.settings_for_policy(
        policy, platform, view.env, dtk_fallback=driver_fallback.fallbacks_in_effect(view.daemonsets)
    )
    if isinstance(settings, PolicyProblem):
        # The driver image cannot be resolved: nothing to render, say what to fix.
        return settings
    manager_image = images.resolve_image(
        policy.driver.manager.image, component="driver.manager", env=view.env
    )
    if isinstance(manager_image, PolicyProblem):
        return manager_image
    module_images: dict[str, str] = {}
    for key, module in (("gds", policy.gds), ("gdrcopy", policy.gdrcopy)):
        if module.enabled:
            resolved = images.resolve_image(module.image, component=key, env=view.env)
            if isinstance(resolved, PolicyProblem):
                return resolved
            module_images[key] = resolved

    gpu_nodes = tuple(
        driver_snapshot.GpuNode.from_facts(facts) for facts in view.node_facts if facts.is_gpu_node
    )
    stream = (
        dtk_images.resolve_driver_toolkit_stream(reading.image_stream_singleton(view.dtk_imagestream))
        if platform.is_openshift
        else driver_snapshot.DriverToolkitStream(driver_snapshot.StreamState.ABSENT, reason="not OpenShift")
    )
    observed = driver_snapshot.DriverSnapshot(nodes=gpu_nodes, daemonsets=view.daemonsets, stream=stream)
    pending: Mapping[driver_snapshot.DriverKey, datetime.datetime] = {}
    if (
        settings.strategy is driver_strategy.Strategy.PRECOMPILED
        and settings.dtk_available
        and view.now is not None
    ):
        # Which precompiled image each key wants now (planned without any fallback), then
        # which keys have failed to pull it for longer than the grace period.
        plain = driver_plan.plan_driver_daemonsets(observed, dataclasses.replace(settings, dtk_fallback={}))
        fallback = driver_fallback.plan_precompiled_fallback(
            wanted={entry.key: entry.driver_image for entry in plain.desired},
            failures=view.pull_failures,
            current=driver_fallback.fallbacks_in_effect(view.daemonsets),
            now=view.now,
            grace=driver_plan.fallback_grace(policy),
        )
        settings = dataclasses.replace(settings, dtk_fallback=dict(fallback.keys))
        pending = fallback.pending
    ahead: tuple[driver_snapshot.GpuNode, ...] = ()
    if platform.is_openshift and settings.strategy is not driver_strategy.Strategy.VANILLA:
        # an OpenShift upgrade in progress: its target builds' DaemonSets before their nodes
        record = reading.image_stream_singleton(view.dtk_imagestream)
        precompiled = settings.strategy is driver_strategy.Strategy.PRECOMPILED
        ahead = upgrade_preflight.ahead_nodes(
            delivery.present(view.cluster_version),
            record if isinstance(record, imagestream_tags.ImageStream) else None,
            (str(node.ostree_version) for node in gpu_nodes if node.ostree_version),
            settings.driver_image,
            kernels=upgrade_preflight.kernels_of_nodes(view.node_facts) if precompiled else None,
        )
    plan = driver_plan.plan_driver_daemonsets(observed, settings, ahead)
    if not driver_plan.is_version_pinned(policy):
        # driver.version unset: nodes already on a newer driver keep it (no silent downgrade)
        plan, _ = driver_plan.plan_keep_newer(
            plan,
            driver_plan.versions_of([(f.name, f.labels) for f in view.node_facts if f.is_gpu_node]),
            {daemonset.name: daemonset.image for daemonset in view.daemonsets},
            driver_plan.default_version(settings.driver_image),
        )
    if adjust is not None:
        plan = adjust(plan)
    config_problem = config_map_problem(policy, view, plan.desired)
    if config_problem is not None:
        # A named ConfigMap is missing, unreadable or has no place on an OS: change nothing.
        return config_problem
    manifests = render_driver_state(
        plan.desired,
        policy,
        driver_rendering.DriverRenderInputs(
            namespace=view.namespace,
            openshift=platform.is_openshift,
            manager_image=manager_image,
            openshift_version=reading.openshift_version(delivery.present(view.cluster_version) or {}),
            proxy=reading.cluster_proxy(delivery.present(view.cluster_proxy))
            if platform.is_openshift
            else None,
            config_map_keys={name: keys for name, keys in (view.config_map_keys or {}).items() if keys},
            module_images=module_images,
        ),
    )
    return DriverManifests(plan=plan, manifests=tuple(manifests), settings=settings, fallback_pending=pending)


def named_config_maps(policy: policy_spec.Policy) -> dict[str, str]:
    """The ConfigMaps the driver section names: field path -> name (unset fields left out)."""
    driver = policy.driver
    named = {
        "spec.driver.repoConfig.configMapName": driver.repo_config_map,
        "spec.driver.certConfig.name": driver.cert_config_map,
        "spec.driver.kernelModuleConfig.name": driver.kernel_module_config_map,
        VIRTUAL_TOPOLOGY_FIELD: driver.virtual_topology_config_map,
    }
    return {field: name for field, name in named.items() if name}


def config_map_problem(
    policy: policy_spec.Policy, view: DriverView, desired: Sequence[DesiredDriverDaemonSet]
) -> PolicyProblem | None:
    """Why the named ConfigMaps cannot be mounted, naming the field; None when they can."""
    named = named_config_maps(policy)
    missing = config_maps.missing_config_map_problem(
        named,
        view.config_map_keys,
        view.namespace,
        {VIRTUAL_TOPOLOGY_FIELD: driver_rendering.VIRTUAL_TOPOLOGY_FILE},
    )
    if missing is not None:
        return missing
    for field in named:
        if field in ("spec.driver.kernelModuleConfig.name", VIRTUAL_TOPOLOGY_FIELD):
            # mounted where the driver container reads it on every OS
            continue
        for entry in desired:
            os_id = driver_rendering.os_id(entry.os_tag)
            if driver_rendering.config_dir(field, os_id) is None:
                return PolicyProblem(
                    field=field,
                    message=f"ocp-gpu knows no {'repository' if 'repo' in field else 'certificate'} "
                    f"directory for the OS {os_id!r} of {entry.name}",
                    fix=f"unset {field} (supported: rhcos, rhel, centos, rocky, ol, ubuntu, debian, sles)",
                )
    return None


# --- The driver manifests of the last few passes, kept: only a changed driver key is rendered again.
#
# Every reconcile pass renders, and rendering (Jinja2, then YAML parsing, twice per DaemonSet
# for its digest) is most of a pass's CPU.  Most passes render what the previous one did (a
# node joined a version, a status moved); a node on a new RHCOS version adds one desired entry,
# and only that DaemonSet is rendered, so its creation does not wait for the others'.  One
# cache per context (policy, inputs, templates), the most recent few: the ClusterPolicy's and
# each NVIDIADriver pool's.  The pure rendering is `rendering/operands/driver_rendering.py`; the cache
# only remembers its results (kept out of rendering/, which holds no state).

CACHED_CONTEXTS: Final = 4


@dataclasses.dataclass
class _Cache:
    # (policy, inputs, templates directory) the cached manifests were rendered for.
    context: object
    # Per shared template file: its manifests.
    shared: dict[str, list[dict[str, Any]]]
    # Per DaemonSet name: the entry it was rendered from (nodes left out) and its manifests.
    daemonsets: dict[str, tuple[DesiredDriverDaemonSet, list[dict[str, Any]]]] = dataclasses.field(
        default_factory=dict
    )


_caches: list[_Cache] = []


def clear() -> None:
    """Forget every cached rendering (benchmarks time a cold render with it)."""
    _caches.clear()


def render_driver_state(
    desired: Sequence[DesiredDriverDaemonSet],
    policy: policy_spec.Policy,
    inputs: driver_rendering.DriverRenderInputs,
) -> list[dict[str, Any]]:
    """`driver_rendering.render_driver_state`, rendering only the DaemonSets not kept from before.

    The manifests are shared with later calls: treat them as read-only (kube/applying.owned copies).
    """
    context = (policy, inputs, templating.templates_dir())
    cache = next((c for c in _caches if c.context == context), None)
    if cache is None:
        cache = _Cache(context=context, shared=driver_rendering.render_shared(policy, inputs))
    else:
        _caches.remove(cache)
    _caches.append(cache)
    del _caches[:-CACHED_CONTEXTS]
    kept: dict[str, tuple[DesiredDriverDaemonSet, list[dict[str, Any]]]] = {}
    for entry in desired:
        # Which nodes a key has does not change its manifests (pods select nodes by label).
        bare = dataclasses.replace(entry, nodes=(), exists=False)
        cached = cache.daemonsets.get(entry.name)
        if cached is None or cached[0] != bare:
            cached = (bare, driver_rendering.render_daemonset(entry, policy, inputs))
        kept[entry.name] = cached
    # Only the current keys stay cached: a key whose nodes all left is forgotten.
    cache.daemonsets = kept
    return driver_rendering.assemble(cache.shared, [kept[entry.name][1] for entry in desired])
