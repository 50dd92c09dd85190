"""The per-pool driver manifests (`driver.useNvidiaDriverCRD`): each NVIDIADriver's plan and rendering.

Shared by the NVIDIADriver reconciler (reconcilers/nvidia_drivers.py, which applies them) and
`ocp-gpu render` (commands/render.py, which prints them), so a review of the pools is what the
operator applies.  Decides, from the NVIDIADrivers, the ClusterPolicy's spec and a view of the
cluster (or files):
- each NVIDIADriver's policy (its fields laid over the ClusterPolicy's, validated by the one
  policy model) or its problems under its own field paths (`pool_policy`);
- every GPU node's owner, the conflicts, the spare default NVIDIADrivers (`select_pools`);
- each pool's nodes and DaemonSets (`pool_members`) and its manifests (`desired_pool_manifests`);
- the GPU nodes no NVIDIADriver selects, as a finding (`unowned_finding`);
- which of the pools' shared manifests (RBAC, ConfigMaps) are new (`shared_once`).

Pure: no I/O, no clock; the callers read and apply.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ocp_gpu.desired import driver_manifests
from ocp_gpu.model import driver_snapshot, nodes, nvidia_driver_spec
from ocp_gpu.model.policy import policy_checks, policy_parser, policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_findings, driver_pools


def pool_policy(
    driver: nvidia_driver_spec.NvidiaDriver, cluster_policy_spec: Mapping[str, Any], env: Mapping[str, str]
) -> policy_spec.Policy | list[PolicyProblem]:
    """The policy that deploys one pool, or its problems under the NVIDIADriver's field paths."""
    problems = nvidia_driver_spec.pool_problems(driver)
    spec = nvidia_driver_spec.cluster_policy_spec(cluster_policy_spec, driver.spec)
    try:
        policy = policy_parser.parse_policy(spec)
    except policy_parser.PolicyParseError as error:
        # only a file can hold a spec the CRD would reject; say where
        field = nvidia_driver_spec.nvidia_driver_field(error.field) or error.field
        return [
            *problems,
            PolicyProblem(field=field, message=str(error), fix="follow the NVIDIADriver schema"),
        ]
    for problem in policy_checks.validate_policy(policy, env):
        pool_field = nvidia_driver_spec.nvidia_driver_field(problem.field)
        if pool_field is not None and problem.severity is Severity.ERROR:
            # the pool's own field: report it under its NVIDIADriver path
            problems.append(
                dataclasses.replace(
                    problem, field=pool_field, message=pool_fix(problem.message), fix=pool_fix(problem.fix)
                )
            )
    return problems or policy


def pool_fix(text: str) -> str:
    """A policy model message in the NVIDIADriver's terms (its driver fields sit at spec.*)."""
    return text.replace("spec.driver.", "spec.").replace("spec.daemonsets.", "spec.")


@dataclasses.dataclass(frozen=True)
class PoolSelection:
    """Every NVIDIADriver's policy or problems, and which pool owns each GPU node."""

    # Oldest first (creationTimestamp, then name): the order the operator reconciles them in.
    drivers: tuple[nvidia_driver_spec.NvidiaDriver, ...]
    policies: Mapping[str, policy_spec.Policy]
    # NVIDIADrivers whose spec is invalid: nothing is applied or deleted for them.
    invalid: Mapping[str, tuple[PolicyProblem, ...]]
    owners: driver_pools.OwnerPlan
    # The default NVIDIADriver that takes the unselected nodes ("" when none is valid).
    oldest_default: str = ""

    def default_problems(self, driver: nvidia_driver_spec.NvidiaDriver) -> list[PolicyProblem]:
        """A second default NVIDIADriver takes no node: said on it."""
        if driver_pools.owner_label_value(driver.name) not in self.owners.extra_defaults:
            return []
        return [
            PolicyProblem(
                field="spec.default",
                message=f"NVIDIADriver {self.oldest_default} is the default (oldest); this one takes no node",
                fix="set spec.default: true on one NVIDIADriver only",
            )
        ]


