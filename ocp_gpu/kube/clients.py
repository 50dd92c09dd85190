"""Building the API client from a kubeconfig or the in-cluster service account."""

from __future__ import annotations

from pathlib import Path

from ocp_gpu import __version__
from ocp_gpu.kube import authenticating, configuring, sending

# Every request the operator makes carries this user agent, so audit logs and
# apiserver metrics can attribute them.
USER_AGENT = f"ocp-gpu/{__version__}"

# The client every kube/ function takes; outside kube/ it is only passed along (never called).
ApiClient = sending.ApiClient

ConfigError = authenticating.ConfigError


def load_api_client(kubeconfig: Path | None = None) -> sending.ApiClient:
    """A client for the given kubeconfig, $KUBECONFIG, in-cluster config, or ~/.kube/config.

    Raises ConfigError (one line naming the file and field) when the configuration cannot be loaded.
    """
    credentials = configuring.load_credentials(kubeconfig, user_agent=USER_AGENT)
    # One pooled connection per concurrent call (reconcilers/runtime.WRITE_CONCURRENCY plus the lease).
    return sending.ApiClient(credentials, pool_size=sending.POOL_SIZE)


def lease_credentials(api_client: sending.ApiClient) -> authenticating.Credentials:
    """The server and credentials of `api_client` as plain data, for the election child process
    (kube/electing.py): the same loader's output, exec plugin included (the child runs it itself)."""
    return api_client.credentials
