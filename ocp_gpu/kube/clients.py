"""Building API clients from a kubeconfig or the in-cluster service account."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client import rest
from kubernetes.config import incluster_config

from ocp_gpu import __version__
from ocp_gpu.kube import leasing

# Every request the operator makes carries this user agent, so audit logs and
# apiserver metrics can attribute them.
USER_AGENT = f"ocp-gpu/{__version__}"


# The client every kube/ function takes; outside kube/ it is only passed along (never called).
ApiClient = client.ApiClient


class ConfigError(Exception):
    """No usable cluster configuration; the message is one line naming what to fix."""


def load_api_client(kubeconfig: Path | None = None) -> client.ApiClient:
    """An ApiClient for the given kubeconfig, $KUBECONFIG, ~/.kube/config, or in-cluster config.

    Raises ConfigError (one line naming the file) when the configuration cannot be loaded.
    """
    configuration = client.Configuration()
    path = kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    if path is not None and not path.is_file():
        origin = "--kubeconfig" if kubeconfig else "$KUBECONFIG"
        raise ConfigError(f"kubeconfig {path} (from {origin}) does not exist or is not a file")
    try:
        if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=str(path) if path else None, client_configuration=configuration
            )
    except (config.ConfigException, OSError, ValueError, yaml.YAMLError) as error:
        # NB: the client's own message spans lines and may not name the file.
        where = str(path) if path else "~/.kube/config (no --kubeconfig, $KUBECONFIG or in-cluster config)"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"cannot load kubeconfig {where}: {first}") from None
    # One pooled connection per concurrent call (reconcilers/runtime.WRITE_CONCURRENCY plus the lease).
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, 16)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return api_client


def lease_credentials(api_client: client.ApiClient) -> leasing.Credentials:
    """The server and credentials of `api_client` as plain data, for the election child process
    (kube/electing.py), which speaks to the API server without the kubernetes client."""
    configuration = api_client.configuration
    token_file = None
    if configuration.refresh_api_key_hook is not None and os.path.isfile(
        incluster_config.SERVICE_TOKEN_FILENAME
    ):
        # In cluster: the projected token rotates; the child re-reads the file as the client does.
        token_file = incluster_config.SERVICE_TOKEN_FILENAME
    bearer = (configuration.auth_settings().get("BearerToken") or {}).get("value")
    token = None
    if bearer and token_file is None:
        # The header value, "Bearer <token>" (any case): the child adds its own prefix.
        scheme, _, rest_of = str(bearer).partition(" ")
        token = rest_of if scheme.lower() == "bearer" and rest_of else str(bearer)
    proxy = configuration.proxy
    if proxy and rest.should_bypass_proxies(configuration.host, configuration.no_proxy or ""):
        proxy = None
    return leasing.Credentials(
        server=configuration.host,
        ca_file=configuration.ssl_ca_cert,
        verify=bool(configuration.verify_ssl),
        check_hostname=configuration.assert_hostname is not False,
        token=token,
        token_file=token_file,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        tls_server_name=configuration.tls_server_name,
        proxy=proxy,
        user_agent=api_client.user_agent,
    )
