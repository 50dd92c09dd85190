"""What the watches know: the operator's in-memory view of the cluster, and when it is complete.

Kept by the watches' views (ocp_gpu/watches.py lists them: reconcilers/node_view.py, pod_view.py,
daemonset_view.py, object_views.py); read by the passes.  Each kind counts once its first listing
went through (planning/delivery): `listed` is set when every watched kind has, and no pass
runs before.  A pass plans from a frozen `ViewSnapshot` (`snapshot`), not from the live
mappings the watches keep changing while it awaits its writes.  Nothing here wakes a loop
(reconcilers/scheduling.py) or remembers what a pass applied (reconcilers/applied_cache.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import types
from collections.abc import Mapping
from typing import Any

from ocp_gpu.kube import owning
from ocp_gpu.model import (
    custom_resources,
    driver_snapshot,
    labels,
    nodes,
    nvidia_driver_spec,
    operand_types,
    upgrade_observations,
)
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.planning import delivery


def _empty() -> Mapping[Any, Any]:
    return types.MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class ViewSnapshot:
    """What a pass plans from, as the watches showed it when the pass took it (read-only copies).

    NB: not the operand pods the status judges readiness by (9,000 at 1,000 nodes: read from the
    view at the moment it judges, in one step without an await), nor `ClusterView.owned`, which
    the applies write through (kube/applying.Ledger).  The upgrade's pods and revisions only
    when asked (`snapshot(upgrade=True)`): the main pass does not read them.
    """

    node_facts: Mapping[nodes.NodeName, nodes.NodeFacts]
    policies: Mapping[str, custom_resources.PolicyObject]
    nvidia_drivers: Mapping[str, nvidia_driver_spec.NvidiaDriver]
    driver_daemonsets: Mapping[str, driver_snapshot.DriverDaemonSet]
    operand_daemonsets: Mapping[str, driver_snapshot.DriverDaemonSet]
    api_groups: frozenset[str]
    dtk_imagestream: delivery.Singleton
    cluster_version: delivery.Singleton
    cluster_proxy: delivery.Singleton
    # Driver pods' image pulls, and since when each failing one fails (the precompiled fallback).
    driver_pod_pulls: Mapping[str, driver_snapshot.DriverPodPull] = dataclasses.field(default_factory=_empty)
    pull_failing_since: Mapping[str, datetime.datetime] = dataclasses.field(default_factory=_empty)
    # The upgrade loop's (reconcilers/upgrade_reconciler.py): empty unless asked for.
    driver_pods: Mapping[str, upgrade_observations.DriverPod] = dataclasses.field(default_factory=_empty)
    validator_pods: Mapping[str, upgrade_observations.ValidatorPod] = dataclasses.field(
        default_factory=_empty
    )
    driver_revisions: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=_empty)
    # NVIDIA's GPUClusters by name (empty unless their CRD is served).
    gpu_clusters: Mapping[str, custom_resources.GpuClusterObject] = dataclasses.field(default_factory=_empty)


@dataclasses.dataclass
class ClusterView:
    """Every watched kind's records, by name; the start-up barrier (`watch`, `mark_*`, `listed`)."""

    node_facts: dict[nodes.NodeName, nodes.NodeFacts] = dataclasses.field(default_factory=dict)
    policies: dict[str, custom_resources.PolicyObject] = dataclasses.field(default_factory=dict)
    # Discovery at start-up (operator.py): the API groups served, and whether NVIDIADrivers are.
    api_groups: frozenset[str] = frozenset()
    # NVIDIADrivers by name (watched only when their CRD is served: `nvidia_driver_api`).
    nvidia_drivers: dict[str, nvidia_driver_spec.NvidiaDriver] = dataclasses.field(default_factory=dict)
    nvidia_driver_api: bool = False
    # NVIDIA's GPUClusters by name (watched only when their CRD is served: `gpu_cluster_api`).
    gpu_clusters: dict[str, custom_resources.GpuClusterObject] = dataclasses.field(default_factory=dict)
    gpu_cluster_api: bool = False
    # What each ResourceClaim holds, by namespace/name (watched only when resource.k8s.io/v1
    # is served: `resource_claim_api`); the upgrade's pod deletion reads it.
    resource_claims: dict[str, ClaimHold] = dataclasses.field(default_factory=dict)
    resource_claim_api: bool = False
    driver_daemonsets: dict[str, driver_snapshot.DriverDaemonSet] = dataclasses.field(default_factory=dict)
    # Our other operand DaemonSets (container toolkit, ...), in the same record: counts and our annotations.
    operand_daemonsets: dict[str, driver_snapshot.DriverDaemonSet] = dataclasses.field(default_factory=dict)
    # openshift/driver-toolkit, ClusterVersion `version` and Proxy `cluster` as JSON; None while
    # absent; delivery.NOT_DELIVERED from the moment their watch is registered until it has listed.
    dtk_imagestream: delivery.Singleton = None
    cluster_version: delivery.Singleton = None
    cluster_proxy: delivery.Singleton = None
    # Driver pods' image pulls, and since when each failing pod has been seen failing.
    driver_pod_pulls: dict[str, driver_snapshot.DriverPodPull] = dataclasses.field(default_factory=dict)
    pull_failing_since: dict[str, datetime.datetime] = dataclasses.field(default_factory=dict)
    # What the upgrade controller reads, kept by the watches: driver and validator pods
    # (operator namespace) and the driver DaemonSets' ControllerRevisions (trimmed JSON).
    driver_pods: dict[str, upgrade_observations.DriverPod] = dataclasses.field(default_factory=dict)
    validator_pods: dict[str, upgrade_observations.ValidatorPod] = dataclasses.field(default_factory=dict)
    driver_revisions: dict[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # Every operand pod (driver, toolkit, validator, device plugin, GFD) in the operand namespace.
    operand_pods: dict[str, operand_types.OperandPod] = dataclasses.field(default_factory=dict)
    # Every owned object the watches see (kube/owning.OWNED_KINDS): applied hash and owner.
    # NB: never a memory of what this process applied: a deleted object must be re-applied.
    # A pass writes through what it applied or deleted (reconcilers/operand_reconciler.py): the next pass
    # must not apply it again before the watch shows it.
    owned: dict[owning.ObjectIdent, owning.ObservedObject] = dataclasses.field(default_factory=dict)
    # Bumped by the node view whenever a node's marks a paused upgrade pass reads change
    # (planning/paused_upgrades): the paused upgrade loop compares this, not every node.
    paused_marks_version: int = 0
    # The kinds the watches cover (watches.build_watches) and those listed completely once.
    watched: set[str] = dataclasses.field(default_factory=set)
    delivered: set[str] = dataclasses.field(default_factory=set)
    # Set once every watched kind has been listed completely (planning.delivery): no pass before.
    listed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def watch(self, group: str, plural: str) -> None:
        """A watch is set up for this kind: no pass runs before its first complete listing."""
        self.watched.add(f"{plural}.{group}" if group else plural)

    def mark_delivered(self, group: str, plural: str) -> None:
        """A watch listed its kind completely (reconcilers/watched_view.WatchedView.listed)."""
        self.delivered.add(f"{plural}.{group}" if group else plural)
        if not self.listed.is_set() and delivery.is_view_complete(self.watched, self.delivered):
            self.listed.set()

    def upgrade_state(self, node: nodes.NodeName) -> str | None:
        """The node's upgrade state label as the watch last showed it (None: unknown node or no label)."""
        facts = self.node_facts.get(node)
        return facts.labels.get(labels.UPGRADE_STATE) if facts is not None else None

    def snapshot(self, *, upgrade: bool = False) -> ViewSnapshot:
        """What a pass plans from, frozen now (the watches go on changing the view meanwhile);
        `upgrade`: with the driver and validator pods and the driver revisions."""
        upgrade_parts: dict[str, Any] = {}
        if upgrade:
            upgrade_parts = {
                "driver_pods": types.MappingProxyType(dict(self.driver_pods)),
                "validator_pods": types.MappingProxyType(dict(self.validator_pods)),
                "driver_revisions": types.MappingProxyType(dict(self.driver_revisions)),
            }
        return ViewSnapshot(
            node_facts=types.MappingProxyType(dict(self.node_facts)),
            policies=types.MappingProxyType(dict(self.policies)),
            nvidia_drivers=types.MappingProxyType(dict(self.nvidia_drivers)),
            driver_daemonsets=types.MappingProxyType(dict(self.driver_daemonsets)),
            operand_daemonsets=types.MappingProxyType(dict(self.operand_daemonsets)),
            api_groups=self.api_groups,
            dtk_imagestream=self.dtk_imagestream,
            cluster_version=self.cluster_version,
            cluster_proxy=self.cluster_proxy,
            driver_pod_pulls=types.MappingProxyType(dict(self.driver_pod_pulls)),
            pull_failing_since=types.MappingProxyType(dict(self.pull_failing_since)),
            gpu_clusters=types.MappingProxyType(dict(self.gpu_clusters)),
            **upgrade_parts,
        )
