"""Adopt an object ocp-gpu renders that someone else made, before the first apply to it.

NVIDIA's GPU Operator, stopped, leaves its operands running under the names ocp-gpu renders
(DESIGN §4: names and selectors are NVIDIA's).  `adopt` makes ocp-gpu their one owner
(planning/operands/takeover.py decides how):
- an object whose fields other managers own: one PATCH of its managedFields, so the apply that
  follows leaves exactly what ocp-gpu renders (no field kept alive by NVIDIA's manager);
- a DaemonSet whose immutable selector is not ours (an older NVIDIA release, NVIDIA's precompiled
  driver, ocp-gpu's own before its DTK selector became NVIDIA's): `replace_daemonset`;
- no object under the name of a driver DaemonSet, but another operator's driver pods on its nodes
  (NVIDIA's single vanilla-Kubernetes `nvidia-driver-daemonset`, where ocp-gpu runs one per OS):
  `hand_over_driver_pods` gives them to ours before it is created.

Called by kube/applying.apply_if_changed for an object the watches do not show as ours
(one GET), and when an apply fails on an immutable selector.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from ocp_gpu.kube import clients, owning, requesting
from ocp_gpu.model import labels
from ocp_gpu.planning.operands import takeover

logger = logging.getLogger("ocp_gpu.adopting")

# How long a DaemonSet deleted with propagationPolicy Orphan may take to go (the garbage collector
# orphans its pods and ControllerRevisions, then removes the finalizer).
ORPHAN_WAIT_S: Final = 60.0
_POLL_S: Final = 0.2


def _get(api: clients.ApiClient, path: str) -> dict[str, Any] | None:
    try:
        found = requesting.request(api, "GET", path)
    except requesting.ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(found) if found else None


def _path(manifest: Mapping[str, Any]) -> str:
    metadata = manifest["metadata"]
    return requesting.object_path(
        manifest["apiVersion"], manifest["kind"], metadata["name"], metadata.get("namespace")
    )


def get_object(api: clients.ApiClient, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The live object under `manifest`'s name; None when there is none."""
    return _get(api, _path(manifest))


def adopt(api: clients.ApiClient, manifest: Mapping[str, Any]) -> str:
    """Make the live object under `manifest`'s name ready for ocp-gpu's apply; what was done, for logs.

    "" when there is nothing to adopt (absent, or every field already ours).
    """
    live = _get(api, _path(manifest))
    if live is None:
        return hand_over_driver_pods(api, manifest) if _is_driver_daemonset(manifest) else ""
    if manifest["kind"] == "DaemonSet" and takeover.selector_differs(live, manifest):
        return replace_daemonset(api, live, manifest)
    managed = (live.get("metadata") or {}).get("managedFields") or []
    foreign = takeover.foreign_managers(managed)
    if not foreign:
        return ""
    take_ownership(api, live, manifest["apiVersion"])
    return f"took over the fields of {', '.join(foreign)}"


def take_ownership(api: clients.ApiClient, live: Mapping[str, Any], api_version: str) -> None:
    """One PATCH: every field of the main resource owned by ocp-gpu's apply alone."""
    metadata = live.get("metadata") or {}
    body = {
        "metadata": {
            "managedFields": takeover.taken_over_managed_fields(
                metadata.get("managedFields") or [], api_version
            ),
            # NB: a precondition: someone else's write in between makes this fail, and the next pass retries
            "resourceVersion": metadata.get("resourceVersion"),
        }
    }
    requesting.request(
        api,
        "PATCH",
        _path({"apiVersion": api_version, "kind": live.get("kind") or "", "metadata": metadata}),
        body=body,
        content_type="application/merge-patch+json",
        verb="adopt",
    )


