"""The prometheus-operator's API (monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule), as CRDs.

With these installed the local control plane serves the API group the operator looks for
before it creates ServiceMonitors and PrometheusRules (OpenShift ships them with its
platform monitoring; vanilla clusters with kube-prometheus-stack).  The CRDs are minimal
structural ones written from the published CRDs' structure (monitoring_api/).

What is not emulated: the prometheus-operator and Prometheus.  Nothing scrapes; tests scrape
the operator's /metrics themselves and parse PromQL with Prometheus' own parser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import kubernetes.client
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu_harness import crds, polling

API_DIR: Final = Path(__file__).parent / "monitoring_api"
CRD_FILES: Final = (
    "servicemonitors.monitoring.coreos.com.yaml",
    "prometheusrules.monitoring.coreos.com.yaml",
)
GROUP: Final = "monitoring.coreos.com"
FIELD_MANAGER: Final = "ocp-gpu-harness"
_APPLY: Final = "application/apply-patch+yaml"


def load_crds() -> list[dict[str, Any]]:
    return [yaml.safe_load((API_DIR / name).read_text()) for name in CRD_FILES]


def _served(api_client: ApiClient) -> set[str]:
    try:
        found = kubernetes.client.CustomObjectsApi(api_client).get_api_resources(GROUP, "v1")
    except ApiException as error:
        if error.status == 404:
            return set()
        raise
    return {resource.name for resource in (found.resources or [])}


def _wait(what: str, check: Any, timeout: float) -> None:
    polling.wait_for(check, timeout, what=what, interval=0.1)


def install_monitoring_apis(api_client: ApiClient, *, timeout: float = 60.0) -> None:
    """Apply the CRDs; wait until they are Established and discovery lists both resources."""
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    manifests = load_crds()
    for crd in manifests:
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"], crd, field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY
        )
    # NB: discoverable, not only Established: the operator discovers.
    crds.wait_until_served(api_client, [crd["metadata"]["name"] for crd in manifests], timeout)


def uninstall_monitoring_apis(api_client: ApiClient, *, timeout: float = 60.0) -> None:
    """Delete the CRDs (and every object of theirs); wait until discovery drops the group."""
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    for crd in load_crds():
        try:
            ext.delete_custom_resource_definition(crd["metadata"]["name"])
        except ApiException as error:
            if error.status != 404:
                raise
    _wait("the monitoring.coreos.com API to be removed", lambda: not _served(api_client), timeout)
