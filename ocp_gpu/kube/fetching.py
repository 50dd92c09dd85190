"""Reading single objects the operator does not watch: the ConfigMaps a ClusterPolicy names.

NB: read on each reconcile pass that renders drivers (a GET per named ConfigMap); they
are few and small, and a watch on every ConfigMap of the namespace would cost more.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubernetes import client
from kubernetes.client.exceptions import ApiException


def config_map_keys(
    api_client: client.ApiClient, namespace: str, names: Iterable[str]
) -> dict[str, tuple[str, ...] | None]:
    """The data keys (sorted) of each named ConfigMap in `namespace`; None for one that does not exist."""
    found: dict[str, tuple[str, ...] | None] = {}
    api = client.CoreV1Api(api_client)
    for name in sorted(set(names)):
        try:
            config_map = api.read_namespaced_config_map(name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            found[name] = None
            continue
        keys = [*(config_map.data or {}), *(config_map.binary_data or {})]
        found[name] = tuple(sorted(keys))
    return found
