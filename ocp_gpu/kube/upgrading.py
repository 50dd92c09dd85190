"""Driver upgrades against the API: reading the upgrade snapshot, and carrying out upgrade plans.

Thin I/O on plain JSON dicts (`requesting.request`): node cordons, state labels and
annotations (one merge patch each), Events and the `controllers.Upgrade` log line,
pod deletion and eviction, and the list calls that fill `model.upgrade_observations` records.
Decides nothing: `planning.upgrades.upgrade_plan` does.  `apply_node_plan` carries out one
`NodePlan` under the planner's contract (actions first, then the transition).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import logging
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

from ocp_gpu.kube import clients, reading, reporting, requesting
from ocp_gpu.model import driver_snapshot, labels, resource_claims, upgrade_observations
from ocp_gpu.model.driver_install import DriverInstall
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import (
    DriverPod,
    DriverRevision,
    PodRef,
    UpgradeNode,
    UpgradeSnapshot,
    UpgradeState,
    ValidatorPod,
    WorkloadPod,
)
from ocp_gpu.planning.drivers import driver_currency
from ocp_gpu.planning.upgrades import pod_selection, pool_upgrades, upgrade_plan

# The seed's `kubectl logs ... | grep controllers.Upgrade` finds these lines.
logger = logging.getLogger(labels.UPGRADE_LOGGER)

MERGE_PATCH: Final = "application/merge-patch+json"
# Every driver pod of the ClusterPolicy's DaemonSets (app.kubernetes.io/component=nvidia-driver, no
# pool label); with NVIDIADrivers the selector is planning.upgrades.pod_selection.driver_pod_selector's.
DRIVER_SELECTOR: Final = upgrade_observations.DRIVER_APP_SELECTOR
# Every GPU node (NFD's label): the nodes the upgrade manages.
GPU_NODE_SELECTOR: Final = f"{labels.NFD_NVIDIA_PCI}=true"
# A static pod's API mirror carries this annotation.
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"


# --- writes ----------------------------------------------------------------------------------


def _patch_node(api: clients.ApiClient, node: str, body: Mapping[str, Any]) -> dict[str, Any]:
    patched: dict[str, Any] = requesting.request(
        api, "PATCH", f"/api/v1/nodes/{quote(node)}", body=body, content_type=MERGE_PATCH, resource="nodes"
    )
    return patched


def cordon(
    api: clients.ApiClient,
    node: str,
    unschedulable: bool,
    annotations: Mapping[str, str | None] | None = None,
) -> None:
    """Mark the node (un)schedulable; `annotations` go in the same merge patch (atomic with it)."""
    body: dict[str, Any] = {"spec": {"unschedulable": unschedulable}}
    if annotations:
        body["metadata"] = {"annotations": dict(annotations)}
    _patch_node(api, node, body)


def annotate(api: clients.ApiClient, node: str, annotations: Mapping[str, str | None]) -> None:
    """Set (value) or remove (None) node annotations in one merge patch."""
    _patch_node(api, node, {"metadata": {"annotations": dict(annotations)}})


@dataclasses.dataclass(frozen=True)
class Announcement:
    """The GPUDriverUpgrade Event of one state label written (posted by `announce`)."""

    node: str
    uid: str
    state: UpgradeState
    now: datetime.datetime | None


def announce(api: clients.ApiClient, said: Announcement) -> None:
    """Post the transition's Event (reason GPUDriverUpgrade, the seed's exact message).

    NB: a failed Event is logged, never fatal (reporting.post_event).
    """
    involved = {"apiVersion": "v1", "kind": "Node", "name": said.node, "uid": said.uid}
    reporting.post_event(
        api,
        involved,
        upgrade_observations.EVENT_REASON,
        upgrade_observations.event_message(said.state),
        now=said.now,
    )


def set_upgrade_state(
    api: clients.ApiClient,
    node: str,
    state: UpgradeState,
    annotations: Mapping[str, str | None] | None = None,
    *,
    now: datetime.datetime | None = None,
    unschedulable: bool | None = None,
    announcing: bool = True,
) -> Announcement:
    """Write the state label and the annotations (and a cordon change) in one merge patch, then say so.

    The log line follows the patch, and so does the Event unless `announcing` is False: then
    the caller posts the returned Announcement (`announce`) when it suits it.
    """
    body: dict[str, Any] = {
        "metadata": {"labels": {labels.UPGRADE_STATE: state.value}, "annotations": dict(annotations or {})}
    }
    if unschedulable is not None:
        body["spec"] = {"unschedulable": unschedulable}
    patched = _patch_node(api, node, body)
    said = Announcement(node, str(patched["metadata"].get("uid", "")), state, now)
    logger.info("%s node=%s", upgrade_observations.event_message(state), node)
    if announcing:
        announce(api, said)
    return said


def delete_pod(api: clients.ApiClient, namespace: str, name: str, uid: str = "") -> None:
    """Delete a pod (graceful); gone already, or replaced by a same-named pod (uid given), is fine."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        requesting.request(
            api,
            "DELETE",
            f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}",
            body=body,
            resource="pods",
        )
    except requesting.ApiException as error:
        if error.status not in (404, 409):
            raise


