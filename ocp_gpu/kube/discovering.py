"""API discovery: which API groups the server serves (OpenShift or vanilla Kubernetes)."""

from __future__ import annotations

from kubernetes import client


def list_api_groups(api_client: client.ApiClient) -> frozenset[str]:
    """Names of every API group the server serves, e.g. {'apps', 'image.openshift.io', ...}."""
    groups = client.ApisApi(api_client).get_api_versions()
    return frozenset(group.name for group in groups.groups or ())
