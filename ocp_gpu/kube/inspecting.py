"""Reading the node the node status exporter runs on (its allocatable devices)."""

from __future__ import annotations

from kubernetes import client


def read_node_allocatable(api_client: client.ApiClient, name: str) -> dict[str, str]:
    """One node's status.allocatable (resource -> quantity)."""
    node = client.CoreV1Api(api_client).read_node(name)
    return {key: str(value) for key, value in (node.status.allocatable or {}).items()}
