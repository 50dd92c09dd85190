"""We test what ocp-gpu relies on of kopf (kube/connecting.py, its one user), so that a kopf release
changing it fails here and not in a running operator:

- `kopf.ConnectionInfo` takes the fields connecting.connection_info passes;
- `as_http_headers` makes the bearer Authorization header from `scheme` and `token`;
- `as_ssl_context` verifies with the CA given as data, and does not verify when `insecure`;
- `proxy_url` is what the session's requests go through;
- the installed kopf is within pyproject.toml's pin (the versions these tests ran against).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import ssl
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from ocp_gpu.kube import connecting

ROOT = Path(__file__).resolve().parents[2]


def _info(**overrides: object) -> connecting.ConnectionInfo:
    fields: dict[str, object] = {
        "server": "https://api.example:6443",
        "ca_path": None,
        "ca_data": None,
        "insecure": False,
        "scheme": "Bearer",
        "token": "t0k",
        "certificate_path": None,
        "certificate_data": None,
        "private_key_path": None,
        "private_key_data": None,
        "proxy_url": "http://proxy.example:3128",
        "expiration": None,
    }
    return connecting.ConnectionInfo(**{**fields, **overrides})  # type: ignore[arg-type]


def test_headers_carry_the_bearer_token() -> None:
    assert _info().as_http_headers()["Authorization"] == "Bearer t0k"
    assert "Authorization" not in _info(scheme=None, token=None).as_http_headers()


def test_the_tls_context_verifies_unless_insecure() -> None:
    verifying = _info().as_ssl_context()
    assert isinstance(verifying, ssl.SSLContext) and verifying.verify_mode == ssl.CERT_REQUIRED
    insecure = _info(insecure=True).as_ssl_context()
    assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname


def test_a_session_uses_the_credentials() -> None:
    async def open_and_close() -> tuple[str, str, object]:
        session = connecting.open_session(_info(), "ocp-gpu/test", 3)
        try:
            connector = session.connector
            assert connector is not None and connector.limit == 3
            return session.headers["Authorization"], session.headers["User-Agent"], session._default_proxy  # type: ignore[attr-defined]
        finally:
            await session.close()

    authorization, agent, proxy = asyncio.run(open_and_close())
    assert (authorization, agent, str(proxy)) == ("Bearer t0k", "ocp-gpu/test", "http://proxy.example:3128")


def test_the_installed_kopf_is_within_the_pin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = next(Requirement(r) for r in project["project"]["dependencies"] if Requirement(r).name == "kopf")
    assert pinned.specifier.filter([importlib.metadata.version("kopf")]), pinned
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in pinned.specifier), "no upper bound"
