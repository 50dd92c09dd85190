"""Targeted reads beside the watches: the ConfigMaps a ClusterPolicy names, a last look at the nodes,
whether a RuntimeClass is ours.

NB: ConfigMaps are read on each reconcile pass that renders drivers (a GET per named
ConfigMap); they are few and small, and a watch on every ConfigMap of the namespace
would cost more.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

from ocp_gpu.kube import clients, requesting
from ocp_gpu.model import driver_snapshot, labels


def config_map_keys(
    api_client: clients.ApiClient, namespace: str, names: Iterable[str]
) -> dict[str, tuple[str, ...] | None]:
    """The data keys (sorted) of each named ConfigMap in `namespace`; None for one that does not exist."""
    found: dict[str, tuple[str, ...] | None] = {}
    for name in sorted(set(names)):
        try:
            # NB: raw JSON: the typed API's models cost more than the read (issue 13).
            config_map = requesting.request(
                api_client, "GET", f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}"
            )
        except requesting.ApiException as error:
            if error.status != 404:
                raise
            found[name] = None
            continue
        keys = [*(config_map.get("data") or {}), *(config_map.get("binaryData") or {})]
        found[name] = tuple(sorted(keys))
    return found


def nodes_still_selected(api_client: clients.ApiClient, daemonset: driver_snapshot.DriverDaemonSet) -> bool:
    """True when a node matches this DaemonSet's nodeSelector now (one LIST, limit 1).

    NB: the last read before an irreversible delete, so it asks the server, not the watch: a
    node the DaemonSet controller would still run a pod on (its selector is exactly what that
    controller's desiredNumberScheduled counts, taints aside) keeps the DaemonSet.
    """
    if daemonset.node_selector:
        selector = ",".join(f"{key}={value}" for key, value in sorted(daemonset.node_selector.items()))
    elif rhcos := daemonset.labels.get(labels.DTK_RHCOS):
        # A DaemonSet read without its spec (or made without a nodeSelector): its RHCOS build.
        selector = f"{labels.OSTREE_VERSION}={rhcos},{labels.NFD_NVIDIA_PCI}=true"
    else:
        # Nothing to ask for: trust the planner's view.
        return False
    return any_node(api_client, selector)


def any_node(api_client: clients.ApiClient, label_selector: str) -> bool:
    """A node carries these labels now (one LIST, limit 1, before an irreversible step)."""
    found = requesting.request(
        api_client, "GET", "/api/v1/nodes", query=[("labelSelector", label_selector), ("limit", "1")]
    )
    return bool(found.get("items"))


def is_ours(api_client: clients.ApiClient, api_version: str, kind: str, name: str) -> bool:
    """A cluster-scoped object of this name exists and carries our managed-by label (one GET)."""
    try:
        found = requesting.request(api_client, "GET", requesting.object_path(api_version, kind, name, None))
    except requesting.ApiException as error:
        if error.status != 404:
            raise
        return False
    found_labels = (found.get("metadata") or {}).get("labels") or {}
    return bool(found_labels.get(labels.MANAGED_BY) == labels.MANAGED_BY_VALUE)


def config_map_data(api_client: clients.ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    """A ConfigMap's data (None when it does not exist): one GET."""
    try:
        found = requesting.request(
            api_client, "GET", f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}"
        )
    except requesting.ApiException as error:
        if error.status != 404:
            raise
        return None
    return {str(key): str(value) for key, value in (found.get("data") or {}).items()}
