"""Turning raw API objects (JSON dicts from watches and lists) into model records."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from ocp_gpu.model import (
    custom_resources,
    driver_snapshot,
    imagestream_tags,
    labels,
    nodes,
    nvidia_driver_spec,
    operand_types,
    resource_claims,
    upgrade_observations,
)
from ocp_gpu.model.proxy import ClusterProxy
from ocp_gpu.planning import delivery
from ocp_gpu.planning.drivers import driver_currency

R = TypeVar("R", bound=custom_resources.CustomResource)


def node_facts(body: Mapping[str, Any]) -> nodes.NodeFacts:
    """The NodeFacts of a Node object as the API returns it."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    info = status.get("nodeInfo") or {}
    allocatable = status.get("allocatable") or {}
    return nodes.NodeFacts(
        name=nodes.NodeName(str(metadata.get("name", ""))),
        labels=nodes.kept_labels(metadata.get("labels") or {}),
        # NB: shared by every node on the same build: one copy (see nodes.kept_labels).
        os_image=sys.intern(str(info.get("osImage", ""))),
        kernel_version=sys.intern(str(info.get("kernelVersion", ""))),
        unschedulable=bool(spec.get("unschedulable", False)),
        gpus=_quantity_int(allocatable.get("nvidia.com/gpu", "0")),
        # NB: only the condition's status is kept, so heartbeats (lastHeartbeatTime) change nothing.
        ready=all(
            c.get("status") == "True" for c in status.get("conditions") or () if c.get("type") == "Ready"
        ),
        annotations=nodes.kept_annotations(metadata.get("annotations") or {}),
    )


def _quantity_int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        # Extended resources are integers; anything else counts as none.
        return 0


def driver_daemonset(body: Mapping[str, Any]) -> driver_snapshot.DriverDaemonSet:
    """A driver DaemonSet we manage, reduced to what planning and status need."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    pod_spec = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    images = {str(c.get("name", "")): str(c.get("image", "")) for c in containers}
    driver_image = next((image for name, image in images.items() if name != operand_types.DTK_CONTAINER), "")
    return driver_snapshot.DriverDaemonSet(
        name=str(metadata.get("name", "")),
        labels=dict(metadata.get("labels") or {}),
        annotations={
            k: v for k, v in (metadata.get("annotations") or {}).items() if k.startswith("ocp-gpu.io/")
        },
        image=driver_image,
        dtk_image=images.get(operand_types.DTK_CONTAINER),
        node_selector={str(k): str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items()},
        generation=int(metadata.get("generation", 1)),
        observed_generation=int(status.get("observedGeneration", 0)),
        desired_number_scheduled=int(status.get("desiredNumberScheduled", 0)),
        current_number_scheduled=int(status.get("currentNumberScheduled", 0)),
        number_misscheduled=int(status.get("numberMisscheduled", 0)),
        number_ready=int(status.get("numberReady", 0)),
        updated_number_scheduled=int(status.get("updatedNumberScheduled", 0)),
        install=driver_currency.driver_install(pod_spec),
    )


def openshift_version(cluster_version: Mapping[str, Any]) -> str:
    """major.minor of ClusterVersion `version` (desired, else the newest history entry)."""
    status = cluster_version.get("status") or {}
    version = str((status.get("desired") or {}).get("version", ""))
    if not version:
        history = status.get("history") or []
        version = str(history[0].get("version", "")) if history else ""
    return ".".join(version.split(".")[:2])


# Kubelet waiting reasons that mean the image cannot be pulled.
PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def driver_pod_pull(body: Mapping[str, Any]) -> driver_snapshot.DriverPodPull:
    """The pull state of a driver pod's driver container."""
    metadata = body.get("metadata") or {}
    pod_labels = metadata.get("labels") or {}
    containers = (body.get("spec") or {}).get("containers") or []
    image = next(
        (str(c.get("image", "")) for c in containers if c.get("name") == operand_types.DRIVER_CONTAINER), ""
    )
    statuses = [
        *((body.get("status") or {}).get("initContainerStatuses") or ()),
        *((body.get("status") or {}).get("containerStatuses") or ()),
    ]
    failing = any(
        ((status.get("state") or {}).get("waiting") or {}).get("reason") in PULL_FAILURES
        for status in statuses
        if status.get("name") == operand_types.DRIVER_CONTAINER
    )
    return driver_snapshot.DriverPodPull(
        name=str(metadata.get("name", "")),
        # NB: interned: the same key, strategy and image in every driver pod of a version.
        key=_interned(pod_labels.get(labels.DRIVER_KEY)),
        strategy=_interned(pod_labels.get(labels.DRIVER_STRATEGY)),
        image=sys.intern(image),
        pull_failing=failing,
    )


