"""Writing node labels and annotations (merge patches on metadata only).

NB: raw JSON (kube/requesting), not the typed API: its response models (pydantic) cost
milliseconds per Node and megabytes of classes, for answers we never read (issue 13).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from ocp_gpu.kube import clients, requesting


def patch_node_labels(
    api_client: clients.ApiClient,
    node: str,
    changes: Mapping[str, str | None],
    annotations: Mapping[str, str | None] | None = None,
) -> None:
    """Set (value) or remove (None) node labels, and annotations, in one merge patch.

    NB: a merge patch touches only the keys given, so an admin's labels and a
    concurrent NFD update of other keys are never overwritten.
    """
    metadata: dict[str, dict[str, str | None]] = {}
    if changes:
        metadata["labels"] = dict(changes)
    if annotations:
        metadata["annotations"] = dict(annotations)
    requesting.request(
        api_client,
        "PATCH",
        f"/api/v1/nodes/{quote(node)}",
        body={"metadata": metadata},
        content_type=requesting.MERGE_PATCH,
        resource="nodes",
        # NB: the patched Node comes back through the node watch: its JSON here (thousands at
        # start-up) is not decoded.
        decoded=False,
    )


def read_namespace_labels(api_client: clients.ApiClient, namespace: str) -> dict[str, str]:
    """The namespace's labels."""
    found = requesting.request(api_client, "GET", f"/api/v1/namespaces/{quote(namespace)}")
    return dict((found.get("metadata") or {}).get("labels") or {})


def patch_namespace_labels(api_client: clients.ApiClient, namespace: str, changes: Mapping[str, str]) -> None:
    """Set namespace labels in one merge patch (other labels untouched)."""
    requesting.request(
        api_client,
        "PATCH",
        f"/api/v1/namespaces/{quote(namespace)}",
        body={"metadata": {"labels": dict(changes)}},
        content_type=requesting.MERGE_PATCH,
        resource="namespaces",
    )
