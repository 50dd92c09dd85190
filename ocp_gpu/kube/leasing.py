"""Reading and writing one `coordination.k8s.io/v1` Lease over the standard library's HTTP client.

The leader election (`kube/electing.py`) runs in a child process that only ever GETs, POSTs
and PUTs one Lease on a timer.  Loading the kubernetes client for that costs about 45 MiB
and a third of a second of CPU per process (issue 13), so this module speaks the three
requests itself with `http.client`, `ssl` and `json`, from credentials the operator
process resolved with the kubernetes client (`clients.lease_credentials`) and handed over.

NB: this module, `kube/electing.py` and `planning/leadership.py` must import nothing
outside the standard library (the import-linter contract "the election child stays
light" and tests/unit/test_leasing.py check it).
"""

from __future__ import annotations

import dataclasses
import datetime
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from typing import Any

from ocp_gpu.planning import leadership

LEASES_GROUP_PATH = "/apis/coordination.k8s.io/v1"
# The kubernetes client's loader re-reads a service account token this often (kubelet
# rotates the projected token file well before it expires).
TOKEN_REREAD_S = 60.0


@dataclasses.dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate, as plain data a child process can take.

    Either `token` (a static bearer token from a kubeconfig) or `token_file` (the in-cluster
    service account's token, re-read every minute as it rotates), and/or a client
    certificate (`cert_file`, `key_file`).
    """

    server: str
    ca_file: str | None = None
    verify: bool = True
    # False only when the kubeconfig's client was told not to check the certificate's name.
    check_hostname: bool = True
    token: str | None = None
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    # SNI and the name checked in the server's certificate, when not the server URL's host.
    tls_server_name: str | None = None
    # An HTTP proxy to tunnel through (CONNECT), as the kubeconfig's proxy-url sets it.
    proxy: str | None = None
    user_agent: str = "ocp-gpu"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Credentials:
        return cls(**data)


class LeaseApiError(Exception):
    """The API server answered with an error status (409 conflict, 404 absent, …)."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        super().__init__(f"HTTP {status} {reason}: {body[:300]}")
        self.status = status
        self.reason = reason


class LeaseApi:
    """GET, POST and PUT of Leases on one persistent connection (one request at a time)."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        url = urllib.parse.urlsplit(credentials.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._base = url.path.rstrip("/")
        self._context = _ssl_context(credentials) if self._https else None
        self._connection: http.client.HTTPConnection | None = None
        self._token: tuple[str, float] | None = None  # (token, monotonic time read)
        # NB: one request at a time on the one connection (a release may race a renewal).
        self._lock = threading.Lock()

    def read(
        self, namespace: str, name: str, timeout: float, default_duration_s: int
    ) -> tuple[leadership.LeaseRecord | None, str | None]:
        """The Lease's record and resourceVersion; (None, None) when it does not exist."""
        try:
            lease = self._request("GET", _lease_path(namespace, name), None, timeout)
        except LeaseApiError as error:
            if error.status == 404:
                return None, None
            raise
        return record_of(lease, default_duration_s), lease["metadata"].get("resourceVersion")

    def create(self, namespace: str, name: str, record: leadership.LeaseRecord, timeout: float) -> str:
        """Create the Lease; its new resourceVersion."""
        body = lease_body(namespace, name, record, None)
        created = self._request("POST", f"{LEASES_GROUP_PATH}/namespaces/{namespace}/leases", body, timeout)
        return str(created["metadata"]["resourceVersion"])

    def replace(
        self, namespace: str, name: str, record: leadership.LeaseRecord, version: str | None, timeout: float
    ) -> str:
        """Write the Lease over `version` (409 when someone wrote since); its new resourceVersion."""
        body = lease_body(namespace, name, record, version)
        written = self._request("PUT", _lease_path(namespace, name), body, timeout)
        return str(written["metadata"]["resourceVersion"])

    def close(self) -> None:
        with self._lock:
            self._drop()

    # --- HTTP ----------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        headers = {"Accept": "application/json", "User-Agent": self._credentials.user_agent}
        token = self._bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        with self._lock:
            # One retry on a fresh connection when a kept-alive one turns out closed by the
            # server (idle timeout, apiserver restart) before anything was answered.
            for attempt in (0, 1):
                connection = self._connect(timeout)
                try:
                    connection.request(method, self._base + path, body=payload, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                    self._drop()
                    if attempt:
                        raise
                    continue
                except BaseException:
                    # A timeout or anything else mid-request: the connection's state is unknown.
                    self._drop()
                    raise
                break
        text = data.decode(errors="replace")
        if response.status >= 400:
            raise LeaseApiError(response.status, response.reason, text)
        result: dict[str, Any] = json.loads(text)
        return result

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        connection = self._connection
        if connection is None:
            connection = self._new_connection(timeout)
            self._connection = connection
        # NB: the timeout applies to each socket operation of this request.
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def _new_connection(self, timeout: float) -> http.client.HTTPConnection:
        proxy = urllib.parse.urlsplit(self._credentials.proxy) if self._credentials.proxy else None
        host, port = (proxy.hostname or "", proxy.port or 80) if proxy else (self._host, self._port)
        connection: http.client.HTTPConnection
        if self._https:
            connection = _HTTPSConnection(
                host, port, timeout=timeout, context=self._context, server_name=self._server_name()
            )
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        if proxy:
            connection.set_tunnel(self._host, self._port)
        return connection

    def _server_name(self) -> str:
        return self._credentials.tls_server_name or self._host

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _bearer(self) -> str | None:
        if self._credentials.token_file:
            now = time.monotonic()
            if self._token is None or now - self._token[1] >= TOKEN_REREAD_S:
                with open(self._credentials.token_file, encoding="utf-8") as handle:
                    self._token = (handle.read().strip(), now)
            return self._token[0]
        return self._credentials.token


class _HTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose SNI and certificate check may use a name other than the host
    dialled (a kubeconfig's `tls-server-name`)."""

    def __init__(
        self, host: str, port: int, *, timeout: float, context: ssl.SSLContext | None, server_name: str
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name
        self._ssl_context = context or ssl.create_default_context()

    def connect(self) -> None:
        # NB: http.client.HTTPSConnection.connect wraps with the dialled host as the server
        # name; we do the same TCP connect and wrap with ours.
        http.client.HTTPConnection.connect(self)
        # (Through a proxy, connect() has opened the tunnel to the API server by now.)
        self.sock = self._ssl_context.wrap_socket(self.sock, server_hostname=self._server_name)


def _ssl_context(credentials: Credentials) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=credentials.ca_file)
    if not credentials.verify:
        # The kubeconfig says insecure-skip-tls-verify: as the kubernetes client does.
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif not credentials.check_hostname:
        context.check_hostname = False
    if credentials.cert_file:
        context.load_cert_chain(credentials.cert_file, credentials.key_file)
    return context


def _lease_path(namespace: str, name: str) -> str:
    return f"{LEASES_GROUP_PATH}/namespaces/{namespace}/leases/{name}"


# --- Lease <-> LeaseRecord ------------------------------------------------------


def record_of(lease: dict[str, Any], default_duration_s: int) -> leadership.LeaseRecord:
    """The election's view of a Lease object (JSON); a Lease without a duration gets ours."""
    spec = lease.get("spec") or {}
    return leadership.LeaseRecord(
        holder=spec.get("holderIdentity") or None,
        renewed_at=parse_micro_time(spec.get("renewTime")),
        acquired_at=parse_micro_time(spec.get("acquireTime")),
        duration_s=int(spec.get("leaseDurationSeconds") or default_duration_s),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def lease_body(
    namespace: str, name: str, record: leadership.LeaseRecord, version: str | None
) -> dict[str, Any]:
    """The Lease object to write for `record` (over `version`, or a new one when None)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "ocp-gpu"},
    }
    if version is not None:
        metadata["resourceVersion"] = version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.duration_s,
        "acquireTime": format_micro_time(record.acquired_at),
        "renewTime": format_micro_time(record.renewed_at),
        "leaseTransitions": record.transitions,
    }
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        # NB: a None field is left out, as the kubernetes client serialises it.
        "spec": {key: value for key, value in spec.items() if value is not None},
    }


def format_micro_time(stamp: datetime.datetime | None) -> str | None:
    """A Lease's MicroTime: RFC 3339 in UTC with microseconds (`2026-11-24T04:35:50.123456Z`)."""
    if stamp is None:
        return None
    return stamp.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: str | None) -> datetime.datetime | None:
    """The inverse of format_micro_time; also takes whole seconds and offsets (`+00:00`)."""
    if not value:
        return None
    stamp = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.UTC)
