"""kopf's connection from the configuration our kubernetes client uses (the operator's watches).

NB: its own module so that only the operator imports kopf: `ocp-gpu status` and `render` import
kube/clients.py, and kopf (with aiohttp) costs seconds of start-up on a loaded machine.
"""

from __future__ import annotations

import kopf
from kubernetes import client


def connection_info(api_client: client.ApiClient) -> kopf.ConnectionInfo:
    """kopf's credentials from the same configuration our kubernetes client uses."""
    configuration = api_client.configuration
    header = configuration.get_api_key_with_prefix("BearerToken") or configuration.get_api_key_with_prefix(
        "authorization"
    )
    scheme, token = [*header.split(" ", 1), ""][:2] if header else (None, None)
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme if token else None,
        token=token or scheme or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )
