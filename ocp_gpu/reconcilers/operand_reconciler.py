"""The operand mechanism: every operand of rendering/operands/operand_catalog.py rendered, applied,
removed and judged alike.

Every rendered manifest reaches the cluster through kube/applying.apply_if_changed (server-side
apply, skipped when the watched object carries the same applied hash), the driver's too.

One pass (`reconcile_operands`): the pre-requisites (RuntimeClass, namespace pod
security labels), then each generic operand in order (container toolkit, validator,
device plugin, GFD): enabled, its image resolves -> render (rendering/operands/operand_rendering.py)
and apply; disabled -> delete what it renders, nothing else.  NB: a not-ready or
failing operand never stops the later ones: on each node the validation markers
order the pods.  The driver plans its own DaemonSets (reconcilers/driver_reconciler.py) and
joins here for apply and readiness (`operand_readiness`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ocp_gpu.desired import operand_render_cache
from ocp_gpu.kube import applying, fetching, labelling, owning, requesting
from ocp_gpu.model import images, operand_types
from ocp_gpu.model.policy import api_values, policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import config_maps, platforms
from ocp_gpu.planning.operands import monitoring_planning, operand_planning
from ocp_gpu.reconcilers import cluster_view, runtime
from ocp_gpu.rendering.operands import device_plugin, operand_catalog, operand_common, operand_rendering

logger = logging.getLogger("ocp_gpu.operands")

# Pod security admission labels for the operand namespace (psa.enabled): the operands
# need host paths and privileged containers.
PSA_LABELS: Mapping[str, str] = {
    f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")
}
# Seconds until a pass looks again for a named ConfigMap that is missing (as reconcilers/drivers does).
CONFIG_MAP_RECHECK_S: Final = 10.0
# Stands in for an image when rendering only to learn which objects a disabled operand has.
_NAMES_ONLY_IMAGE = images.ImageRef("disabled.invalid/operand:none")


@dataclasses.dataclass(frozen=True)
class OperandOutcome:
    """What the status reports about one operand after a pass."""

    enabled: bool
    problem: PolicyProblem | None = None
    # Objects that could not be applied or deleted, with the error.
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)


async def reconcile_prerequisites(
    rt: runtime.Runtime, owner: Mapping[str, str], policy: policy_spec.Policy
) -> dict[str, str]:
    """The RuntimeClass and, with psa.enabled, the namespace's pod security labels; errors by object."""
    errors: dict[str, str] = {}
    rendered = operand_rendering.render_prerequisites(policy, rt.namespace)
    await applying.apply_all(rt.api_client, rt.ledger, owner, ((m, None) for m in rendered), errors)
    await _remove_stale_runtime_classes(rt, policy, rendered, errors)
    if policy.psa_enabled and rt.cache.namespace_labelled != dict(PSA_LABELS):
        # NB: a label patch, never an apply with an owner: deleting the policy must not delete the namespace.
        try:
            await asyncio.to_thread(
                labelling.patch_namespace_labels, rt.api_client, rt.namespace, dict(PSA_LABELS)
            )
            rt.cache.namespace_labelled = dict(PSA_LABELS)
        except Exception as error:
            errors[f"Namespace {rt.namespace}"] = requesting.describe_error(error)
    return errors


async def _remove_stale_runtime_classes(
    rt: runtime.Runtime,
    policy: policy_spec.Policy,
    rendered: Sequence[Mapping[str, Any]],
    errors: dict[str, str],
) -> None:
    """Delete our RuntimeClasses this policy no longer renders (`nvidia-cdi`, `nvidia-legacy` after
    cdi.enabled went false; all of them with the NRI plugin), as NVIDIA's pre-requisites state does.

    NB: RuntimeClasses are not watched: one GET per stale name per process (then remembered as
    removed), and only one carrying our managed-by label is deleted.
    """
    wanted = {str(manifest["metadata"]["name"]) for manifest in rendered}
    candidates = [policy.operator.runtime_class, *operand_common.CDI_RUNTIME_CLASSES]
    for name in dict.fromkeys(candidates):
        ident = ("RuntimeClass", "", name)
        if name in wanted or ident in rt.ledger.removed:
            continue
        try:
            ours = await asyncio.to_thread(
                fetching.is_ours, rt.api_client, RUNTIME_CLASS_API, "RuntimeClass", name
            )
        except Exception as error:  # a failed read changes nothing; the pass is retried
            errors[f"RuntimeClass {name}"] = requesting.describe_error(error)
            continue
        if not ours:
            rt.ledger.removed.add(ident)
            continue
        stub = {"apiVersion": RUNTIME_CLASS_API, "kind": "RuntimeClass", "metadata": {"name": name}}
        await applying.delete_if_present(rt.api_client, rt.ledger, stub, errors)


