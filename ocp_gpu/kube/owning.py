"""The kinds the operator owns, watched so that "already applied" is never a guess.

Every object the operator applies carries `app.kubernetes.io/managed-by=ocp-gpu`
and the hash of what was applied (kube/applying.py).  watches.py watches each
kind below with that label selector (server-side filtered: tens of objects, not
every ConfigMap of the cluster) and keeps only (applied hash, owner uid) per
object.  `kube/applying.apply_if_changed` decides from that observed record,
so an object deleted by hand or garbage-collected with an old ClusterPolicy is
re-applied within seconds, and a restarted operator re-applies nothing unchanged.

NB: ONE table.  A new owned kind (RuntimeClass, Service, ...) is one row here plus
its REST path in kube/requesting.RESOURCES; tests/unit/test_owning.py fails when a
template renders a kind that is missing from this table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ocp_gpu.model import labels


@dataclasses.dataclass(frozen=True)
class OwnedKind:
    """One kind the operator applies, as kopf and the REST paths name it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# Every kind a template renders.  Rows whose group the server does not serve are not watched.
OWNED_KINDS: tuple[OwnedKind, ...] = (
    OwnedKind("", "v1", "serviceaccounts", "ServiceAccount", True),
    OwnedKind("", "v1", "configmaps", "ConfigMap", True),
    OwnedKind("", "v1", "services", "Service", True),
    OwnedKind("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    OwnedKind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    OwnedKind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    OwnedKind("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    OwnedKind("apps", "v1", "daemonsets", "DaemonSet", True),
    # The DRA driver's compute-domain controller (templates/state-dra-driver, ComputeDomains only).
    OwnedKind("apps", "v1", "deployments", "Deployment", True),
    OwnedKind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    # The DRA driver's (templates/state-dra-driver).
    OwnedKind("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    OwnedKind(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
    ),
    OwnedKind(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
    OwnedKind("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True),
    OwnedKind("monitoring.coreos.com", "v1", "prometheusrules", "PrometheusRule", True),
)

# Groups every Kubernetes serves; discovery lists only named groups ("" is the core group).
ALWAYS_SERVED = frozenset({"", "apps", "rbac.authorization.k8s.io", "node.k8s.io"})

# (kind, namespace or "", name): how apply_if_changed and the watches name one object.
ObjectIdent = tuple[str, str, str]


@dataclasses.dataclass(frozen=True)
class ObservedObject:
    """What the watch saw of one owned object: enough to decide whether to re-apply it."""

    applied_hash: str  # "" when the annotation is missing (someone removed it: re-apply)
    owner_uid: str  # "" without a controller ownerReference
    # app.kubernetes.io/component: which operand rendered it (its unrendered objects are deleted).
    component: str = ""


def watched_kinds(api_groups: frozenset[str]) -> tuple[OwnedKind, ...]:
    """The rows to watch on a server serving `api_groups`."""
    return tuple(k for k in OWNED_KINDS if k.group in ALWAYS_SERVED or k.group in api_groups)


def is_owned_kind(kind: str) -> bool:
    """A kind of the table (its objects are watched wherever its group is served)."""
    return any(row.kind == kind for row in OWNED_KINDS)


def ident(kind: str, namespace: str | None, name: str) -> ObjectIdent:
    return (kind, namespace or "", name)


def manifest_ident(manifest: Mapping[str, Any]) -> ObjectIdent:
    metadata = manifest["metadata"]
    return ident(str(manifest["kind"]), metadata.get("namespace"), str(metadata["name"]))


def observed_object(body: Mapping[str, Any]) -> ObservedObject:
    """The record kept per owned object (from a watch event or an apply response)."""
    metadata = body.get("metadata") or {}
    controller: Mapping[str, Any] = next(
        (ref for ref in metadata.get("ownerReferences") or () if ref.get("controller")), {}
    )
    return ObservedObject(
        applied_hash=str((metadata.get("annotations") or {}).get(labels.APPLIED_HASH, "")),
        owner_uid=str(controller.get("uid", "")),
        component=str((metadata.get("labels") or {}).get(labels.COMPONENT, "")),
    )


def is_current(observed: ObservedObject | None, wanted_hash: str, owner_uid: str) -> bool:
    """The object exists as rendered and belongs to the active ClusterPolicy: no write needed.

    NB: the owner counts: after a ClusterPolicy is deleted and re-created, objects still
    owned by the old one are about to be garbage-collected; re-applying adopts them first.
    """
    return observed is not None and observed.applied_hash == wanted_hash and observed.owner_uid == owner_uid
