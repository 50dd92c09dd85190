"""Kubeconfigs that authenticate as a ServiceAccount, with a token from the TokenRequest API.

This is how a pod's projected token authenticates it, minus the pod: a test runs
`ocp-gpu run` as a local process with exactly the identity (and so exactly the RBAC)
the installed operator's pod would have.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes
import yaml

from ocp_gpu_harness.cluster import LocalControlPlane


def request_token(control_plane: LocalControlPlane, namespace: str, name: str, seconds: int = 3600) -> str:
    """A bound token for ServiceAccount namespace/name (POST .../serviceaccounts/<name>/token)."""
    with control_plane.api_client() as api:
        response = kubernetes.client.CoreV1Api(api).create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": seconds}}
        )
    token: str = response.status.token
    return token


def service_account_kubeconfig(
    control_plane: LocalControlPlane, namespace: str, name: str, seconds: int = 3600
) -> Path:
    """A kubeconfig (in the control plane's state dir) for ServiceAccount namespace/name."""
    token = request_token(control_plane, namespace, name, seconds)
    user = f"system:serviceaccount:{namespace}:{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "ocp-gpu",
                "cluster": {
                    "server": control_plane.server,
                    "certificate-authority": str(control_plane.ca_cert),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "ocp-gpu", "context": {"cluster": "ocp-gpu", "user": user}}],
        "current-context": "ocp-gpu",
    }
    path = control_plane.state_dir / "kubeconfigs" / f"sa-{namespace}-{name}.kubeconfig"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