RUNTIME_CLASS_API: Final = "node.k8s.io/v1"


async def reconcile_operand(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    operand: operand_types.Operand,
    policy: policy_spec.Policy,
    platform: platforms.Platform,
) -> OperandOutcome:
    errors: dict[str, str] = {}
    spec = policy.components()[operand.section]
    if not operand.is_enabled(policy):
        # <section>.enabled: false (a VM operand's: or sandboxWorkloads off): remove this operand's
        # objects, nothing else.
        # NB: `owned` live, not from the snapshot: the applies and deletions write through it.
        if not operand_planning.has_objects(
            (record.component for record in rt.view.owned.values()), operand_rendering.component(operand)
        ):
            # Nothing of it exists (the usual case: never enabled): no render, no request.
            return OperandOutcome(enabled=False)
        inputs = operand_common.OperandRenderInputs(
            rt.namespace, platform.is_openshift, _NAMES_ONLY_IMAGE, monitoring_api=_monitoring_api(seen)
        )
        rendered = [kept.manifest for kept in operand_render_cache.operand_manifests(operand, policy, inputs)]
        await _remove_unrendered_service_monitor(rt, seen, operand, rendered, errors)
        for manifest in reversed(rendered):
            await applying.delete_if_present(rt.api_client, rt.ledger, manifest, errors)
        # And what an earlier setting rendered that this one does not (e.g. our default ConfigMap
        # after migManager.config.name was set); the rendered ones went just above.
        await remove_unrendered(rt, owner, operand, rendered, errors)
        return OperandOutcome(enabled=False, errors=errors)
    image = images.resolve_image(spec.image, component=operand.section, env=rt.env)
    if isinstance(image, PolicyProblem):
        # NB: nothing is applied or deleted: what runs keeps running.
        return OperandOutcome(enabled=True, problem=image)
    # NB: the operands of one section (the device plugin and its MPS control daemon) share its
    # hostNetwork: one problem names them all, said once (the Error's message is bounded).
    together = [o.daemonset for o in operand_catalog.GENERIC if o.section == operand.section]
    named = together[0] + (f" (with {', '.join(together[1:])})" if len(together) > 1 else "")
    manager_image = operand_rendering.driver_manager_image(operand, policy, rt.env)
    if isinstance(manager_image, PolicyProblem):
        # NB: nothing is applied or deleted: what runs keeps running.
        return OperandOutcome(enabled=True, problem=manager_image)
    clash = api_values.host_sysctl_problem(
        policy, named, operand_rendering.shared_host_namespaces(operand, policy)
    )
    if clash is not None:
        # NB: the API server would refuse its pods' sysctls (422): nothing applied or deleted.
        return OperandOutcome(enabled=True, problem=clash)
    problem, errors = await _config_map_problem(rt, seen, operand, policy)
    if problem is not None or errors:
        # NB: nothing is applied or deleted: what runs keeps running until the ConfigMap fits.
        return OperandOutcome(enabled=True, problem=problem, errors=errors)
    inputs = operand_common.OperandRenderInputs(
        rt.namespace,
        platform.is_openshift,
        image,
        monitoring_api=_monitoring_api(seen),
        wait_image=operand_rendering.wait_image(policy, rt.env),
        driver_manager_image=manager_image,
    )
    kept = operand_render_cache.operand_manifests(operand, policy, inputs)
    await applying.apply_all(
        rt.api_client, rt.ledger, owner, ((one.manifest, one.applied_hash) for one in kept), errors
    )
    rendered = [one.manifest for one in kept]
    await _remove_unrendered_service_monitor(rt, seen, operand, rendered, errors)
    await remove_unrendered(rt, owner, operand, rendered, errors)
    return OperandOutcome(enabled=True, errors=errors)