def replace_daemonset(api: clients.ApiClient, live: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """Delete the live DaemonSet leaving its pods running, and relabel them for ours to adopt.

    The caller then applies ours: the DaemonSet controller adopts every running pod its selector
    matches, so no driver restarts.  NB: the pods are relabelled before ours exists, so it never
    creates a second pod on a node that has one (and driver pods repel each other besides).
    """
    metadata = live.get("metadata") or {}
    name, namespace, uid = (
        str(metadata["name"]),
        str(metadata.get("namespace", "")),
        str(metadata.get("uid", "")),
    )
    old_selector = takeover.selector_of(live)
    path = _path({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata})
    _delete_orphaning(api, path, name, uid)
    selector = ",".join(f"{k}={v}" for k, v in (old_selector.get("matchLabels") or {}).items())
    pods = requesting.list_items(
        api, f"/api/v1/namespaces/{namespace}/pods", [("labelSelector", selector)] if selector else []
    )
    relabels = takeover.pods_to_relabel(pods, uid, takeover.selector_of(manifest))
    for relabel in relabels:
        _relabel_pod(api, namespace, relabel)
    logger.info(
        "replaced DaemonSet %s (selector %s): deleted leaving its pods, relabelled %d for ours to adopt",
        name,
        old_selector,
        len(relabels),
    )
    return f"replaced (selector {old_selector}), {len(relabels)} running pods kept"


def _is_driver_daemonset(manifest: Mapping[str, Any]) -> bool:
    template = ((manifest.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return (
        manifest["kind"] == "DaemonSet"
        and (template.get("labels") or {}).get(labels.COMPONENT) == labels.DRIVER_COMPONENT
    )


# Another operator's driver pods and DaemonSets: the driver component, not managed by ocp-gpu.
_FOREIGN_DRIVERS: Final = (
    f"{labels.COMPONENT}={labels.DRIVER_COMPONENT},{labels.MANAGED_BY}!={labels.MANAGED_BY_VALUE}"
)


def hand_over_driver_pods(api: clients.ApiClient, manifest: Mapping[str, Any]) -> str:
    """Give another operator's running driver pods on the nodes of ocp-gpu's driver DaemonSet
    `manifest` (about to be created) to it: relabelled for its selector, then their DaemonSet
    deleted with propagationPolicy Orphan (planning/operands/takeover.plan_driver_handover).

    One LIST when there is nothing to take (no foreign driver pod: every cluster ocp-gpu set up).
    The caller then creates the DaemonSet, whose controller adopts the pods: no driver restarts.
    """
    namespace = str(manifest["metadata"]["namespace"])
    pods = requesting.list_items(
        api, f"/api/v1/namespaces/{namespace}/pods", [("labelSelector", _FOREIGN_DRIVERS)]
    )
    if not pods:
        return ""
    daemonsets = requesting.list_items(
        api, f"/apis/apps/v1/namespaces/{namespace}/daemonsets", [("labelSelector", _FOREIGN_DRIVERS)]
    )
    node_selector = ((manifest["spec"]["template"].get("spec") or {}).get("nodeSelector")) or {}
    nodes = requesting.list_items(
        api, "/api/v1/nodes", [("labelSelector", ",".join(f"{k}={v}" for k, v in node_selector.items()))]
    )
    plan = takeover.plan_driver_handover(
        manifest, daemonsets, pods, [str(n["metadata"]["name"]) for n in nodes]
    )
    if not plan.relabel and not plan.delete:
        return ""
    for relabel in plan.relabel:
        # NB: first: the labels added leave the old selector's, so its DaemonSet (if any) keeps them
        _relabel_pod(api, namespace, relabel)
    for name, uid in plan.delete:
        _delete_orphaning(api, f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", name, uid)
    described = plan.describe()
    logger.info("handed over to %s: %s", manifest["metadata"]["name"], described)
    return described


def _delete_orphaning(api: clients.ApiClient, path: str, name: str, uid: str) -> None:
    """Delete DaemonSet `name` (uid `uid`) with propagationPolicy Orphan and wait until it is gone:
    the garbage collector has then orphaned its pods (it removes the orphan finalizer last)."""
    try:
        requesting.request(
            api,
            "DELETE",
            path,
            body={"propagationPolicy": "Orphan", "preconditions": {"uid": uid}},
            resource="daemonsets",
        )
    except requesting.ApiException as error:
        if error.status not in (404, 409):
            raise
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while True:
        still = _get(api, path)
        if still is None or (still.get("metadata") or {}).get("uid") != uid:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"DaemonSet {name} deleted with propagationPolicy Orphan is still there")
        time.sleep(_POLL_S)


def is_immutable_selector(error: BaseException) -> bool:
    """An apply refused because it would change a DaemonSet's selector."""
    return (
        isinstance(error, requesting.ApiException)
        and error.status == 422
        and "spec.selector" in str(error.body)
        and "immutable" in str(error.body)
    )


def list_foreign(api: clients.ApiClient, namespace: str, kind: owning.OwnedKind) -> list[takeover.Foreign]:
    """Every object of `kind` in `namespace` (cluster-scoped: anywhere) that is not ocp-gpu's; one LIST."""
    selector = [("labelSelector", f"{labels.MANAGED_BY}!={labels.MANAGED_BY_VALUE}")]
    prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    path = f"{prefix}/namespaces/{namespace}/{kind.plural}" if kind.namespaced else f"{prefix}/{kind.plural}"
    found: list[takeover.Foreign] = []
    for item in requesting.list_items(api, path, selector):
        metadata = item.get("metadata") or {}
        found.append(
            takeover.Foreign(
                kind=kind.kind,
                namespace=namespace if kind.namespaced else "",
                name=str(metadata.get("name", "")),
                owners=tuple(str(ref.get("uid", "")) for ref in metadata.get("ownerReferences") or ()),
                labels=dict(metadata.get("labels") or {}),
            )
        )
    return found


def _relabel_pod(api: clients.ApiClient, namespace: str, relabel: takeover.Relabel) -> None:
    """Merge-patch one pod's labels (a takeover's relabel: the pod moves under our selector)."""
    requesting.request(
        api,
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{relabel.name}",
        body={"metadata": {"labels": dict(relabel.labels)}},
        content_type="application/merge-patch+json",
        resource="pods",
        verb="relabel",
    )
