"""kopf registrations only: every watch feeds the in-memory view and wakes the loop.

NB: no change-detecting handlers (on.create/on.update/on.resume): kopf would store
its diff-base annotation on every object, i.e. a write per object.
We use index handlers (kopf runs them for every listed object *before* any
other handler, so once its index barrier opens, the view is complete: kopf_toggles)
and event handlers, which write nothing.

NB: the operand pods, the nodes and our DaemonSets are not kopf's: kube/pod_watch.py,
kube/node_watch.py and kube/daemonset_watch.py watch them (thousands of objects or events,
were most of kopf's work at start-up; issue 13).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from typing import Any, Literal, TypeVar, cast

import kopf

from ocp_gpu.kube import connecting, daemonset_watch, owning, reading, requesting, watching
from ocp_gpu.model import apis, labels
from ocp_gpu.planning import delivery
from ocp_gpu.reconcilers import runtime

K = TypeVar("K")
V = TypeVar("V")

OWNED_SELECTOR = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: kopf builds one (a deep copy of the whole object, then another to clear
    its progress keys) on every event of every watched kind, for change-detecting handlers
    alone; we register none (see the module docstring), so nothing ever read it.  At 100
    nodes the copies were a third of the operator's start-up CPU (issue 13, py-spy).

    NB: an on.create/on.update/on.resume/daemon handler would need kopf's own storage back
    (tests/unit/test_handlers_registry.py fails if one is registered).
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return cast(kopf.BodyEssence, {})

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = NoDiffBase()
    # Leadership comes from our Lease (kube/electing.py), not kopf's peering CRDs.
    settings.peering.standalone = True
    # kopf's own Events about handler outcomes would be writes in steady state.
    settings.posting.enabled = False
    # Only the kinds registered here are watched; no namespace or CRD scanning.
    settings.scanning.disabled = True
    # Each watch request lives as long as the operand pods' (kube/watching.py): every re-open
    # is a read in steady state.  NB: kopf's 70 s inactivity timeout re-opened quiet kinds'
    # watches up to twice per 120 s at 1,000 nodes (no bookmark came that often); a dead
    # connection is seen closed (an API server killed), and a partitioned leader loses its Lease.
    settings.watching.server_timeout = watching.WATCH_TIMEOUT_S
    settings.watching.inactivity_timeout = watching.WATCH_TIMEOUT_S + watching.INACTIVITY_MARGIN_S
    settings.networking.request_timeout = 60
    # Server-side filters: only the objects we own (every kind of kube/owning.OWNED_KINDS:
    # tens of objects, never every ConfigMap of the cluster) and the few OpenShift singletons we read.
    for kind in owning.OWNED_KINDS:
        settings.watching.label_selectors[kind.group, kind.plural] = OWNED_SELECTOR
    # The driver DaemonSets' revisions (the DaemonSet controller copies the template's labels).
    settings.watching.label_selectors["apps", "controllerrevisions"] = (
        f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
    )
    # Initial lists in pages: at thousands of nodes one unpaged list is tens of megabytes at once.
    settings.watching.chunk_size = requesting.LIST_PAGE
    settings.watching.field_selectors[apis.IMAGE_GROUP, "imagestreams"] = (
        f"metadata.name={labels.DTK_IMAGESTREAM_NAME}"
    )
    settings.watching.field_selectors[apis.CONFIG_GROUP, "clusterversions"] = "metadata.name=version"
    settings.watching.field_selectors[apis.CONFIG_GROUP, "proxies"] = "metadata.name=cluster"
    return settings


def build_registry(rt: runtime.Runtime) -> kopf.OperatorRegistry:
    """Every watch of the operator, one function per watched kind."""
    registry = kopf.OperatorRegistry()
    _register_login(registry, rt)
    for kind in owning.watched_kinds(rt.view.api_groups):
        # NB: our DaemonSets are watched by kube/daemonset_watch.py (their status moves with
        # every pod of a rollout: thousands of events at start-up).
        if kind != daemonset_watch.KIND:
            _register_owned_kind(registry, rt, kind)
    _register_revisions(registry, rt)
    if apis.IMAGE_GROUP in rt.view.api_groups:
        _register_imagestream(registry, rt)
    if apis.CONFIG_GROUP in rt.view.api_groups:
        _register_cluster_config(registry, rt)
    _register_policies(registry, rt)
    if rt.view.nvidia_driver_api:
        _register_nvidia_drivers(registry, rt)
    return registry


def _keep(kept: MutableMapping[K, V], key: K, seen: V, mark: Callable[[], None]) -> None:
    """Keep what a watch event shows; wake the loop (`mark`) only when it differs from what we had.

    NB: a resync or a change to a field the record leaves out (a heartbeat) wakes nothing.
    """
    if kept.get(key) != seen:
        kept[key] = seen
        mark()


def _register_login(registry: kopf.OperatorRegistry, rt: runtime.Runtime) -> None:
    """kopf logs in with the credentials our own client uses (one kubeconfig loader)."""
    calls = 0

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        nonlocal calls
        calls += 1
        # NB: kopf logs in again only after the API server refused its credentials (401).
        return connecting.connection_info(rt.api_client, renew=calls > 1)


def _register_revisions(registry: kopf.OperatorRegistry, rt: runtime.Runtime) -> None:
    """The driver DaemonSets' ControllerRevisions (which pods run the current template)."""

    rt.view.watch("apps", "controllerrevisions")

    @kopf.index("apps", "v1", "controllerrevisions", registry=registry, id="driver-revisions")
    async def index_revision(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        if namespace != rt.namespace:
            return
        _keep(rt.view.driver_revisions, name, reading.controller_revision(body), rt.scheduler.mark_upgrades)

    @kopf.on.event("apps", "v1", "controllerrevisions", registry=registry, id="driver-revision-events")
    async def revision_event(name: str, namespace: str | None, type: str | None, **_: Any) -> None:
        rt.view.mark_listed()
        if (
            type == "DELETED"
            and namespace == rt.namespace
            and rt.view.driver_revisions.pop(name, None) is not None
        ):
            rt.scheduler.mark_upgrades()


def _register_imagestream(registry: kopf.OperatorRegistry, rt: runtime.Runtime) -> None:
    """The driver-toolkit ImageStream (OpenShift only)."""
    _register_singleton(
        registry, rt, apis.IMAGE_GROUP, "imagestreams", "dtk_imagestream", labels.DTK_IMAGESTREAM_NAMESPACE
    )


def _register_cluster_config(registry: kopf.OperatorRegistry, rt: runtime.Runtime) -> None:
    """OpenShift's ClusterVersion and cluster Proxy singletons."""
    _register_singleton(registry, rt, apis.CONFIG_GROUP, "clusterversions", "cluster_version")
    _register_singleton(registry, rt, apis.CONFIG_GROUP, "proxies", "cluster_proxy")


def _register_singleton(
    registry: kopf.OperatorRegistry,
    rt: runtime.Runtime,
    group: str,
    plural: str,
    field: Literal["dtk_imagestream", "cluster_version", "cluster_proxy"],
    in_namespace: str | None = None,
) -> None:
    """Keep one OpenShift object (field-selected by name in operator_settings) in `rt.view.<field>`.

    NB: an index handler, not only an event handler: kopf then counts the kind in its indices
    readiness, so no pass runs before its listing (planning.delivery: until then the field is
    NOT_DELIVERED, never None, which means absent).
    """
    rt.view.watch(group, plural)
    setattr(rt.view, field, delivery.NOT_DELIVERED)

    @kopf.index(group, "v1", plural, registry=registry, id=f"singleton-{plural}")
    async def index_singleton(body: kopf.Body, namespace: str | None, **_: Any) -> None:
        if namespace != in_namespace:
            return
        seen = reading.plain_object(body)
        if getattr(rt.view, field) != seen:
            setattr(rt.view, field, seen)
            rt.scheduler.mark_drivers()

    @kopf.on.event(group, "v1", plural, registry=registry, id=f"singleton-{plural}-events")
    async def singleton_event(namespace: str | None, type: str | None, **_: Any) -> None:
        rt.view.mark_listed()
        if type == "DELETED" and namespace == in_namespace:
            setattr(rt.view, field, None)
            rt.scheduler.mark_drivers()


def _register_policies(registry: kopf.OperatorRegistry, rt: runtime.Runtime) -> None:
    """ClusterPolicies: every one is kept (the oldest is active); any change wakes a pass."""

    rt.view.watch(apis.POLICY_GROUP, apis.POLICY_PLURAL)
    # Policies whose last event changed only their status (mostly our own status write coming
    # back): the pass only judges the status again (scheduling.Changes.progress_only).
    status_only: set[str] = set()

    @kopf.index(apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, registry=registry, id="policies")
    async def index_policy(body: kopf.Body, name: str, **_: Any) -> None:
        before, seen = rt.view.policies.get(name), reading.cluster_policy(body)
        rt.view.policies[name] = seen
        if before is not None and before.is_same_but_status(seen):
            status_only.add(name)
        else:
            status_only.discard(name)

    @kopf.on.event(
        apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, registry=registry, id="policy-events"
    )
    async def policy_event(name: str, type: str | None, **_: Any) -> None:
        rt.view.mark_listed()
        if type == "DELETED":
            rt.view.policies.pop(name, None)
        elif name in status_only:
            status_only.discard(name)
            rt.scheduler.mark_progress()
            return
        rt.scheduler.mark_policies()


def _register_owned_kind(
    registry: kopf.OperatorRegistry, rt: runtime.Runtime, kind: owning.OwnedKind
) -> None:
    """Keep (applied hash, owner) of every owned object of `kind`; wake a pass when one changes or goes."""

    def ours(namespace: str | None) -> bool:
        # Namespaced objects count only in our operand namespace; cluster-scoped ones always.
        return not kind.namespaced or namespace == rt.namespace

    rt.view.watch(kind.group, kind.plural)

    @kopf.index(kind.group, kind.version, kind.plural, registry=registry, id=f"owned-{kind.plural}")
    async def index_owned(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        if not ours(namespace):
            return
        ident = owning.ident(kind.kind, namespace, name)
        _keep(rt.view.owned, ident, owning.observed_object(body), rt.scheduler.mark_owned)

    @kopf.on.event(kind.group, kind.version, kind.plural, registry=registry, id=f"owned-{kind.plural}-events")
    async def owned_event(name: str, namespace: str | None, type: str | None, **_: Any) -> None:
        rt.view.mark_listed()
        if type == "DELETED" and ours(namespace):
            # Deleted by hand or garbage-collected: the next pass applies it again.
            rt.view.owned.pop(owning.ident(kind.kind, namespace, name), None)
            rt.scheduler.mark_owned()


def _register_nvidia_drivers(registry: kopf.OperatorRegistry, rt: runtime.Runtime) -> None:
    """Keep every NVIDIADriver; a change wakes the main pass (which deploys the pools)."""

    rt.view.watch(apis.NVIDIA_DRIVER_GROUP, apis.NVIDIA_DRIVER_PLURAL)

    @kopf.index(
        apis.NVIDIA_DRIVER_GROUP,
        apis.NVIDIA_DRIVER_VERSION,
        apis.NVIDIA_DRIVER_PLURAL,
        registry=registry,
        id="nvidia-drivers",
    )
    async def index_nvidia_driver(body: kopf.Body, name: str, **_: Any) -> None:
        rt.view.nvidia_drivers[name] = reading.nvidia_driver(body)

    @kopf.on.event(
        apis.NVIDIA_DRIVER_GROUP,
        apis.NVIDIA_DRIVER_VERSION,
        apis.NVIDIA_DRIVER_PLURAL,
        registry=registry,
        id="nvidia-driver-events",
    )
    async def nvidia_driver_event(name: str, type: str | None, **_: Any) -> None:
        if type == "DELETED":
            rt.view.nvidia_drivers.pop(name, None)
        rt.view.mark_listed()
        rt.scheduler.mark_policies()


def quiet_kopf() -> None:
    """kopf logs every watch (re)connection at INFO; keep the operator's log readable."""
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("kopf._core.reactor.running").setLevel(logging.WARNING)