async def remove_unrendered(
    rt: runtime.Runtime,
    owner: Mapping[str, str],
    operand: operand_types.Operand,
    rendered: Sequence[Mapping[str, Any]],
    errors: dict[str, str],
) -> None:
    """Delete the operand's owned objects (as the watch shows them) that `rendered` no longer has.

    NB: decided from the watch alone: in steady state nothing is unrendered, so no request.
    The live record (`ClusterView.owned`), not the pass's snapshot: this pass's applies and
    deletions write through it (kube/applying.Ledger), and an object it just applied is no orphan.
    """
    stale = operand_planning.unrendered_owned(
        ((ident, record.component, record.owner_uid) for ident, record in list(rt.view.owned.items())),
        operand_rendering.component(operand),
        owner.get("uid", ""),
        (owning.manifest_ident(manifest) for manifest in rendered),
    )
    api_versions = {row.kind: row.api_version for row in owning.OWNED_KINDS}
    for kind, namespace, name in stale:
        stub: dict[str, Any] = {
            "apiVersion": api_versions[kind],
            "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        }
        await applying.delete_if_present(rt.api_client, rt.ledger, stub, errors)


async def _config_map_problem(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    operand: operand_types.Operand,
    policy: policy_spec.Policy,
) -> tuple[PolicyProblem | None, dict[str, str]]:
    """Why the ConfigMaps the operand's section names cannot be mounted (the driver's rule); errors by read.

    NB: ConfigMaps are not watched: one GET each per pass, only while the policy names one.
    """
    named, required = operand_rendering.named_config_maps(operand, policy)
    if not named:
        return None, {}
    try:
        keys = await asyncio.to_thread(fetching.config_map_keys, rt.api_client, rt.namespace, named.values())
    except Exception as error:  # a failed read changes nothing; the pass is retried
        return None, {"configmaps": requesting.describe_error(error)}
    problem = config_maps.missing_config_map_problem(named, keys, rt.namespace, required)
    plugin_configs = named.get(config_maps.PLUGIN_CONFIG_FIELD)
    if problem is None and plugin_configs:
        # The plugin, the MPS daemon and GFD would refuse a bad config at start: say which, and why.
        try:
            data = await asyncio.to_thread(
                fetching.config_map_data, rt.api_client, rt.namespace, plugin_configs
            )
        except Exception as error:  # a failed read changes nothing; the pass is retried
            return None, {"configmaps": requesting.describe_error(error)}
        # The keys a config-manager picks: the default, and those the nodes' labels name.
        picked = {policy.device_plugin.config_default} | {
            facts.labels[device_plugin.CONFIG_LABEL]
            for facts in seen.node_facts.values()
            if facts.labels.get(device_plugin.CONFIG_LABEL)
        }
        problem = config_maps.plugin_config_problem(
            plugin_configs, data or {}, policy.device_plugin.mig_strategy.value, picked
        )
    if problem is not None:
        # Look again soon for the ConfigMap the admin creates or fixes.
        rt.scheduler.poke_after(CONFIG_MAP_RECHECK_S)
    return problem, {}


def _monitoring_api(seen: cluster_view.ViewSnapshot) -> bool:
    return monitoring_planning.MONITORING_GROUP in seen.api_groups


async def _remove_unrendered_service_monitor(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    operand: operand_types.Operand,
    rendered: Sequence[Mapping[str, Any]],
    errors: dict[str, str],
) -> None:
    """An operand's ServiceMonitor (named as its DaemonSet) switched off goes; nothing else changes.

    NB: only where the API is served; once per process when this process never made it.
    """
    if not _monitoring_api(seen) or not operand_catalog.RENDERINGS[operand.name].service_monitored:
        return
    if any(manifest["kind"] == "ServiceMonitor" for manifest in rendered):
        return
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": operand.daemonset, "namespace": rt.namespace},
    }
    await applying.delete_if_present(rt.api_client, rt.ledger, monitor, errors)


