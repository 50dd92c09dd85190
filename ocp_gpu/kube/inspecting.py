"""Reading the node the node status exporter runs on (its allocatable devices)."""

from __future__ import annotations

from urllib.parse import quote

from ocp_gpu.kube import clients, requesting


def read_node_allocatable(api_client: clients.ApiClient, name: str) -> dict[str, str]:
    """One node's status.allocatable (resource -> quantity)."""
    node = requesting.request(api_client, "GET", f"/api/v1/nodes/{quote(name)}")
    return {
        str(key): str(value) for key, value in ((node.get("status") or {}).get("allocatable") or {}).items()
    }