def evict_pod(api: clients.ApiClient, namespace: str, name: str, uid: str = "") -> bool:
    """Evict a pod through policy/v1 Eviction; False when a PodDisruptionBudget refuses (HTTP 429).

    True also when the pod is gone already (404) or was replaced by a same-named pod (409 on
    the uid precondition): the pod asked for is not there any more.
    """
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    try:
        requesting.request(
            api,
            "POST",
            f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction",
            body=body,
            resource="pods/eviction",
        )
    except requesting.ApiException as error:
        if error.status == 429:
            return False
        if error.status in (404, 409):
            return True
        raise
    return True


# Threads posting the transitions' Events; a node's Events always go through the same one.
EVENT_THREADS = 4


class Announcer:
    """Posts the transitions' GPUDriverUpgrade Events off the pass's path, in order per node.

    NB: a pass ends only when every node's writes are done, and the next waits for it; an
    Event (one per transition, as many as the label patches) changes nothing a pass decides
    on, so the pass does not wait for it.  Each node's Events go to one single-thread
    executor, chosen by the node's name, so they are posted in the order of its transitions.
    """

    def __init__(self, api: clients.ApiClient, threads: int = EVENT_THREADS) -> None:
        self._api = api
        self._pools = [
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="upgrade-events")
            for _ in range(threads)
        ]

    def post(self, said: Announcement) -> None:
        pool = self._pools[zlib.crc32(said.node.encode()) % len(self._pools)]
        pool.submit(self._announce, said)

    def close(self) -> None:
        """Post what is queued, then stop the threads."""
        for pool in self._pools:
            pool.shutdown(wait=True)

    def _announce(self, said: Announcement) -> None:
        try:
            announce(self._api, said)
        except Exception:
            # NB: nobody waits on this future: say what went wrong here or nowhere.
            logger.exception("could not post the %s Event of node %s", said.state.value, said.node)


@dataclasses.dataclass(frozen=True)
class AppliedNode:
    """What `apply_node_plan` did on one node."""

    node: NodeName
    # The state label written (None: none was due, or an eviction was refused first).
    transition: UpgradeState | None
    # Evictions a PodDisruptionBudget refused (retried next pass).
    refused: tuple[PodRef, ...] = ()
    # The transition's Event, when the caller posts it (announcing=False).
    announcement: Announcement | None = None