async def reconcile_operands(
    rt: runtime.Runtime,
    seen: cluster_view.ViewSnapshot,
    owner: Mapping[str, str],
    policy: policy_spec.Policy,
    platform: platforms.Platform,
) -> dict[str, OperandOutcome]:
    """Pre-requisites, then every generic operand at once; one outcome per operand name.

    NB: the operands together, not one after another: nothing of one refers to another's objects
    (on each node the validation markers order their pods), and a takeover adopts each one's
    objects (kube/applying.apply_all says why that is worth it).  The pre-requisites first:
    the namespace's pod security labels admit the operands' privileged pods.
    """
    outcomes = {
        "pre-requisites": OperandOutcome(
            enabled=True, errors=await reconcile_prerequisites(rt, owner, policy)
        )
    }
    results = await asyncio.gather(
        *(
            reconcile_operand(rt, seen, owner, operand, policy, platform)
            for operand in operand_catalog.GENERIC
        )
    )
    outcomes.update(zip((operand.name for operand in operand_catalog.GENERIC), results, strict=True))
    return outcomes


def operand_readiness(
    rt: runtime.Runtime, seen: cluster_view.ViewSnapshot, policy: policy_spec.Policy
) -> tuple[dict[str, list[str]], frozenset[str]]:
    """Every enabled operand (the driver included) with the GPU nodes (of `seen`, the snapshot
    the status is judged from) it is not Ready on yet: with no pod, or, while its DaemonSet
    rolls out a new template, with a pod of an older one; and the operands rolling out."""
    # NB: each operand looks at its own pods only: at 1,000 nodes, every operand scanning every
    # operand pod on every pass was 14% of the operator's CPU during a driver upgrade (py-spy).
    enabled = [operand for operand in operand_catalog.OPERANDS if operand.is_enabled(policy)]
    rolling = _rolling(rt, seen, enabled)
    unready = operand_planning.unready_by_operand(
        enabled,
        ((name, facts.labels) for name, facts in seen.node_facts.items()),
        # NB: the pods live, not copied into every snapshot (9,000 at 1,000 nodes): read here in
        # one step with no await, so the watches cannot change them under the judgement.
        rt.view.operand_pods.values(),
        rolling,
    )
    return unready, frozenset(operand.name for operand in enabled if operand.app in rolling)


def _rolling(
    rt: runtime.Runtime, seen: cluster_view.ViewSnapshot, enabled: Sequence[operand_types.Operand]
) -> dict[str, int]:
    """operand_planning.rolling_generations of `enabled`, with the hashes this process wrote."""
    written_hashes = {
        operand.daemonset: observed.applied_hash
        for operand in enabled
        if (observed := rt.view.owned.get(owning.ident("DaemonSet", rt.namespace, operand.daemonset)))
    }
    return operand_planning.rolling_generations(enabled, seen.operand_daemonsets, written_hashes)


async def delete_daemonset(
    rt: runtime.Runtime, name: str, errors: dict[str, str], stale_reason: str | None = None
) -> None:
    """Delete one of our DaemonSets in the operand namespace; a failure goes to `errors`.

    `stale_reason`: a stale driver DaemonSet's, for the log line (bench/drivers_at_scale.py times
    the deletion by it).
    """
    try:
        await asyncio.to_thread(applying.delete, rt.api_client, "apps/v1", "DaemonSet", name, rt.namespace)
        # NB: gone at once (background propagation): forgotten now, not when the watch says so,
        # so that a node gaining its key meanwhile gets it re-created by the very next pass
        # (apply_if_changed would take the watched copy for current) and no second DELETE goes out.
        rt.view.owned.pop(owning.ident("DaemonSet", rt.namespace, name), None)
        rt.view.driver_daemonsets.pop(name, None)
        rt.view.operand_daemonsets.pop(name, None)
        if stale_reason is None:
            logger.info("deleted DaemonSet %s", name)
        else:
            logger.info("deleted stale driver DaemonSet %s (%s)", name, stale_reason)
    except Exception as error:
        errors[f"DaemonSet {name}"] = requesting.describe_error(error)
