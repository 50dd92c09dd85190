"""Credentials for the API server as plain data, and what they yield right now.

`Credentials` is where the server is and how to authenticate, as `kube/configuring.py`
read it from a kubeconfig or the in-cluster service account.  It is plain data so the
election child (`python -S -m ocp_gpu.kube.electing`) can take it over a pipe as JSON.
`Authenticator` turns it into the headers and TLS context of a request: a static token,
a token file re-read as it rotates, basic auth, a client certificate (file or inline), or
a kubeconfig `exec` credential plugin (run, its ExecCredential read, run again when it
expires or the server answers 401).  The operator's transport (`kube/sending.py`), kopf's
login (`kube/connecting.py`) and the election child all go through it: one way to read
a kubeconfig, one way to authenticate.

NB: standard library only, and nothing heavy at import (subprocess is imported when an
exec plugin runs): the election child imports this module (import-linter contract
"the election child stays light").
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import ssl
import threading
import time
from typing import Any

# A service account token file is re-read this often (kubelet rotates the projected token
# well before it expires; the kubernetes client re-reads it every minute too).
TOKEN_REREAD_S = 60.0
# An exec credential is renewed this long before its expirationTimestamp, so a request
# never starts with a token about to lapse.
EXPIRY_MARGIN_S = 10.0
# How long an exec plugin may run (a cloud CLI fetching a token over the network).
EXEC_TIMEOUT_S = 60.0
EXEC_API_VERSIONS = frozenset({"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"})


class ConfigError(Exception):
    """No usable cluster configuration; the message is one line naming the file and field to fix."""


@dataclasses.dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig's `users[].user.exec`: a command that prints an ExecCredential."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    install_hint: str = ""
    provide_cluster_info: bool = False
    # Where it was configured ("<kubeconfig> users[name=u].user.exec"), for error messages.
    origin: str = "exec"


@dataclasses.dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate, as plain data a child process can take.

    Any of: `token` (static), `token_file` (re-read every minute as it rotates),
    `username`/`password` (basic), a client certificate (`cert_file`/`key_file` paths or
    `cert_data`/`key_data` PEM text), or `exec` (a credential plugin).
    """

    server: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM text
    verify: bool = True
    # False only when the kubeconfig's client was told not to check the certificate's name.
    check_hostname: bool = True
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: str | None = None  # PEM text
    key_data: str | None = None  # PEM text
    # SNI and the name checked in the server's certificate, when not the server URL's host.
    tls_server_name: str | None = None
    # An HTTP proxy to tunnel through (CONNECT), as the kubeconfig's proxy-url sets it.
    proxy: str | None = None
    exec: ExecPlugin | None = None
    user_agent: str = "ocp-gpu"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Credentials:
        fields = dict(data)
        plugin = fields.get("exec")
        if plugin is not None:
            fields["exec"] = ExecPlugin(
                **{
                    **plugin,
                    "args": tuple(plugin.get("args") or ()),
                    "env": tuple((str(k), str(v)) for k, v in plugin.get("env") or ()),
                }
            )
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class Current:
    """What authenticates a request now: one `generation` of it (a refresh makes the next)."""

    generation: int
    authorization: str | None  # the Authorization header's value
    cert_data: str | None  # PEM, from an exec plugin
    key_data: str | None
    expires: datetime.datetime | None  # an exec credential's expirationTimestamp


