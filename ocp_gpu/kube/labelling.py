"""Writing node labels and annotations (merge patches on metadata only)."""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes import client

from ocp_gpu import metrics


def patch_node_labels(
    api_client: client.ApiClient,
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
    client.CoreV1Api(api_client).patch_node(node, {"metadata": metadata})
    metrics.api_writes.labels("patch", "nodes").inc()


def read_namespace_labels(api_client: client.ApiClient, namespace: str) -> dict[str, str]:
    """The namespace's labels."""
    found = client.CoreV1Api(api_client).read_namespace(namespace)
    return dict(found.metadata.labels or {})


def patch_namespace_labels(api_client: client.ApiClient, namespace: str, changes: Mapping[str, str]) -> None:
    """Set namespace labels in one merge patch (other labels untouched)."""
    client.CoreV1Api(api_client).patch_namespace(namespace, {"metadata": {"labels": dict(changes)}})
    metrics.api_writes.labels("patch", "namespaces").inc()