def apply_node_plan(
    api: clients.ApiClient,
    plan: upgrade_plan.NodePlan,
    *,
    now: datetime.datetime | None = None,
    announcing: bool = True,
) -> AppliedNode:
    """Carry out one node's plan: its actions in order, then its transition and annotations.

    A plan whose only actions are a cordon change writes it with the transition, in one patch.
    With `announcing` False the transition's Event is left to the caller (`AppliedNode.announcement`).

    Raises requesting.ApiException on the first failed call, before the transition is written (the
    next pass plans again from what is there); the caller isolates nodes from each other.
    """
    refused: list[PodRef] = []
    if (
        plan.transition is not None
        and plan.actions
        and all(isinstance(action, upgrade_plan.Cordon | upgrade_plan.Uncordon) for action in plan.actions)
    ):
        # A cordon change and the transition it leads to: one atomic merge patch, not two.
        *_, last = plan.actions
        folded = dict(last.annotations) if isinstance(last, upgrade_plan.Cordon) else {}
        folded_said = set_upgrade_state(
            api,
            plan.node,
            plan.transition,
            {**folded, **plan.annotations},
            now=now,
            unschedulable=isinstance(last, upgrade_plan.Cordon),
            announcing=announcing,
        )
        return AppliedNode(plan.node, plan.transition, announcement=None if announcing else folded_said)
    for action in plan.actions:
        if isinstance(action, upgrade_plan.Cordon):
            cordon(api, plan.node, True, action.annotations)
        elif isinstance(action, upgrade_plan.Uncordon):
            cordon(api, plan.node, False)
        elif isinstance(action, upgrade_plan.DeletePods):
            for ref in action.pods:
                delete_pod(api, ref.namespace, ref.name, ref.uid)
        elif isinstance(action, upgrade_plan.EvictPods):
            refused += [ref for ref in action.pods if not evict_pod(api, ref.namespace, ref.name, ref.uid)]
        else:
            delete_pod(api, action.pod.namespace, action.pod.name, action.pod.uid)
    said: Announcement | None = None
    if plan.transition is not None:
        said = set_upgrade_state(
            api, plan.node, plan.transition, plan.annotations, now=now, announcing=announcing
        )
    elif plan.annotations:
        annotate(api, plan.node, plan.annotations)
    return AppliedNode(plan.node, plan.transition, tuple(refused), None if announcing else said)


# --- converting API objects to records ------------------------------------------------------


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return body.get("metadata") or {}