def prepull_pod_pull(body: Mapping[str, Any]) -> driver_snapshot.DriverPodPull:
    """A pre-pull pod's pull (strategy `PREPULL_PULL`): the image of its first container whose
    kubelet cannot pull it (init containers first, as the kubelet pulls them), else its first."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    images = {
        str(c.get("name", "")): str(c.get("image", ""))
        for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ()))
    }
    status = body.get("status") or {}
    failing = [
        images.get(str(s.get("name", "")), "")
        for s in (*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ()))
        if ((s.get("state") or {}).get("waiting") or {}).get("reason") in PULL_FAILURES
    ]
    return driver_snapshot.DriverPodPull(
        name=str(metadata.get("name", "")),
        key=None,
        strategy=PREPULL_PULL,
        image=sys.intern(failing[0] if failing else next(iter(images.values()), "")),
        pull_failing=bool(failing),
    )


# The `strategy` of a pre-pull pod's DriverPodPull (no driver strategy's: never a fallback's).
PREPULL_PULL: Final = "prepull"


def _interned(value: object) -> str | None:
    """One copy of a label value that many objects repeat; None stays None."""
    return None if value is None else sys.intern(str(value))


def operand_pod(body: Mapping[str, Any]) -> operand_types.OperandPod:
    """The OperandPod record of an operand pod: Ready means running with every container ready."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    ready = not metadata.get("deletionTimestamp") and any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in status.get("conditions") or ()
    )
    pod_labels = metadata.get("labels") or {}
    return operand_types.OperandPod(
        name=str(metadata.get("name", "")),
        # NB: interned: a handful of apps and one name per node, repeated by thousands of pods.
        app=sys.intern(operand_types.pod_app(pod_labels)),
        node=sys.intern(str((body.get("spec") or {}).get("nodeName", ""))),
        ready=bool(ready),
        template_generation=_quantity_int(pod_labels.get(TEMPLATE_GENERATION, 0)),
    )


# The label the DaemonSet controller gives each pod it makes: its DaemonSet's generation then.
TEMPLATE_GENERATION: Final = "pod-template-generation"


def allocated_devices(claim: Mapping[str, Any]) -> tuple[resource_claims.AllocatedDevice, ...]:
    """The devices a ResourceClaim's allocation holds (none when it is not allocated)."""
    allocation = _dict(_dict(claim.get("status")).get("allocation"))
    return tuple(
        resource_claims.AllocatedDevice(
            driver=_str(result.get("driver")),
            pool=_str(result.get("pool")),
            device=_str(result.get("device")),
            admin_access=result.get("adminAccess") is True,
        )
        for result in _list(_dict(allocation.get("devices")).get("results"))
        if isinstance(result, Mapping)
    )


def published_pool(resource_slice: Mapping[str, Any]) -> resource_claims.PublishedPool:
    """A ResourceSlice: its node, pool and device names."""
    spec = _dict(resource_slice.get("spec"))
    return resource_claims.PublishedPool(
        node=_str(spec.get("nodeName")),
        pool=_str(_dict(spec.get("pool")).get("name")),
        devices=tuple(
            _str(device.get("name")) for device in _list(spec.get("devices")) if isinstance(device, Mapping)
        ),
    )


def claim_hold(claim: Mapping[str, Any]) -> resource_claims.ClaimHold:
    """What a ResourceClaim object holds (model/resource_claims.claim_hold)."""
    allocated = bool(_dict(claim.get("status")).get("allocation"))
    return resource_claims.claim_hold(allocated, allocated_devices(claim))


def cluster_policy(body: Mapping[str, Any]) -> custom_resources.PolicyObject:
    """The PolicyObject of a ClusterPolicy: from the watch, a LIST (`status`, `render --live`)
    or a file (`render`)."""
    return _custom_resource(custom_resources.PolicyObject, body)


