"""API discovery: which API groups the server serves (OpenShift or vanilla Kubernetes).

NB: raw JSON (kube/requesting): the typed API's discovery models are megabytes of pydantic
classes the operator would load for these two reads alone (issue 13).
"""

from __future__ import annotations

from ocp_gpu.kube import clients, requesting


def list_api_groups(api_client: clients.ApiClient) -> frozenset[str]:
    """Names of every API group the server serves, e.g. {'apps', 'image.openshift.io', ...}."""
    groups = requesting.request(api_client, "GET", "/apis")
    return frozenset(str(group["name"]) for group in groups.get("groups") or ())


def serves_resource(api_client: clients.ApiClient, group: str, version: str, plural: str) -> bool:
    """The server serves `plural` in `group/version` (its CRD is installed and established)."""
    try:
        found = requesting.request(api_client, "GET", f"/apis/{group}/{version}")
    except requesting.ApiException as error:
        if error.status == 404:
            return False
        raise
    return any(resource.get("name") == plural for resource in (found or {}).get("resources") or ())