def select_pools(
    found: Iterable[nvidia_driver_spec.NvidiaDriver],
    cluster_policy_spec: Mapping[str, Any],
    env: Mapping[str, str],
    node_labels: Mapping[nodes.NodeName, Mapping[str, str]],
) -> PoolSelection:
    """Each NVIDIADriver's policy (or problems), then every GPU node's owner by driver_pools' rules."""
    ordered = tuple(sorted(found, key=lambda d: (d.created, d.name)))
    policies: dict[str, policy_spec.Policy] = {}
    invalid: dict[str, tuple[PolicyProblem, ...]] = {}
    for driver in ordered:
        resolved = pool_policy(driver, cluster_policy_spec, env)
        if isinstance(resolved, list):
            invalid[driver.name] = tuple(resolved)
        else:
            policies[driver.name] = resolved
    pools = [
        driver_pools.Pool(
            name=driver_pools.owner_label_value(driver.name),
            created=driver.created,
            selector=driver.node_selector,
            default=driver.is_default,
            valid=driver.name in policies,
        )
        for driver in ordered
    ]
    owners = driver_pools.plan_pool_owners(node_labels, pools)
    oldest_default = next((d.name for d in ordered if d.is_default and d.name in policies), "")
    return PoolSelection(ordered, policies, invalid, owners, oldest_default)


def pool_members(
    driver: nvidia_driver_spec.NvidiaDriver,
    owners: driver_pools.OwnerPlan,
    node_facts: Iterable[nodes.NodeFacts],
    daemonsets: Iterable[driver_snapshot.DriverDaemonSet],
) -> tuple[tuple[nodes.NodeFacts, ...], tuple[driver_snapshot.DriverDaemonSet, ...]]:
    """The pool's nodes (those it owns) and its driver DaemonSets (those labelled with it)."""
    value = driver_pools.owner_label_value(driver.name)
    mine = set(owners.nodes_of(value))
    return (
        tuple(facts for facts in node_facts if facts.name in mine),
        tuple(d for d in daemonsets if driver_pools.pool_of(d) == value),
    )


def pool_view(
    driver: nvidia_driver_spec.NvidiaDriver, owners: driver_pools.OwnerPlan, view: driver_manifests.DriverView
) -> driver_manifests.DriverView:
    """A whole-cluster view narrowed to one pool (what the reconciler reads per pool)."""
    facts, daemonsets = pool_members(driver, owners, view.node_facts, view.daemonsets)
    return dataclasses.replace(view, node_facts=facts, daemonsets=daemonsets)


def desired_pool_manifests(
    driver: nvidia_driver_spec.NvidiaDriver,
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    view: driver_manifests.DriverView,
) -> driver_manifests.DriverManifests | PolicyProblem:
    """The pool's manifests on its view (`pool_view`), or the problem under its NVIDIADriver path.

    The ClusterPolicy's driver planner and renderer, with the pool's names and owner selector
    (driver_pools.for_pool); the DaemonSets are the NVIDIADriver's to own, the rest (RBAC,
    ConfigMaps) is shared by every pool.
    """
    desired = driver_manifests.desired_driver_manifests(
        policy,
        platform,
        view,
        adjust=functools.partial(
            driver_pools.for_pool,
            pool=driver_pools.owner_label_value(driver.name),
            driver_type=str(driver.spec.get("driverType") or "gpu"),
        ),
    )
    if isinstance(desired, PolicyProblem):
        # an image that cannot be resolved, a missing ConfigMap: said in the NVIDIADriver's terms
        field = nvidia_driver_spec.nvidia_driver_field(desired.field) or desired.field
        return dataclasses.replace(
            desired, field=field, message=pool_fix(desired.message), fix=pool_fix(desired.fix)
        )
    return desired


def config_map_names(selection: PoolSelection) -> tuple[str, ...]:
    """Every ConfigMap the valid pools' driver sections name, for one read of them all."""
    return tuple(
        sorted(
            {
                name
                for policy in selection.policies.values()
                for name in driver_manifests.named_config_maps(policy).values()
            }
        )
    )


def unowned_finding(owners: driver_pools.OwnerPlan) -> driver_findings.DeferredDaemonSet | None:
    """GPU nodes no NVIDIADriver selects: the ClusterPolicy is not ready while they exist."""
    if not owners.unowned:
        return None
    return driver_findings.DeferredDaemonSet(
        driver_snapshot.DriverKey("GPU nodes without an NVIDIADriver"),
        owners.unowned[: driver_pools.NODES_QUOTED],
        "no NVIDIADriver selects them: create one whose nodeSelector matches, or a default one",
    )


def shared_once(manifests: Sequence[dict[str, Any]], seen: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The pool's non-DaemonSet manifests not yet seen (every pool renders the same RBAC and ConfigMaps)."""
    fresh: list[dict[str, Any]] = []
    for manifest in manifests:
        if manifest["kind"] == "DaemonSet":
            continue
        ident = (str(manifest["kind"]), str(manifest["metadata"]["name"]))
        if ident not in seen:
            seen.add(ident)
            fresh.append(manifest)
    return fresh
