"""Sending HTTP requests to the API server with the standard library: a pool of kept-alive connections.

`ApiClient` is the client every kube/ function takes.  It sends one request and returns
the status, headers and body; `kube/requesting.py` speaks JSON over it, the election child
(`kube/leasing.py`) its three Lease requests.

NB: the operator's own transport instead of the kubernetes client (issue 13): the client
imports pydantic, urllib3, requests and oauthlib (about 23 MiB of code in a process whose
other code is 44 MiB), and kopf, seeing it installed, imports it too.  The operator never
used its typed models; a pooled `http.client` does the same work.  Standard library only:
the election child imports this module.
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Mapping, Sequence

from ocp_gpu.kube import authenticating

# Idle connections kept per client: one per concurrent call of a pass
# (reconcilers/runtime.WRITE_CONCURRENCY) and some to spare; more may be open at a burst,
# and are closed instead of kept when they come back.
POOL_SIZE = 16
# Seconds one socket operation may take: a request on a dead connection fails instead of
# hanging a reconcile pass forever (the kubernetes client had no limit).
DEFAULT_TIMEOUT_S = 60.0

# A kept-alive connection the server closed while it sat idle (its idle timeout, an
# apiserver restart): the request never reached it, and goes once more on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.BadStatusLine)


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: http.client.HTTPMessage
    data: bytes


class ApiClient:
    """Requests to one API server with one set of credentials; safe to share between threads."""

    def __init__(
        self,
        credentials: authenticating.Credentials,
        *,
        pool_size: int = POOL_SIZE,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.credentials = credentials
        self.authenticator = authenticating.Authenticator(credentials)
        self.pool_size = pool_size
        self.timeout = timeout
        url = urllib.parse.urlsplit(credentials.server)
        if url.scheme not in ("https", "http"):
            raise authenticating.ConfigError(
                f"the server {credentials.server!r} is not an http(s) URL (clusters[].cluster.server)"
            )
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._base = url.path.rstrip("/")
        self._proxy = _proxy(credentials.proxy) if credentials.proxy else None
        self._idle: list[tuple[http.client.HTTPConnection, ssl.SSLContext | None]] = []
        self._lock = threading.Lock()

    @property
    def user_agent(self) -> str:
        return self.credentials.user_agent

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """One request; the whole response read.  Raises OSError (and http.client's errors) when
        the server cannot be reached; an HTTP error status is returned, not raised."""
        target = self._base + path + (f"?{urllib.parse.urlencode(list(query))}" if query else "")
        current = self.authenticator.current()
        response = self._send(method, target, body, headers, timeout, current)
        if response.status == 401 and self.authenticator.refresh(current):
            # An exec credential revoked early or a rotated token file: once more with the new one.
            response = self._send(method, target, body, headers, timeout, self.authenticator.current())
        return response

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()

    # --- connections -----------------------------------------------------------------

    def _send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        extra: Mapping[str, str] | None,
        timeout: float | None,
        current: authenticating.Current,
    ) -> Response:
        headers = {"User-Agent": self.credentials.user_agent, **(extra or {})}
        if current.authorization:
            headers["Authorization"] = current.authorization
        if self._proxy is not None and not self._https:
            target = f"http://{self._host}:{self._port}{target}"  # a plain proxy takes the absolute URL
        context = self.authenticator.ssl_context(current) if self._https else None
        for attempt in (0, 1):
            connection, reused = self._take(context, timeout)
            try:
                connection.request(method, target, body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
            except _STALE:
                connection.close()
                if attempt or not reused:
                    raise
                continue
            except BaseException:
                # A timeout or anything else mid-request: the connection's state is unknown.
                connection.close()
                raise
            if answer.will_close:
                connection.close()
            else:
                self._give_back(connection, context)
            return Response(answer.status, answer.reason, answer.headers, data)
        raise AssertionError("unreachable")

    def _take(
        self, context: ssl.SSLContext | None, timeout: float | None
    ) -> tuple[http.client.HTTPConnection, bool]:
        seconds = self.timeout if timeout is None else timeout
        with self._lock:
            while self._idle:
                connection, opened_with = self._idle.pop()
                if opened_with is context:
                    break
                connection.close()  # opened with a client certificate since renewed
            else:
                connection = None
        if connection is not None:
            # NB: the timeout applies to each socket operation of this request.
            connection.timeout = seconds
            if connection.sock is not None:
                connection.sock.settimeout(seconds)
            return connection, True
        return self._open(context, seconds), False

    def _give_back(self, connection: http.client.HTTPConnection, context: ssl.SSLContext | None) -> None:
        with self._lock:
            if len(self._idle) < self.pool_size:
                self._idle.append((connection, context))
                return
        connection.close()

    def _open(self, context: ssl.SSLContext | None, timeout: float) -> http.client.HTTPConnection:
        proxy = self._proxy
        host, port = (proxy.host, proxy.port) if proxy else (self._host, self._port)
        connection: http.client.HTTPConnection
        if context is not None:
            connection = _HTTPSConnection(
                host,
                port,
                timeout=timeout,
                context=context,
                server_name=self.credentials.tls_server_name or self._host,
            )
            if proxy:
                connection.set_tunnel(self._host, self._port, headers=proxy.headers)
        else:
            connection = _HTTPConnection(host, port, timeout=timeout)
        return connection


class _HTTPConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        # NB: many small requests on one connection: without TCP_NODELAY a body sent after its
        # headers waits for the ACK of the headers (Nagle + delayed ACK: 40 ms per request).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _HTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose SNI and certificate check may use a name other than the host
    dialled (a kubeconfig's `tls-server-name`, or the API server behind a proxy)."""

    def __init__(
        self, host: str, port: int, *, timeout: float, context: ssl.SSLContext, server_name: str
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name
        self._ssl_context = context

    def connect(self) -> None:
        # NB: http.client.HTTPSConnection.connect wraps with the dialled host as the server
        # name; we do the same TCP connect (and CONNECT through a proxy) and wrap with ours.
        http.client.HTTPConnection.connect(self)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._ssl_context.wrap_socket(self.sock, server_hostname=self._server_name)


@dataclasses.dataclass(frozen=True)
class _Proxy:
    host: str
    port: int
    headers: dict[str, str]


def _proxy(url: str) -> _Proxy:
    """A kubeconfig's `proxy-url` (http://[user:password@]host:port)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise authenticating.ConfigError(
            f"proxy-url {url!r} is not supported: ocp-gpu tunnels through an http:// proxy only"
        )
    headers = {}
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = f"Basic {base64.b64encode(pair.encode()).decode()}"
    return _Proxy(parts.hostname, parts.port or 80, headers)
