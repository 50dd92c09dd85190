"""What `ocp-gpu must-gather` collects, and where each piece goes in its directory.

Decides: which API resources are read (never Secrets: `check_gatherable` refuses
them, so no code path can ask for one), which nodes count as GPU nodes, which pods
and DaemonSets are operands, what of a Node is kept (labels, annotations, taints,
readiness: the upgrade state lives there), and the file layout.

Never does I/O: the objects come in as plain JSON dicts read by `kube.gathering`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ocp_gpu.model import apis, labels


@dataclasses.dataclass(frozen=True)
class Resource:
    """An API resource must-gather lists or reads."""

    # "v1" for the core group, else "<group>/<version>".
    group_version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]

    @property
    def qualified(self) -> str:
        """The name `oc get` / `kubectl get` take unambiguously (plural.group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


CLUSTER_POLICIES: Final = Resource(apis.POLICY_API_VERSION, apis.POLICY_PLURAL, apis.POLICY_KIND, False)
# Our other resources, gathered where their CRD is served.
NVIDIA_DRIVERS: Final = Resource(
    apis.NVIDIA_DRIVER_API_VERSION, apis.NVIDIA_DRIVER_PLURAL, apis.NVIDIA_DRIVER_KIND, False
)
GPU_CLUSTERS: Final = Resource(
    apis.GPU_CLUSTER_API_VERSION, apis.GPU_CLUSTER_PLURAL, apis.GPU_CLUSTER_KIND, False
)
NODES: Final = Resource("v1", "nodes", "Node", False)
PODS: Final = Resource("v1", "pods", "Pod", True)
EVENTS: Final = Resource("v1", "events", "Event", True)
DAEMONSETS: Final = Resource("apps/v1", "daemonsets", "DaemonSet", True)
DEPLOYMENTS: Final = Resource("apps/v1", "deployments", "Deployment", True)
IMAGESTREAMS: Final = Resource(f"{apis.IMAGE_GROUP}/v1", "imagestreams", "ImageStream", True)
CLUSTER_VERSIONS: Final = Resource(f"{apis.CONFIG_GROUP}/v1", "clusterversions", "ClusterVersion", False)
PROXIES: Final = Resource(f"{apis.CONFIG_GROUP}/v1", "proxies", "Proxy", False)

# NB: Secrets hold pull credentials and certificates an admin must not hand to a
# support case by accident; must-gather never reads them, whatever is asked.
FORBIDDEN_PLURALS: Final = frozenset({"secrets"})

# Metadata that is noise in a support bundle (it repeats every field's writer).
_DROPPED_METADATA: Final = ("managedFields",)

# The operator's metrics port when its container names none (ocp-gpu run's default).
DEFAULT_METRICS_PORT: Final = 8080


class ForbiddenResourceError(ValueError):
    """must-gather was asked to read a resource it never reads."""


def check_gatherable(resource: Resource) -> Resource:
    """The resource itself, or ForbiddenResourceError for Secrets."""
    if resource.plural in FORBIDDEN_PLURALS:
        raise ForbiddenResourceError(f"must-gather never collects {resource.plural}")
    return resource


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """A node NFD or the operator marks as having an NVIDIA GPU."""
    node_labels = (node.get("metadata") or {}).get("labels") or {}
    return node_labels.get(labels.GPU_PRESENT) == "true" or node_labels.get(labels.NFD_NVIDIA_PCI) == "true"


def node_record(node: Mapping[str, Any]) -> dict[str, Any]:
    """What a support case needs of a GPU node: labels and annotations (upgrade state), taints,
    cordon, readiness and OS; not its images list or heartbeat noise."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    info = status.get("nodeInfo") or {}
    conditions = status.get("conditions") or ()
    ready: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    return {
        "name": metadata.get("name", ""),
        "upgradeState": (metadata.get("labels") or {}).get(labels.UPGRADE_STATE, ""),
        "labels": dict(sorted((metadata.get("labels") or {}).items())),
        "annotations": dict(sorted((metadata.get("annotations") or {}).items())),
        "unschedulable": bool(spec.get("unschedulable", False)),
        "taints": list(spec.get("taints") or ()),
        "ready": {k: ready.get(k, "") for k in ("status", "reason", "message")},
        "osImage": info.get("osImage", ""),
        "kernelVersion": info.get("kernelVersion", ""),
        "containerRuntimeVersion": info.get("containerRuntimeVersion", ""),
    }


def is_operand_daemonset(daemonset: Mapping[str, Any]) -> bool:
    """A DaemonSet the operator manages (every object it creates carries managed-by=ocp-gpu)."""
    ds_labels = (daemonset.get("metadata") or {}).get("labels") or {}
    return ds_labels.get(labels.MANAGED_BY) == labels.MANAGED_BY_VALUE


def select_operand_pods(
    pods: Iterable[Mapping[str, Any]], daemonsets: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Pods owned by one of the operand DaemonSets (by ownerReference uid), sorted by name."""
    owners = {(d.get("metadata") or {}).get("uid") for d in daemonsets if is_operand_daemonset(d)}
    owners.discard(None)
    chosen = [
        p
        for p in pods
        if any(ref.get("uid") in owners for ref in (p.get("metadata") or {}).get("ownerReferences") or ())
    ]
    return sorted(chosen, key=lambda p: str((p.get("metadata") or {}).get("name", "")))


def select_operator_pods(
    pods: Iterable[Mapping[str, Any]], deployment: Mapping[str, Any] | None
) -> list[Mapping[str, Any]]:
    """The operator Deployment's pods: those matching its selector's matchLabels."""
    if not deployment:
        return []
    match = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not match:
        # NB: an empty selector would match every pod in the namespace.
        return []
    chosen = [
        p
        for p in pods
        if all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in match.items())
    ]
    return sorted(chosen, key=lambda p: str((p.get("metadata") or {}).get("name", "")))