class Authenticator:
    """The headers and TLS context `credentials` yield now; thread-safe.

    A refresh (an exec credential past its expiry, a 401 the caller reports) makes a new
    generation; a connection opened with a client certificate since replaced is stale
    (kube/sending.py drops it).
    """

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._lock = threading.Lock()
        self._current: Current | None = None
        self._read_at = 0.0  # monotonic time the token file was read
        self._context: tuple[tuple[str | None, str | None], ssl.SSLContext] | None = None

    def current(self) -> Current:
        """The credential to use now (reading or running what is needed the first time)."""
        with self._lock:
            current = self._current
            if current is None or self._due(current):
                current = self._renew(current.generation + 1 if current else 1)
            return current

    def refresh(self, failed: Current) -> bool:
        """The server refused `failed` (401): renew it unless another thread already has.

        True when there is something new to try (an exec plugin ran again, the token file
        was re-read); False when the credentials are static (retrying cannot help).
        """
        creds = self.credentials
        if creds.exec is None and creds.token_file is None:
            return False
        with self._lock:
            if self._current is not None and self._current.generation != failed.generation:
                return True  # renewed meanwhile
            self._current = self._renew(failed.generation + 1)
            return True

    def ssl_context(self, current: Current) -> ssl.SSLContext:
        """The TLS context for connections opened with `current`: the same object for as long as
        the client certificate stays (a new token alone keeps it and its connections)."""
        key = (current.cert_data, current.key_data)
        with self._lock:
            if self._context is None or self._context[0] != key:
                self._context = (key, _ssl_context(self.credentials, current))
            return self._context[1]

    # --- renewing (under the lock) ---------------------------------------------------

    def _due(self, current: Current) -> bool:
        creds = self.credentials
        if creds.exec is not None:
            if current.expires is None:
                return False
            left = (current.expires - datetime.datetime.now(datetime.UTC)).total_seconds()
            return left <= EXPIRY_MARGIN_S
        return creds.token_file is not None and time.monotonic() - self._read_at >= TOKEN_REREAD_S

    def _renew(self, generation: int) -> Current:
        creds = self.credentials
        if creds.exec is not None:
            current = run_exec_plugin(creds.exec, creds, generation)
        elif creds.token_file is not None:
            self._read_at = time.monotonic()
            try:
                with open(creds.token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as error:
                raise ConfigError(
                    f"cannot read the token file {creds.token_file}: {error.strerror}"
                ) from None
            current = Current(generation, f"Bearer {token}", None, None, None)
        elif creds.token:
            current = Current(generation, f"Bearer {creds.token}", None, None, None)
        elif creds.username is not None:
            import base64  # NB: here: only basic auth needs it (the election child rarely does)

            pair = f"{creds.username}:{creds.password or ''}".encode()
            current = Current(generation, f"Basic {base64.b64encode(pair).decode()}", None, None, None)
        else:
            current = Current(generation, None, None, None, None)
        self._current = current
        return current


def run_exec_plugin(plugin: ExecPlugin, credentials: Credentials, generation: int) -> Current:
    """Run a kubeconfig's exec credential plugin and read its ExecCredential.

    NB: as kubectl does: the plugin's env is ours plus its own `env`, plus
    KUBERNETES_EXEC_INFO (the ExecCredential request: apiVersion, non-interactive, and the
    cluster when `provideClusterInfo`); stdin is closed (no interactive prompt in an operator).
    """
    import subprocess  # NB: here: only an exec plugin needs it (3 MiB in the election child)

    spec: dict[str, Any] = {"interactive": False}
    if plugin.provide_cluster_info:
        cluster: dict[str, Any] = {"server": credentials.server}
        if credentials.ca_data:
            import base64

            cluster["certificate-authority-data"] = base64.b64encode(credentials.ca_data.encode()).decode()
        if not credentials.verify:
            cluster["insecure-skip-tls-verify"] = True
        if credentials.tls_server_name:
            cluster["tls-server-name"] = credentials.tls_server_name
        if credentials.proxy:
            cluster["proxy-url"] = credentials.proxy
        spec["cluster"] = cluster
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec}
    env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
    where = f"exec plugin {plugin.command!r} ({plugin.origin})"
    try:
        done = subprocess.run(
            [plugin.command, *plugin.args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=EXEC_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        hint = f": {plugin.install_hint.strip().splitlines()[0]}" if plugin.install_hint.strip() else ""
        raise ConfigError(f"{where}: command not found{hint}") from None
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"{where}: {error}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise ConfigError(f"{where}: exited {done.returncode}" + (f": {said[-1]}" if said else ""))
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise ConfigError(f"{where}: its output is not an ExecCredential (not JSON)") from None
    return exec_credential(answer, plugin, generation)


def exec_credential(answer: Any, plugin: ExecPlugin, generation: int) -> Current:
    """The credential an exec plugin printed (an ExecCredential), checked field by field."""
    where = f"exec plugin {plugin.command!r} ({plugin.origin})"
    if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
        raise ConfigError(f"{where}: its output is not an ExecCredential (kind)")
    if answer.get("apiVersion") != plugin.api_version:
        raise ConfigError(
            f"{where}: it answered apiVersion {answer.get('apiVersion')!r}, the kubeconfig asks for "
            f"{plugin.api_version!r}"
        )
    status = answer.get("status")
    if not isinstance(status, dict):
        raise ConfigError(f"{where}: its ExecCredential has no status")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData") or None, status.get("clientKeyData") or None
    if bool(cert) != bool(key):
        raise ConfigError(f"{where}: status.clientCertificateData and status.clientKeyData come together")
    if not token and not cert:
        raise ConfigError(f"{where}: its status has neither token nor clientCertificateData")
    expires = None
    if status.get("expirationTimestamp"):
        try:
            expires = datetime.datetime.fromisoformat(
                str(status["expirationTimestamp"]).replace("Z", "+00:00")
            )
        except ValueError:
            raise ConfigError(
                f"{where}: status.expirationTimestamp {status['expirationTimestamp']!r} is not RFC 3339"
            ) from None
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=datetime.UTC)
    return Current(generation, f"Bearer {token}" if token else None, cert, key, expires)


def _ssl_context(credentials: Credentials, current: Current) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=credentials.ca_file, cadata=credentials.ca_data)
    if not credentials.verify:
        # The kubeconfig says insecure-skip-tls-verify: as kubectl does.
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif not credentials.check_hostname:
        context.check_hostname = False
    if current.cert_data and current.key_data:
        _load_cert_data(context, current.cert_data, current.key_data)
    elif credentials.cert_data and credentials.key_data:
        _load_cert_data(context, credentials.cert_data, credentials.key_data)
    elif credentials.cert_file:
        context.load_cert_chain(credentials.cert_file, credentials.key_file)
    return context


_written = 0


def _load_cert_data(context: ssl.SSLContext, cert: str, key: str) -> None:
    """Load an inline client certificate and key.

    NB: ssl loads a certificate chain from files only; the PEM is written to a file only we
    can read (0600, O_EXCL), loaded, and removed at once.
    """
    global _written
    _written += 1
    base = os.environ.get("TMPDIR") or "/tmp"
    path = os.path.join(base, f"ocp-gpu-{os.getpid()}-{_written}-{os.urandom(6).hex()}.pem")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(cert.rstrip("\n") + "\n" + key.rstrip("\n") + "\n")
        context.load_cert_chain(path)
    finally:
        os.unlink(path)