def _controller(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((ref for ref in metadata.get("ownerReferences") or () if ref.get("controller")), None)


def _ref(metadata: Mapping[str, Any]) -> PodRef:
    return PodRef(
        # NB: interned, as every repeated string of a pod record (issue 13: at 5,000 nodes the
        # watches keep 15,000 operand pods, and each decode makes its own copy of each string).
        namespace=sys.intern(str(metadata.get("namespace", ""))),
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
    )


def _statuses(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]


def _pod_ready(status: Mapping[str, Any]) -> bool:
    # NVIDIA's test: Running, with at least one container and every container ready.
    containers = status.get("containerStatuses") or ()
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") for c in containers)


def driver_pod(body: Mapping[str, Any]) -> DriverPod:
    """The DriverPod record of a driver pod object."""
    metadata = _meta(body)
    status = body.get("status") or {}
    owner = _controller(metadata)
    unready = [c for c in _statuses(status) if not c.get("ready")]
    waiting = next(
        (
            str(c["state"]["waiting"].get("reason", ""))
            for c in unready
            if (c.get("state") or {}).get("waiting")
        ),
        "",
    )
    revision_hash = (metadata.get("labels") or {}).get(upgrade_observations.POD_REVISION_LABEL)
    return DriverPod(
        ref=_ref(metadata),
        node=_node_name(body),
        daemonset=sys.intern(str(owner["name"])) if owner and owner.get("kind") == "DaemonSet" else None,
        revision_hash=None if revision_hash is None else sys.intern(str(revision_hash)),
        ready=_pod_ready(status),
        terminating=bool(metadata.get("deletionTimestamp")),
        restart_count=max((int(c.get("restartCount", 0)) for c in unready), default=0),
        waiting_reason=sys.intern(waiting),
        selector_labels=_shared_pairs(pod_selection.selector_labels(metadata.get("labels") or {})),
        install=_shared_install(driver_currency.driver_install(body.get("spec") or {})),
    )


# What driver pods install: a handful of distinct values (one per driver version and key) shared by
# thousands of DriverPods; bounded, as _PAIRS.
_INSTALLS: dict[DriverInstall, DriverInstall] = {}


def _shared_install(install: DriverInstall | None) -> DriverInstall | None:
    if install is None:
        return None
    shared = _INSTALLS.get(install)
    if shared is not None:
        return shared
    if len(_INSTALLS) < _PAIRS_MAX:
        _INSTALLS[install] = install
    return install


def _node_name(body: Mapping[str, Any]) -> NodeName:
    # Interned: the node's name is in its NodeFacts and in each of its pods' records.
    return NodeName(sys.intern(str((body.get("spec") or {}).get("nodeName", ""))))


# Selector label pairs as driver pods carry them: a handful of distinct values (one per driver
# version and pool) shared by thousands of DriverPods instead of a tuple each.
_PAIRS: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
# NB: a bound, so labels that vary per pod (never seen) cannot grow the table for ever.
_PAIRS_MAX = 1024


def _shared_pairs(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """One copy of each distinct tuple of (key, value) label pairs, its strings interned."""
    shared = _PAIRS.get(pairs)
    if shared is None:
        if len(_PAIRS) >= _PAIRS_MAX:
            _PAIRS.clear()
        shared = tuple((sys.intern(key), sys.intern(value)) for key, value in pairs)
        _PAIRS[shared] = shared
    return shared


def _uses_gpu(spec: Mapping[str, Any], is_resource: Callable[[str], bool]) -> bool:
    # As NVIDIA's filter: the app containers' limits and requests (init containers finish first).
    for container in spec.get("containers") or ():
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            if any(is_resource(name) for name in resources.get(kind) or {}):
                return True
    return False


def claim_names(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of a pod's ResourceClaims, as NVIDIA's PodHasNVIDIAGPUClaim resolves them: the
    entry's resourceClaimName, else (made from a template) the name its status entry gives;
    an entry with neither has no claim object yet and is left out."""
    made = {
        str(entry.get("name")): str(entry["resourceClaimName"])
        for entry in (body.get("status") or {}).get("resourceClaimStatuses") or ()
        if entry.get("resourceClaimName")
    }
    names = []
    for entry in (body.get("spec") or {}).get("resourceClaims") or ():
        name = entry.get("resourceClaimName") or made.get(str(entry.get("name")))
        if name:
            names.append(str(name))
    return tuple(names)


def workload_pod(body: Mapping[str, Any]) -> WorkloadPod:
    """The WorkloadPod record of any pod object."""
    metadata = _meta(body)
    spec = body.get("spec") or {}
    owner = _controller(metadata)
    return WorkloadPod(
        ref=_ref(metadata),
        node=NodeName(str(spec.get("nodeName", ""))),
        labels=dict(metadata.get("labels") or {}),
        phase=str((body.get("status") or {}).get("phase") or "Pending"),
        requests_gpu=_uses_gpu(spec, upgrade_observations.is_gpu_resource),
        requests_vm_gpu=_uses_gpu(spec, upgrade_observations.is_vm_gpu_resource),
        claims=claim_names(body),
        controller_kind=str(owner.get("kind", "")) if owner else None,
        uses_empty_dir=any("emptyDir" in volume for volume in spec.get("volumes") or ()),
        terminating=bool(metadata.get("deletionTimestamp")),
        mirror=MIRROR_ANNOTATION in (metadata.get("annotations") or {}),
    )


def validator_pod(body: Mapping[str, Any]) -> ValidatorPod:
    """The ValidatorPod record of a validator pod object."""
    return ValidatorPod(
        ref=_ref(_meta(body)),
        node=_node_name(body),
        ready=_pod_ready(body.get("status") or {}),
    )


def upgrade_node(body: Mapping[str, Any], driver_pods: Iterable[DriverPod] = ()) -> UpgradeNode:
    """The UpgradeNode record of a Node object, with the driver pods found on it."""
    return upgrade_observations.upgrade_node(reading.node_facts(body), tuple(driver_pods))


# --- reads ------------------------------------------------------------------------------------


def _in(namespace: str) -> str:
    return f"/namespaces/{quote(namespace)}" if namespace else ""


def list_driver_pods(
    api: clients.ApiClient, namespace: str, selector: str = DRIVER_SELECTOR
) -> tuple[DriverPod, ...]:
    """The driver pods in the operator namespace."""
    items = requesting.list_items(api, f"/api/v1{_in(namespace)}/pods", [("labelSelector", selector)])
    return tuple(driver_pod(item) for item in items)


def list_pods_on_node(api: clients.ApiClient, node: str) -> tuple[WorkloadPod, ...]:
    """Every pod bound to the node, in every namespace."""
    items = requesting.list_items(api, "/api/v1/pods", [("fieldSelector", f"spec.nodeName={node}")])
    return tuple(workload_pod(item) for item in items)


def list_pods_on_node_at(api: clients.ApiClient, node: str) -> tuple[tuple[WorkloadPod, ...], str]:
    """Every pod bound to the node, and the LIST's resourceVersion (a watch of them starts there).

    NB: one page: a node runs far fewer pods than a page holds; a list that would need more is
    read whole by `list_pods_on_node`, and no version is given (nothing can be watched from it).
    """
    page = requesting.request(
        api,
        "GET",
        "/api/v1/pods",
        query=[("fieldSelector", f"spec.nodeName={node}"), ("limit", str(requesting.LIST_PAGE))],
    )
    metadata = page.get("metadata") or {}
    if metadata.get("continue"):
        return list_pods_on_node(api, node), ""
    pods = tuple(workload_pod(item) for item in page.get("items") or ())
    return pods, str(metadata.get("resourceVersion") or "")


def list_pods_on_nodes(
    api: clients.ApiClient, nodes: Iterable[str]
) -> dict[NodeName, tuple[WorkloadPod, ...]]:
    """Every pod bound to any of `nodes`, from one paged LIST of the bound pods of the cluster.

    When most nodes' pods are wanted (every node of an upgrade with no parallel limit), one LIST
    costs a few pages instead of a request per node.  NB: each page is reduced to the wanted
    nodes' records before the next is read, so memory holds one page, not every pod.
    """
    wanted = {NodeName(name) for name in nodes}
    found: dict[NodeName, list[WorkloadPod]] = {name: [] for name in wanted}
    token = ""
    while True:
        page = requesting.request(
            api,
            "GET",
            "/api/v1/pods",
            query=[
                ("fieldSelector", "spec.nodeName!="),
                ("limit", str(requesting.LIST_PAGE)),
                *([("continue", token)] if token else []),
            ],
        )
        for item in page.get("items") or ():
            node = NodeName(str((item.get("spec") or {}).get("nodeName", "")))
            if node in found:
                found[node].append(workload_pod(item))
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return {name: tuple(pods) for name, pods in found.items()}


def list_validator_pods(
    api: clients.ApiClient, namespace: str, selector: str = upgrade_observations.VALIDATOR_SELECTOR
) -> tuple[ValidatorPod, ...]:
    items = requesting.list_items(api, f"/api/v1{_in(namespace)}/pods", [("labelSelector", selector)])
    return tuple(validator_pod(item) for item in items)


def validator_daemonset_exists(api: clients.ApiClient, namespace: str) -> bool:
    """A DaemonSet labelled app=nvidia-operator-validator exists in the namespace (one small read)."""
    page = requesting.request(
        api,
        "GET",
        f"/apis/apps/v1{_in(namespace)}/daemonsets",
        query=[("labelSelector", upgrade_observations.VALIDATOR_SELECTOR), ("limit", "1")],
    )
    return bool(page.get("items"))


def current_revisions(revisions: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """DaemonSet name -> the hash of its newest ControllerRevision (highest `.revision`).

    The hash is the revision's `controller-revision-hash` label (what the DaemonSet
    controller puts on pods), else its name without the `<daemonset>-` prefix.
    """
    newest: dict[str, tuple[int, str]] = {}
    for revision in revisions:
        metadata = _meta(revision)
        owner = _controller(metadata)
        if not owner or owner.get("kind") != "DaemonSet":
            # Not a DaemonSet's (StatefulSets keep ControllerRevisions too).
            continue
        daemonset = str(owner.get("name", ""))
        name = str(metadata.get("name", ""))
        revision_hash = (metadata.get("labels") or {}).get(
            upgrade_observations.POD_REVISION_LABEL
        ) or name.removeprefix(f"{daemonset}-")
        number = int(revision.get("revision", 0))
        if daemonset not in newest or number > newest[daemonset][0]:
            newest[daemonset] = (number, str(revision_hash))
    return {daemonset: revision_hash for daemonset, (_, revision_hash) in newest.items()}


def list_controller_revisions(api: clients.ApiClient, namespace: str, selector: str) -> dict[str, str]:
    """DaemonSet name -> current revision hash, from the ControllerRevisions matching `selector`.

    NB: the DaemonSet controller labels each revision with the pod template's labels, so
    the driver pods' selector (their component label) finds every driver DaemonSet's.
    """
    items = requesting.list_items(
        api, f"/apis/apps/v1{_in(namespace)}/controllerrevisions", [("labelSelector", selector)]
    )
    return current_revisions(items)


def driver_revision(daemonset: Mapping[str, Any], current_hash: str | None) -> DriverRevision:
    """The DriverRevision of a DaemonSet object and its current revision hash."""
    return upgrade_observations.driver_revision(reading.driver_daemonset(daemonset), current_hash)


def list_driver_daemonsets(
    api: clients.ApiClient, namespace: str, selector: str = DRIVER_SELECTOR
) -> tuple[driver_snapshot.DriverDaemonSet, ...]:
    """The driver DaemonSets matching `selector` on their own labels."""
    items = requesting.list_items(
        api, f"/apis/apps/v1{_in(namespace)}/daemonsets", [("labelSelector", selector)]
    )
    return tuple(reading.driver_daemonset(item) for item in items)


def read_upgrade_snapshot(
    api: clients.ApiClient,
    namespace: str,
    policy: UpgradePolicy | pool_upgrades.UpgradeRules,
    *,
    node_selector: str = GPU_NODE_SELECTOR,
    driver_selector: str | None = None,
    daemonset_selector: str | None = None,
    validator_deployed: bool | None = None,
    nvidia_driver_mode: bool = False,
) -> UpgradeSnapshot:
    """Everything one upgrade pass needs, read once.

    Driver pods and DaemonSets are listed by `driver_selector`, by default the one the mode
    selects (`planning.upgrades.pod_selection.driver_pod_selector`).

    Pods are listed only on the nodes `planning.upgrades.pool_upgrades.nodes_needing_pods` names
    (each NVIDIADriver pool's by its own rules); a
    node whose list fails is left out of `pods` (that node alone waits) and logged.
    `validator_deployed=None` decides from the cluster: a DaemonSet or a pod labelled
    app=nvidia-operator-validator exists in the namespace.
    """
    driver_selector = driver_selector or pod_selection.driver_pod_selector(nvidia_driver_mode)
    nodes = upgrade_observations.upgrade_nodes(
        (
            reading.node_facts(item)
            for item in requesting.list_items(api, "/api/v1/nodes", [("labelSelector", node_selector)])
        ),
        list_driver_pods(api, namespace, driver_selector),
    )
    selector = daemonset_selector or driver_selector
    revisions = list_controller_revisions(api, namespace, selector)
    daemonsets = list_driver_daemonsets(api, namespace, selector)
    pods: dict[NodeName, tuple[WorkloadPod, ...]] = {}
    for name in pool_upgrades.nodes_needing_pods(nodes, pool_upgrades.as_rules(policy)):
        try:
            pods[name] = list_pods_on_node(api, name)
        except requesting.ApiException as error:
            logger.warning("could not list the pods of node %s: %s", name, error.reason)
    validators = list_validator_pods(api, namespace)
    if validator_deployed is None:
        validator_deployed = bool(validators) or validator_daemonset_exists(api, namespace)
    return upgrade_observations.upgrade_snapshot(
        nodes, daemonsets, revisions, pods, validators, validator_deployed, claims=read_claim_holds(api, pods)
    )


def read_claim_holds(
    api: clients.ApiClient, pods: Mapping[NodeName, Iterable[WorkloadPod]]
) -> dict[str, ClaimHold]:
    """What the ResourceClaims of these pods hold, one GET each, as NVIDIA's filter reads them.

    A claim that cannot be read is left out: planning counts it as a GPU (planning/upgrades/pod_selection).
    """
    held: dict[str, ClaimHold] = {}
    for node_pods in pods.values():
        for pod in node_pods:
            for name in pod.claims:
                key = resource_claims.claim_key(pod.ref.namespace, name)
                if key in held:
                    continue
                path = (
                    f"/apis/{resource_claims.API_GROUP}/{resource_claims.API_VERSION}/namespaces/"
                    f"{quote(pod.ref.namespace)}/{resource_claims.CLAIMS_PLURAL}/{quote(name)}"
                )
                try:
                    held[key] = reading.claim_hold(requesting.request(api, "GET", path))
                except requesting.ApiException as error:
                    logger.warning("could not read ResourceClaim %s: %s", key, error.reason)
    return held


def busy_plans(plans: Sequence[upgrade_plan.NodePlan]) -> list[upgrade_plan.NodePlan]:
    """The node plans with something to do (the others cost no request)."""
    return [plan for plan in plans if plan.actions or plan.transition is not None or plan.annotations]