def metrics_port(pod: Mapping[str, Any]) -> int:
    """The operator container's port named `metrics`, else ocp-gpu run's default."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == "metrics" and port.get("containerPort"):
                return int(port["containerPort"])
    return DEFAULT_METRICS_PORT


def container_names(pod: Mapping[str, Any]) -> list[str]:
    """Init containers then containers: each has its own log."""
    spec = pod.get("spec") or {}
    return [str(c["name"]) for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]]


def select_events(
    events: Iterable[Mapping[str, Any]], involved_names: Iterable[str]
) -> list[Mapping[str, Any]]:
    """Events about the given objects (GPU nodes, ClusterPolicies) in `default`, oldest first."""
    names = set(involved_names)
    chosen = [e for e in events if (e.get("involvedObject") or {}).get("name") in names]
    return sort_events(chosen)


def sort_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    def when(event: Mapping[str, Any]) -> str:
        return str(
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    return sorted(events, key=when)


def scrub(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without metadata noise (managedFields); a new dict, the input is untouched."""
    out = dict(obj)
    metadata = dict(out.get("metadata") or {})
    for key in _DROPPED_METADATA:
        metadata.pop(key, None)
    if metadata:
        out["metadata"] = metadata
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def path_part(name: str) -> str:
    """A file-name-safe version of a Kubernetes name (names may hold ':' or '/' in some kinds)."""
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    return cleaned or "_"


def relative_path(*parts: str) -> str:
    """A path inside the must-gather directory built from API names."""
    return "/".join(path_part(p) for p in parts)


def resource_path(resource: Resource, name: str, namespace: str | None = None, suffix: str = ".yaml") -> str:
    """Where one object goes: cluster/<plural>/<name>.yaml or namespaces/<ns>/<plural>/<name>.yaml."""
    if resource.namespaced:
        return relative_path("namespaces", namespace or "_", resource.plural, name + suffix)
    return relative_path("cluster", resource.plural, name + suffix)


def pod_paths(namespace: str, pod: str, container: str) -> tuple[str, str]:
    """(current log, previous log) of one container."""
    base = ("namespaces", namespace, "pods", pod)
    return relative_path(*base, f"{container}.log"), relative_path(*base, f"{container}.previous.log")


def summarize(written: Sequence[str], failures: Sequence[str]) -> str:
    """The README.txt of a gather: what is in it and what could not be collected."""
    lines = [
        "ocp-gpu must-gather",
        "",
        "Secrets are never collected.",
        "",
        f"{len(written)} file(s) collected:",
        *(f"  {p}" for p in sorted(written)),
        "",
        f"{len(failures)} item(s) could not be collected:" if failures else "everything asked for was read.",
        *(f"  {f}" for f in failures),
    ]
    return "\n".join(lines) + "\n"
