"""Running the operator under test with the RBAC it ships with, not as a cluster admin.

The rules come from the one source (ocp_gpu/install/rbac.yaml, through
`install.install_manifests`), the same the Helm chart and the CSV carry: a rule the operator
needs and the source lacks makes an end-to-end test fail with a 403, here rather than
in a customer's cluster.  The test identity is a client-certificate user in the group
`OPERATOR_GROUP`; the ClusterRole is bound to that group once, the namespace Role in
each namespace an operator runs in.

NB: the ClusterRole is named `E2E_CLUSTER_ROLE`, not the chart's `gpu-operator`, so a
Helm install in the same session can own its own (helm refuses to adopt an object it
did not create).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import kubernetes
from kubernetes.client import ApiClient

from ocp_gpu.install import install_manifests
from ocp_gpu_harness import polling
from ocp_gpu_harness.cluster import LocalControlPlane

OPERATOR_GROUP: Final = "ocp-gpu:e2e-operators"
E2E_CLUSTER_ROLE: Final = "e2e-shipped-gpu-operator"
FIELD_MANAGER: Final = "ocp-gpu-harness"
_APPLY: Final = "application/apply-patch+yaml"
_SUBJECTS: Final = ({"kind": "Group", "name": OPERATOR_GROUP, "apiGroup": "rbac.authorization.k8s.io"},)


def _apply_options() -> Mapping[str, Any]:
    return {"field_manager": FIELD_MANAGER, "force": True, "_content_type": _APPLY}


def bind_cluster_role(api_client: ApiClient) -> None:
    """The shipped ClusterRole, bound to `OPERATOR_GROUP` (idempotent)."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    role = install_manifests.cluster_role(E2E_CLUSTER_ROLE)
    rbac.patch_cluster_role(E2E_CLUSTER_ROLE, role, **_apply_options())
    binding = install_manifests.cluster_role_binding("", E2E_CLUSTER_ROLE, subjects=_SUBJECTS)
    rbac.patch_cluster_role_binding(E2E_CLUSTER_ROLE, binding, **_apply_options())


def bind_namespace_role(api_client: ApiClient, namespace: str) -> None:
    """The shipped namespace Role in `namespace`, bound to `OPERATOR_GROUP` (idempotent)."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    role = install_manifests.role(namespace)
    rbac.patch_namespaced_role(role["metadata"]["name"], namespace, role, **_apply_options())
    binding = install_manifests.role_binding(namespace, subjects=_SUBJECTS)
    rbac.patch_namespaced_role_binding(binding["metadata"]["name"], namespace, binding, **_apply_options())


def _allowed(api_client: ApiClient, namespace: str | None, group: str, resource: str, verb: str) -> bool:
    review = {
        "spec": {
            "user": "ocp-gpu:e2e-probe",
            "groups": [OPERATOR_GROUP],
            "resourceAttributes": {
                "namespace": namespace or "",
                "group": group,
                "resource": resource,
                "verb": verb,
            },
        }
    }
    answer = kubernetes.client.AuthorizationV1Api(api_client).create_subject_access_review(review)
    return bool(answer.status.allowed)


def wait_effective(api_client: ApiClient, namespace: str, timeout: float = 30.0) -> None:
    """Wait until the API server's authorizer applies the bindings (it learns them through a
    watch: a request made right after the binding was written can still get 403).  Probes
    one cluster rule (list nodes) and one namespace rule (get leases)."""
    polling.wait_for(
        lambda: (
            _allowed(api_client, None, "", "nodes", "list")
            and _allowed(api_client, namespace, "coordination.k8s.io", "leases", "get")
        ),
        timeout,
        what=f"the shipped RBAC bound to {OPERATOR_GROUP} in effect",
        interval=0.1,
    )


def operator_kubeconfig(
    control_plane: LocalControlPlane, user: str, namespace: str, *, name: str | None = None
) -> Path:
    """A kubeconfig for `user`, holding exactly the shipped ClusterRole and the Role in `namespace`."""
    with control_plane.api_client() as api:
        bind_cluster_role(api)
        bind_namespace_role(api, namespace)
        wait_effective(api, namespace)
    return control_plane.make_kubeconfig(user, [OPERATOR_GROUP], name=name)
