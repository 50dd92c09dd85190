"""Building API clients from a kubeconfig or the in-cluster service account."""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client, config

from ocp_gpu import __version__

# Every request the operator makes carries this user agent, so audit logs and
# apiserver metrics can attribute them.
USER_AGENT = f"ocp-gpu/{__version__}"


def load_api_client(kubeconfig: Path | None = None) -> client.ApiClient:
    """An ApiClient for the given kubeconfig, $KUBECONFIG, ~/.kube/config, or in-cluster config."""
    configuration = client.Configuration()
    path = kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=str(path) if path else None, client_configuration=configuration)
    # One pooled connection per concurrent call (reconcilers/runtime.WRITE_CONCURRENCY plus the lease).
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, 16)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return api_client
