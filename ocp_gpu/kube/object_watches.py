"""The watches of every kind with few objects: owned objects, driver revisions, OpenShift
singletons, ClusterPolicies, NVIDIADrivers and GPUClusters (kube/watching.py's stream, one per kind); and
the ResourceClaims of every namespace, as small as a record gets (what each holds).

Each event becomes one small record (never the whole body): an owned object's applied hash and
owner (kube/owning.observed_object), a trimmed ControllerRevision, a singleton's metadata,
spec and status without managedFields, a ClusterPolicy's or NVIDIADriver's record, a
claim's ClaimHold (one of three values, shared). Filters
are the server's: owned kinds by our managed-by label, in the operand namespace when
namespaced; revisions by the driver component label; singletons by name.

NB: these kinds were kopf's until issue 22 (docs/architecture.md, "Watches"): a handful of
objects each, but through kopf each event still cost a worker, causes and two handlers,
kopf's start-up barrier needed a patch to stay linear (the old kopf_toggles module) and its
decoding another to drop managedFields (kopf_events).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from ocp_gpu.kube import connecting, owning, reading, watching
from ocp_gpu.model import apis, custom_resources, labels, nvidia_driver_spec, resource_claims

Login = connecting.Login

OWNED_SELECTOR: Final = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
# The driver DaemonSets' revisions (the DaemonSet controller copies the template's labels).
REVISION_SELECTOR: Final = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"


def collection_path(group: str, version: str, plural: str, namespace: str | None = None) -> str:
    """The API path of a kind's collection, in one namespace or cluster-wide."""
    root = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{root}/namespaces/{quote(namespace)}/{plural}" if namespace else f"{root}/{plural}"


@dataclasses.dataclass(frozen=True)
class OwnedFacts:
    """One owned object as the view keeps it (kube/owning.OWNED_KINDS)."""

    name: str
    observed: owning.ObservedObject


@dataclasses.dataclass(frozen=True)
class RawFacts:
    """A ControllerRevision (trimmed) or an OpenShift singleton (metadata, spec, status) as JSON."""

    name: str
    body: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class ClaimFacts:
    """A ResourceClaim as the view keeps it: its key (namespace/name) and what it holds."""

    name: str
    hold: resource_claims.ClaimHold


def claim_key(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata") or {}
    return resource_claims.claim_key(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def claim_facts(body: Mapping[str, Any]) -> ClaimFacts:
    return ClaimFacts(claim_key(body), reading.claim_hold(body))


def owned_facts(body: Mapping[str, Any]) -> OwnedFacts:
    return OwnedFacts(str((body.get("metadata") or {}).get("name") or ""), owning.observed_object(body))


def revision_facts(body: Mapping[str, Any]) -> RawFacts:
    trimmed = reading.controller_revision(body)
    return RawFacts(trimmed["metadata"]["name"], trimmed)


def singleton_facts(body: Mapping[str, Any]) -> RawFacts:
    plain = reading.plain_object(body)
    # NB: nothing reads them, and every write by anyone changes them: not a change to wake on.
    plain["metadata"].pop("managedFields", None)
    return RawFacts(str(plain["metadata"].get("name") or ""), plain)


def owned_watch(
    login: Login, kind: owning.OwnedKind, namespace: str, sink: watching.Sink[OwnedFacts]
) -> watching.ObjectWatch[OwnedFacts]:
    """Our objects of one owned kind: in the operand namespace when namespaced."""
    return watching.ObjectWatch(
        login,
        collection_path(kind.group, kind.version, kind.plural, namespace if kind.namespaced else None),
        owned_facts,
        sink,
        what=f"{kind.kind.lower()} watch",
        selector=OWNED_SELECTOR,
        cut_managed_fields=False,
    )


def revision_watch(
    login: Login, namespace: str, sink: watching.Sink[RawFacts]
) -> watching.ObjectWatch[RawFacts]:
    """The driver DaemonSets' ControllerRevisions in the operand namespace."""
    return watching.ObjectWatch(
        login,
        collection_path("apps", "v1", "controllerrevisions", namespace),
        revision_facts,
        sink,
        what="controllerrevision watch",
        selector=REVISION_SELECTOR,
        cut_managed_fields=False,
    )


def singleton_watch(
    login: Login, group: str, plural: str, name: str, namespace: str | None, sink: watching.Sink[RawFacts]
) -> watching.ObjectWatch[RawFacts]:
    """One named object (the driver-toolkit ImageStream, ClusterVersion `version`, Proxy `cluster`)."""
    return watching.ObjectWatch(
        login,
        collection_path(group, "v1", plural, namespace),
        singleton_facts,
        sink,
        what=f"{plural} watch",
        field_selector=f"metadata.name={name}",
        cut_managed_fields=False,
    )


def policy_watch(
    login: Login, group: str, version: str, plural: str, sink: watching.Sink[custom_resources.PolicyObject]
) -> watching.ObjectWatch[custom_resources.PolicyObject]:
    """Every ClusterPolicy."""
    return watching.ObjectWatch(
        login,
        collection_path(group, version, plural),
        reading.cluster_policy,
        sink,
        what="clusterpolicy watch",
        cut_managed_fields=False,
    )


def nvidia_driver_watch(
    login: Login, group: str, version: str, plural: str, sink: watching.Sink[nvidia_driver_spec.NvidiaDriver]
) -> watching.ObjectWatch[nvidia_driver_spec.NvidiaDriver]:
    """Every NVIDIADriver."""
    return watching.ObjectWatch(
        login,
        collection_path(group, version, plural),
        reading.nvidia_driver,
        sink,
        what="nvidiadriver watch",
        cut_managed_fields=False,
    )


def gpu_cluster_watch(
    login: Login, sink: watching.Sink[custom_resources.GpuClusterObject]
) -> watching.ObjectWatch[custom_resources.GpuClusterObject]:
    """Every GPUCluster (NVIDIA's schema allows one, `gpu-cluster`)."""
    return watching.ObjectWatch(
        login,
        collection_path(apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_VERSION, apis.GPU_CLUSTER_PLURAL),
        reading.gpu_cluster,
        sink,
        what="gpucluster watch",
        cut_managed_fields=False,
    )


def claim_watch(login: Login, sink: watching.Sink[ClaimFacts]) -> watching.ObjectWatch[ClaimFacts]:
    """Every ResourceClaim, in every namespace (GPU workloads live anywhere)."""
    return watching.ObjectWatch(
        login,
        collection_path(
            resource_claims.API_GROUP, resource_claims.API_VERSION, resource_claims.CLAIMS_PLURAL
        ),
        claim_facts,
        sink,
        what="resourceclaim watch",
        # NB: a built-in kind (spec after metadata): its managedFields are cut before decoding.
        cut_managed_fields=True,
        ident=claim_key,
    )