def nvidia_driver(body: Mapping[str, Any]) -> nvidia_driver_spec.NvidiaDriver:
    """The NvidiaDriver record of an NVIDIADriver object."""
    return _custom_resource(nvidia_driver_spec.NvidiaDriver, body)


def gpu_cluster(body: Mapping[str, Any]) -> custom_resources.GpuClusterObject:
    """The record of one of NVIDIA's GPUClusters."""
    return _custom_resource(custom_resources.GpuClusterObject, body)


def _custom_resource(record: type[R], body: Mapping[str, Any]) -> R:
    """One of our custom resources; a spec that is not an object (only a file can hold one) reads as {}."""
    metadata = _dict(body.get("metadata"))
    return record(
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        # RFC 3339, "" when unknown (a file).
        created=str(metadata.get("creationTimestamp") or ""),
        generation=int(metadata.get("generation") or 0),
        spec=dict(_dict(body.get("spec"))),
        status=dict(_dict(body.get("status"))),
    )


def plain_object(body: Mapping[str, Any]) -> dict[str, Any]:
    """A plain dict copy of an object's metadata, spec and status (the OpenShift singletons:
    the driver-toolkit ImageStream, ClusterVersion, Proxy), as `ocp-gpu render` reads them
    from files and `render --live` by GET."""
    return {key: dict(body.get(key) or {}) for key in ("metadata", "spec", "status")}


def controller_revision(body: Mapping[str, Any]) -> dict[str, Any]:
    """A driver DaemonSet's ControllerRevision trimmed to what `kube.upgrading.current_revisions`
    reads (name, revision-hash label, owners, number): not the pod template copy each one holds."""
    metadata = body.get("metadata") or {}
    return {
        "metadata": {
            "name": str(metadata.get("name", "")),
            "labels": {
                key: value
                for key, value in (metadata.get("labels") or {}).items()
                if key == upgrade_observations.POD_REVISION_LABEL
            },
            "ownerReferences": [dict(ref) for ref in metadata.get("ownerReferences") or ()],
        },
        "revision": body.get("revision", 0),
    }


def pod_node_selector(daemonset: Mapping[str, Any]) -> dict[str, str]:
    """A DaemonSet's pod template nodeSelector."""
    template = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    return {str(key): str(value) for key, value in (template.get("nodeSelector") or {}).items()}


def image_stream(body: Mapping[str, Any]) -> imagestream_tags.ImageStream:
    """The tags of an ImageStream object as the API returns it."""
    spec_tags = []
    for entry in _list(_dict(body.get("spec")).get("tags")):
        entry = _dict(entry)
        source = _dict(entry.get("from"))
        kind = source.get("kind", "DockerImage")
        spec_tags.append(
            imagestream_tags.SpecTag(
                name=_str(entry.get("name")),
                from_kind=kind if isinstance(kind, str) else "",
                from_name=_str(source.get("name")),
            )
        )
    status_tags = [
        imagestream_tags.StatusTag(
            tag=_str(_dict(entry).get("tag")),
            references=tuple(
                reference
                for item in _list(_dict(entry).get("items"))
                if (reference := _str(_dict(item).get("dockerImageReference")))
            ),
        )
        for entry in _list(_dict(body.get("status")).get("tags"))
    ]
    return imagestream_tags.ImageStream(tuple(spec_tags), tuple(status_tags))


def image_stream_singleton(
    body: delivery.Singleton,
) -> imagestream_tags.ImageStream | delivery.Pending | None:
    """A watched ImageStream singleton as a record; absent (None) and not-listed-yet pass through."""
    if body is None or body is delivery.NOT_DELIVERED:
        return body
    return image_stream(body)


def cluster_proxy(proxy: Mapping[str, Any] | None) -> ClusterProxy | None:
    """OpenShift's `Proxy cluster`: status holds the effective values, spec the trusted CA name."""
    if proxy is None:
        return None
    status = proxy.get("status") or {}
    return ClusterProxy(
        http_proxy=str(status.get("httpProxy", "")),
        https_proxy=str(status.get("httpsProxy", "")),
        no_proxy=str(status.get("noProxy", "")),
        trusted_ca=bool(((proxy.get("spec") or {}).get("trustedCA") or {}).get("name")),
    )


# NB: an ImageStream comes straight from the API server; a field can be missing or null
# anywhere, so every access goes through these instead of trusting the shape.
def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
