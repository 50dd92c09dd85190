"""Server-side apply and deletion of the objects the operator owns.

Every object gets the field manager `ocp-gpu`, `app.kubernetes.io/managed-by=ocp-gpu`,
an ownerReference to the ClusterPolicy (so deleting the policy cascades through
the garbage collector) and an annotation with the hash of what we applied, so an
unchanged object is never re-applied: zero writes in steady state.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ocp_gpu.kube import clients, requesting
from ocp_gpu.model import labels

APPLIED_HASH = "ocp-gpu.io/applied-hash"


def applied_hash(manifest: Mapping[str, Any]) -> str:
    """A stable digest of a manifest as rendered (before ownership metadata is added)."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


def owned(manifest: Mapping[str, Any], owner: Mapping[str, str]) -> dict[str, Any]:
    """The manifest with our label, owner reference and applied-hash annotation."""
    result = copy.deepcopy(dict(manifest))
    metadata = result.setdefault("metadata", {})
    metadata.setdefault("labels", {})[labels.MANAGED_BY] = labels.MANAGED_BY_VALUE
    metadata.setdefault("annotations", {})[APPLIED_HASH] = applied_hash(manifest)
    metadata["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["name"],
            "uid": owner["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return result


def apply(api_client: clients.ApiClient, manifest: Mapping[str, Any]) -> Any:
    """Server-side apply, forcing ownership of the fields we set (we are their one owner)."""
    metadata = manifest["metadata"]
    path = requesting.object_path(
        manifest["apiVersion"], manifest["kind"], metadata["name"], metadata.get("namespace")
    )
    return requesting.request(
        api_client,
        "PATCH",
        path,
        query=[("fieldManager", labels.FIELD_MANAGER), ("force", "true")],
        body=dict(manifest),
        content_type="application/apply-patch+yaml",
        resource=manifest["kind"].lower() + "s",
    )


def delete(
    api_client: clients.ApiClient, api_version: str, kind: str, name: str, namespace: str | None = None
) -> bool:
    """Delete with foreground-independent (background) propagation; False if it was already gone."""
    try:
        requesting.request(
            api_client,
            "DELETE",
            requesting.object_path(api_version, kind, name, namespace),
            body={"propagationPolicy": "Background"},
            resource=kind.lower() + "s",
        )
    except requesting.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True
