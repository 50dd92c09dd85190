"""Writing what the operator has to say: ClusterPolicy, NVIDIADriver and GPUCluster status; Events."""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ocp_gpu.kube import clients, requesting
from ocp_gpu.model import apis
from ocp_gpu.planning.status import conditions

logger = logging.getLogger("ocp_gpu.reporting")

# The component name Events carry, as NVIDIA's operator does.
EVENT_SOURCE = "gpu-operator"


def patch_policy_status(api_client: clients.ApiClient, name: str, status: Mapping[str, Any]) -> None:
    """Replace the ClusterPolicy's status fields given (merge patch on the status subresource)."""
    _patch_status(api_client, apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, name, status)


def patch_nvidia_driver_status(api_client: clients.ApiClient, name: str, status: Mapping[str, Any]) -> None:
    """Replace the NVIDIADriver's status fields given (merge patch on the status subresource)."""
    _patch_status(
        api_client,
        apis.NVIDIA_DRIVER_GROUP,
        apis.NVIDIA_DRIVER_VERSION,
        apis.NVIDIA_DRIVER_PLURAL,
        name,
        status,
    )


def patch_gpu_cluster_status(api_client: clients.ApiClient, name: str, status: Mapping[str, Any]) -> None:
    """Replace the GPUCluster's status fields given (merge patch on the status subresource)."""
    _patch_status(
        api_client, apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_VERSION, apis.GPU_CLUSTER_PLURAL, name, status
    )


def _patch_status(
    api_client: clients.ApiClient, group: str, version: str, plural: str, name: str, status: Mapping[str, Any]
) -> None:
    """A merge patch of a cluster-scoped custom object's status subresource."""
    requesting.request(
        api_client,
        "PATCH",
        f"/apis/{group}/{version}/{plural}/{quote(name)}/status",
        body={"status": dict(status)},
        content_type=requesting.MERGE_PATCH,
        resource=f"{plural}/status",
        verb="patch",
    )


def post_event(
    api_client: clients.ApiClient,
    involved: Mapping[str, str],
    reason: str,
    message: str,
    event_type: str = "Normal",
    now: datetime.datetime | None = None,
) -> None:
    """Create a core/v1 Event about an object.

    `involved` has apiVersion, kind, name, uid and (for namespaced objects)
    namespace.  Events about cluster-scoped objects (Nodes, ClusterPolicies)
    live in `default`, where `kubectl get events` shows them.
    NB: an Event that cannot be posted is logged, never fatal.
    """
    stamp = now or datetime.datetime.now(datetime.UTC)
    namespace = involved.get("namespace") or "default"
    body = {
        "metadata": {"name": f"{involved['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": conditions.bounded_message(message, conditions.EVENT_MESSAGE_LIMIT),
        "type": event_type,
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
        "reportingInstance": EVENT_SOURCE,
        "firstTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lastTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "count": 1,
    }
    try:
        # NB: raw JSON: the typed API would parse the answer into models we never read.
        requesting.request(
            api_client,
            "POST",
            f"/api/v1/namespaces/{quote(namespace)}/events",
            body=body,
            resource="events",
            verb="create",
        )
    except requesting.ApiException as error:
        logger.warning(
            "could not post event %s on %s: %s",
            reason,
            involved.get("name"),
            requesting.describe_error(error),
        )
