"""API discovery: which API groups the server serves (OpenShift or vanilla Kubernetes)."""

from __future__ import annotations

from kubernetes import client


def list_api_groups(api_client: client.ApiClient) -> frozenset[str]:
    """Names of every API group the server serves, e.g. {'apps', 'image.openshift.io', ...}."""
    groups = client.ApisApi(api_client).get_api_versions()
    return frozenset(group.name for group in groups.groups or ())


def serves_resource(api_client: client.ApiClient, group: str, version: str, plural: str) -> bool:
    """The server serves `plural` in `group/version` (its CRD is installed and established)."""
    try:
        found = client.CustomObjectsApi(api_client).get_api_resources(group, version)
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return False
        raise
    return any(resource.name == plural for resource in (found.resources if found else None) or ())
