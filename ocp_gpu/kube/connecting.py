"""kopf, in its one place: the credentials and the HTTP session every watch opens.

What the operator uses of kopf is its `ConnectionInfo` (the credentials of one API server)
and the two methods that turn one into an aiohttp session's TLS context and headers, as kopf
does for its own requests (docs/architecture.md, "Watches": kopf's handlers, peering and
watch machinery are not used). tests/unit/test_kopf_contract.py fails when what this module
relies on of kopf changes; pyproject.toml pins kopf to the versions tested.

NB: its own module so that only the operator imports kopf: `ocp-gpu status` and `render` import
kube/clients.py, and kopf (with aiohttp) costs seconds of start-up on a loaded machine.
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import kopf

from ocp_gpu.kube import clients

# Credentials for a watch's session: `login(True)` after a 401 asks for renewed ones.
ConnectionInfo = kopf.ConnectionInfo
Login = Callable[[bool], ConnectionInfo]


def connection_info(api_client: clients.ApiClient, *, renew: bool = False) -> ConnectionInfo:
    """The watches' credentials: the same kubeconfig, read once by kube/configuring.py.

    `renew`: asked only when the API server refused what the session had (401); an exec
    plugin then runs again and a token file is re-read, whatever their expiry says.
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


def open_session(info: ConnectionInfo, user_agent: str, connections: int) -> aiohttp.ClientSession:
    """An HTTP session to the API server with these credentials, as kopf opens its own:
    its TLS context (CA, client certificate, or no verification) and its Authorization header.

    `connections`: aiohttp's connection limit; more requests wait for a connection.
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=info.as_ssl_context(), limit=connections),
        headers={**info.as_http_headers(), "User-Agent": user_agent},
        proxy=info.proxy_url,
    )
