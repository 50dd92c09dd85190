"""The API calls of `ocp-gpu validate cuda|plugin`: the node's resources, the workload pods.

Thin: each function is one request (or a short poll for a deletion to finish); what
the answers mean is decided in planning/operands/validation.py.  Raw JSON through
`requesting.request`, like the rest of kube/.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ocp_gpu.kube import clients, requesting


def _pod_path(namespace: str, name: str) -> str:
    return requesting.object_path("v1", "Pod", name, namespace)


def read_node_allocatable(api_client: clients.ApiClient, node: str) -> dict[str, str]:
    """The node's `status.allocatable` (what the scheduler can hand out), quantities as strings."""
    body = requesting.request(api_client, "GET", requesting.object_path("v1", "Node", node))
    allocatable = (body.get("status") or {}).get("allocatable") or {}
    return {str(name): str(value) for name, value in allocatable.items()}


def read_node_labels(api_client: clients.ApiClient, node: str) -> dict[str, str]:
    """The node's labels."""
    body = requesting.request(api_client, "GET", requesting.object_path("v1", "Node", node))
    return {str(k): str(v) for k, v in ((body.get("metadata") or {}).get("labels") or {}).items()}


def read_pod(api_client: clients.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod, or None when it does not exist."""
    try:
        pod: dict[str, Any] = requesting.request(api_client, "GET", _pod_path(namespace, name))
    except requesting.ApiException as error:
        if error.status == 404:
            return None
        raise
    return pod


def read_pod_owner(api_client: clients.ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    """{"name", "uid"} of a pod, to own what it creates; None when it does not exist."""
    pod = read_pod(api_client, namespace, name)
    if pod is None:
        return None
    return {"name": name, "uid": str(pod["metadata"]["uid"])}


def create_pod(api_client: clients.ApiClient, manifest: Mapping[str, Any]) -> dict[str, Any]:
    metadata = manifest["metadata"]
    path = _pod_path(metadata["namespace"], metadata["name"]).rsplit("/", 1)[0]
    created: dict[str, Any] = requesting.request(
        api_client, "POST", path, body=dict(manifest), resource="pods"
    )
    return created


def delete_pod(api_client: clients.ApiClient, namespace: str, name: str, *, wait: float = 0.0) -> None:
    """Delete the pod at once (no grace period); with `wait`, until it is gone (raises TimeoutError).

    NB: a workload pod is throwaway, and a pod of the same name cannot be created
    while the old one is terminating.
    """
    try:
        requesting.request(
            api_client,
            "DELETE",
            _pod_path(namespace, name),
            body={"gracePeriodSeconds": 0, "propagationPolicy": "Background"},
            resource="pods",
        )
    except requesting.ApiException as error:
        if error.status != 404:
            raise
        return
    deadline = time.monotonic() + wait
    while wait and read_pod(api_client, namespace, name) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pod {namespace}/{name} still exists {wait:.0f}s after its deletion")
        time.sleep(0.2)
