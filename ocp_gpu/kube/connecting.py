"""kopf's connection (the operator's watches) from the credentials our own client uses.

NB: its own module so that only the operator imports kopf: `ocp-gpu status` and `render` import
kube/clients.py, and kopf (with aiohttp) costs seconds of start-up on a loaded machine.
"""

from __future__ import annotations

import kopf

from ocp_gpu.kube import clients


def connection_info(api_client: clients.ApiClient, *, renew: bool = False) -> kopf.ConnectionInfo:
    """kopf's credentials: the same kubeconfig, read once by kube/configuring.py.

    `renew`: kopf logs in again only when the API server refused what it had (401); an exec
    plugin then runs again and a token file is re-read, whatever their expiry says.
    NB: an exec credential's expiry goes to kopf, which logs in again when it passes.
    """
    authenticator = api_client.authenticator
    current = authenticator.current()
    if renew and authenticator.refresh(current):
        current = authenticator.current()
    creds = api_client.credentials
    scheme, _, token = (current.authorization or "").partition(" ")
    cert_data = current.cert_data or creds.cert_data
    key_data = current.key_data or creds.key_data
    return kopf.ConnectionInfo(
        server=creds.server,
        ca_path=creds.ca_file,
        ca_data=creds.ca_data,
        insecure=not creds.verify,
        scheme=scheme or None,
        token=token or None,
        certificate_path=None if cert_data else creds.cert_file,
        certificate_data=cert_data,
        private_key_path=None if key_data else creds.key_file,
        private_key_data=key_data,
        proxy_url=creds.proxy,
        expiration=current.expires,
    )
