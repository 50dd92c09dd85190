"""Writing node labels and annotations (merge patches on metadata only)."""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes import client

from ocp_gpu import metrics


def patch_node_labels(api_client: client.ApiClient, node: str, changes: Mapping[str, str | None]) -> None:
    """Set (value) or remove (None) node labels in one merge patch.

    NB: a merge patch touches only the keys given, so an admin's labels and a
    concurrent NFD update of other keys are never overwritten.
    """
    client.CoreV1Api(api_client).patch_node(node, {"metadata": {"labels": dict(changes)}})
    metrics.api_writes.labels("patch", "nodes").inc()
