"""The view's records of every kind with few objects, kept from their watches (kube/object_watches.py).

Glue, as the node, pod and DaemonSet views: each keeps its kind's records in the view
(reconcilers/cluster_view.ClusterView) and wakes the loop that reads them, only when what it
keeps changed (a resync or a field the record leaves out wakes nothing):
- owned objects (`owned`): a pass re-applies what differs from its rendering;
- driver ControllerRevisions (`driver_revisions`): the upgrade loop;
- the OpenShift singletons (`dtk_imagestream`, `cluster_version`, `cluster_proxy`): the main
  pass; planning/delivery's NOT_DELIVERED until their kind is listed, None once it is listed
  without them (absent);
- ClusterPolicies (`policies`): the main pass; a change of the status alone (mostly our own
  status write coming back) is rollout progress (scheduling.Changes.progress_only);
- NVIDIADrivers (`nvidia_drivers`): the main pass (which deploys the pools);
- GPUClusters (`gpu_clusters`): the main pass (one may own the DRA operand); a change of the
  status alone is rollout progress, as the ClusterPolicies';
- ResourceClaims (`resource_claims`, what each holds): wake nothing. Only a node deleting its
  GPU pods reads them, and it reads its pods again each pass anyway (no watch covers them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from ocp_gpu.kube import object_watches, owning
from ocp_gpu.model import apis, custom_resources, nvidia_driver_spec, resource_claims
from ocp_gpu.planning import delivery
from ocp_gpu.reconcilers import runtime, watched_view

SingletonField = Literal["dtk_imagestream", "cluster_version", "cluster_proxy"]


class OwnedView(watched_view.WatchedView[object_watches.OwnedFacts]):
    """Keeps the view's `owned` records of one owned kind (every kind but DaemonSets: daemonset_view)."""

    def __init__(self, rt: runtime.Runtime, kind: owning.OwnedKind) -> None:
        super().__init__(rt, kind.group, kind.plural)
        self._kind = kind.kind
        # Namespaced objects are watched in the operand namespace only; cluster-scoped ones have none.
        self._in = self._namespace if kind.namespaced else ""

    def known(self) -> Iterable[str]:
        return [name for kind, _, name in self._view.owned if kind == self._kind]

    def seen(self, facts: object_watches.OwnedFacts) -> None:
        ident = owning.ident(self._kind, self._in, facts.name)
        if self._view.owned.get(ident) != facts.observed:
            self._view.owned[ident] = facts.observed
            self._scheduler.mark_owned()

    def gone(self, name: str) -> None:
        # Deleted by hand or garbage-collected: the next pass applies it again.
        self._view.owned.pop(owning.ident(self._kind, self._in, name), None)
        self._scheduler.mark_owned()


class RevisionView(watched_view.WatchedView[object_watches.RawFacts]):
    """Keeps the view's `driver_revisions` (which driver pods run the current template)."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, "apps", "controllerrevisions")

    def known(self) -> Iterable[str]:
        return self._view.driver_revisions

    def seen(self, facts: object_watches.RawFacts) -> None:
        if self._view.driver_revisions.get(facts.name) != facts.body:
            self._view.driver_revisions[facts.name] = facts.body
            self._scheduler.mark_upgrades()

    def gone(self, name: str) -> None:
        if self._view.driver_revisions.pop(name, None) is not None:
            self._scheduler.mark_upgrades()


class SingletonView(watched_view.WatchedView[object_watches.RawFacts]):
    """Keeps one OpenShift object (its watch selects it by name) in the view's `field`.

    NB: NOT_DELIVERED from the moment the watch is set up until its kind is listed: no pass
    reads it as absent before (planning/delivery).
    """

    def __init__(self, rt: runtime.Runtime, group: str, plural: str, field: SingletonField) -> None:
        super().__init__(rt, group, plural)
        self._field = field
        setattr(self._view, field, delivery.NOT_DELIVERED)

    def known(self) -> Iterable[str]:
        present = delivery.present(getattr(self._view, self._field))
        return [str(present["metadata"].get("name") or "")] if present is not None else []

    def listed(self, facts: Sequence[object_watches.RawFacts]) -> None:
        # Listed: not seen by then means it does not exist.
        setattr(self._view, self._field, delivery.settle(getattr(self._view, self._field)))
        super().listed(facts)

    def seen(self, facts: object_watches.RawFacts) -> None:
        if getattr(self._view, self._field) != facts.body:
            setattr(self._view, self._field, dict(facts.body))
            self._scheduler.mark_drivers()

    def gone(self, name: str) -> None:
        setattr(self._view, self._field, None)
        self._scheduler.mark_drivers()


class PolicyView(watched_view.WatchedView[custom_resources.PolicyObject]):
    """Keeps the view's `policies`: every ClusterPolicy (the oldest is active)."""

    def __init__(self, rt: runtime.Runtime, group: str, plural: str) -> None:
        super().__init__(rt, group, plural)

    def known(self) -> Iterable[str]:
        return self._view.policies

    def seen(self, facts: custom_resources.PolicyObject) -> None:
        before = self._view.policies.get(facts.name)
        self._view.policies[facts.name] = facts
        if before is not None and before.is_same_but_status(facts):
            # Its status alone (mostly our own status write coming back): judge the status again.
            self._scheduler.mark_progress()
        else:
            self._scheduler.mark_policies()

    def gone(self, name: str) -> None:
        self._view.policies.pop(name, None)
        self._scheduler.mark_policies()


class NvidiaDriverView(watched_view.WatchedView[nvidia_driver_spec.NvidiaDriver]):
    """Keeps the view's `nvidia_drivers`; any change wakes the main pass (which deploys the pools)."""

    def __init__(self, rt: runtime.Runtime, group: str, plural: str) -> None:
        super().__init__(rt, group, plural)

    def known(self) -> Iterable[str]:
        return self._view.nvidia_drivers

    def seen(self, facts: nvidia_driver_spec.NvidiaDriver) -> None:
        self._view.nvidia_drivers[facts.name] = facts
        self._scheduler.mark_policies()

    def gone(self, name: str) -> None:
        self._view.nvidia_drivers.pop(name, None)
        self._scheduler.mark_policies()


class GpuClusterView(watched_view.WatchedView[custom_resources.GpuClusterObject]):
    """Keeps the view's `gpu_clusters`; a spec change wakes the main pass (one may own the DRA
    operand), a change of the status alone (our own write coming back) only judges it again."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_PLURAL)

    def known(self) -> Iterable[str]:
        return self._view.gpu_clusters

    def seen(self, facts: custom_resources.GpuClusterObject) -> None:
        before = self._view.gpu_clusters.get(facts.name)
        self._view.gpu_clusters[facts.name] = facts
        if before is not None and before.is_same_but_status(facts):
            self._scheduler.mark_progress()
        else:
            self._scheduler.mark_policies()

    def gone(self, name: str) -> None:
        self._view.gpu_clusters.pop(name, None)
        self._scheduler.mark_policies()


class ClaimView(watched_view.WatchedView[object_watches.ClaimFacts]):
    """Keeps the view's `resource_claims`: what each claim holds, by namespace/name."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, resource_claims.API_GROUP, resource_claims.CLAIMS_PLURAL)

    def known(self) -> Iterable[str]:
        return self._view.resource_claims

    def seen(self, facts: object_watches.ClaimFacts) -> None:
        self._view.resource_claims[facts.name] = facts.hold

    def gone(self, name: str) -> None:
        self._view.resource_claims.pop(name, None)
