"""Sending HTTP requests to the API server with the standard library: a pool of kept-alive connections.

`ApiClient` is the client every kube/ function takes.  It sends one request and returns
the status, headers and body; `kube/requesting.py` speaks JSON over it, the election child
(`kube/leasing.py`) its three Lease requests.

NB: the operator's own transport instead of the kubernetes client (issue 13): the client
imports pydantic, urllib3, requests and oauthlib (about 23 MiB of code in a process whose
other code is 44 MiB), and kopf, seeing it installed, imports it too.  The operator never
used its typed models.  HTTP/1.1 is spoken here over `socket` and `ssl` rather than with
`http.client`, which imports the `email` package to parse headers (2 MiB of the election
child's 20).  Standard library only: the election child imports this module.
"""

from __future__ import annotations

import base64
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import BinaryIO, NamedTuple

from ocp_gpu.kube import authenticating

# Idle connections kept per client: one per concurrent call of a pass
# (reconcilers/runtime.WRITE_CONCURRENCY) and some to spare; more may be open at a burst,
# and are closed instead of kept when they come back.
POOL_SIZE = 16
# Seconds one socket operation may take: a request on a dead connection fails instead of
# hanging a reconcile pass forever (the kubernetes client had no limit).
DEFAULT_TIMEOUT_S = 60.0
# The longest status or header line accepted (http.client's limit too).
_MAX_LINE = 65536
_MAX_HEADERS = 100


class Response(NamedTuple):
    status: int
    reason: str
    headers: dict[str, str]  # names in lower case
    data: bytes


class ClosedError(ConnectionError):
    """The server closed the connection before answering (a kept-alive one it timed out)."""


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.1 as we read it."""


# A kept-alive connection the server closed while it sat idle (its idle timeout, an
# apiserver restart): the request never reached it, and goes once more on a new connection.
_STALE = (ClosedError, ConnectionResetError, BrokenPipeError, ConnectionAbortedError, ssl.SSLEOFError)


class _Connection:
    """One socket (TLS or not, maybe tunnelled through a proxy) and its buffered reader."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext | None) -> None:
        self.sock = sock
        self.reader: BinaryIO = sock.makefile("rb")
        self.context = context  # what it was opened with (a renewed certificate makes it stale)

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


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
        # NB: an IPv6 address is bracketed in the Host header (and a CONNECT target).
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._authority = f"{host}:{self._port}"
        self._proxy = _proxy(credentials.proxy) if credentials.proxy else None
        self._idle: list[_Connection] = []
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
        """One request; the whole response read.  Raises OSError when the server cannot be
        reached or answers no HTTP; an HTTP error status is returned, not raised."""
        target = self._base + path + (f"?{urllib.parse.urlencode(list(query))}" if query else "")
        if self._proxy is not None and not self._https:
            target = f"http://{self._authority}{target}"  # a plain proxy takes the absolute URL
        current = self.authenticator.current()
        response = self._send(method, target, body, headers, timeout, current)
        if response.status == 401 and self.authenticator.refresh(current):
            # An exec credential revoked early or a rotated token file: once more with the new one.
            response = self._send(method, target, body, headers, timeout, self.authenticator.current())
        return response

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # --- one exchange ----------------------------------------------------------------

    def _send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        extra: Mapping[str, str] | None,
        timeout: float | None,
        current: authenticating.Current,
    ) -> Response:
        headers = {"Host": self._authority, "User-Agent": self.credentials.user_agent, **(extra or {})}
        if current.authorization:
            headers["Authorization"] = current.authorization
        if body is not None or method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body or b""))
        lines = [f"{method} {target} HTTP/1.1"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"the header {name} holds a line break")
            lines.append(f"{name}: {value}")
        # NB: head and body in one send: no Nagle wait between them (nor a second packet).
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        context = self.authenticator.ssl_context(current) if self._https else None
        seconds = self.timeout if timeout is None else timeout
        for attempt in (0, 1):
            # NB: the retry opens a new connection: after a quiet spell the server has closed
            # every pooled one (its idle timeout), and another of them would fail the same way.
            connection, reused = (
                self._take(context, seconds) if not attempt else (self._open(context, seconds), False)
            )
            try:
                connection.sock.sendall(request)
                response, keep = _read_response(connection.reader, method)
            except _STALE:
                connection.close()
                if attempt or not reused:
                    raise
                continue
            except BaseException:
                # A timeout or anything else mid-request: the connection's state is unknown.
                connection.close()
                raise
            if keep:
                self._give_back(connection)
            else:
                connection.close()
            return response
        raise AssertionError("unreachable")

    # --- the pool ------------------------------------------------------------------

    def _take(self, context: ssl.SSLContext | None, seconds: float) -> tuple[_Connection, bool]:
        found: _Connection | None = None
        with self._lock:
            while self._idle and found is None:
                connection = self._idle.pop()
                if connection.context is not context:
                    connection.close()  # opened with a client certificate since renewed
                elif _closed_by_peer(connection.sock):
                    connection.close()  # the server closed it while it sat idle (its idle timeout)
                else:
                    found = connection
        if found is not None:
            # NB: the timeout applies to each socket operation of this request.
            found.sock.settimeout(seconds)
            return found, True
        return self._open(context, seconds), False

    def _give_back(self, connection: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self.pool_size:
                self._idle.append(connection)
                return
        connection.close()

    def _open(self, context: ssl.SSLContext | None, seconds: float) -> _Connection:
        proxy = self._proxy
        address = (proxy.host, proxy.port) if proxy else (self._host, self._port)
        sock = socket.create_connection(address, timeout=seconds)
        try:
            # NB: many small requests on one connection: answer without delayed-ACK waits.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and context is not None:
                _tunnel(sock, self._authority, proxy.headers)
            if context is not None:
                # SNI and the certificate check: the kubeconfig's tls-server-name, else the server's host.
                name = self.credentials.tls_server_name or self._host
                sock = context.wrap_socket(sock, server_hostname=name)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, context)


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive connection has nothing to read: readable means the server closed it
    (EOF, a TLS close_notify) or broke the protocol; either way it cannot carry a request.

    NB: poll, not select: select fails on a descriptor above 1,023.
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    try:
        return bool(poller.poll(0))
    except OSError:
        return True


def _read_head(reader: BinaryIO) -> tuple[str, int, str, dict[str, str]]:
    """A status line and its headers."""
    line = reader.readline(_MAX_LINE + 1)
    if not line:
        raise ClosedError("the server closed the connection without answering")
    version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        line = reader.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):
            return version, int(code), reason, headers
        if not line:
            raise ClosedError("the server closed the connection in the headers")
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon:
            raise ProtocolError(f"not a header line: {line[:80]!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    raise ProtocolError(f"more than {_MAX_HEADERS} headers")


def _read_response(reader: BinaryIO, method: str) -> tuple[Response, bool]:
    """The response to one request, its body read whole; and whether the connection stays open."""
    version, status, reason, headers = _read_head(reader)
    while 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
        version, status, reason, headers = _read_head(reader)
    connection = headers.get("connection", "").lower()
    keep = connection != "close" if version != "HTTP/1.0" else connection == "keep-alive"
    if method == "HEAD" or status in (204, 304):
        data = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        data = _read_chunked(reader)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        data = reader.read(length)
        if len(data) != length:
            raise ProtocolError(f"the body ended after {len(data)} of {length} bytes")
    else:
        data, keep = reader.read(), False  # delimited by the server closing the connection
    return Response(status, reason, headers, data), keep


def _read_chunked(reader: BinaryIO) -> bytes:
    parts: list[bytes] = []
    while True:
        line = reader.readline(_MAX_LINE + 1)
        size_text = line.split(b";", 1)[0].strip()
        if not size_text:
            raise ProtocolError("a chunked body ended early")
        size = int(size_text, 16)
        if size == 0:
            # Trailers (none from the API server) up to the blank line.
            while reader.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        chunk = reader.read(size)
        if len(chunk) != size:
            raise ProtocolError("a chunked body ended early")
        parts.append(chunk)
        reader.readline(_MAX_LINE + 1)  # the CRLF after the chunk


def _tunnel(sock: socket.socket, authority: str, headers: Mapping[str, str]) -> None:
    """Ask an HTTP proxy for a tunnel to the API server (CONNECT)."""
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    # NB: the proxy says nothing after its answer until the TLS handshake starts, so this
    # reader cannot have read ahead into it.
    with sock.makefile("rb") as reader:
        _, status, reason, _ = _read_head(reader)
    if status != 200:
        raise ProtocolError(f"the proxy refused the tunnel to {authority}: {status} {reason}")


class _Proxy(NamedTuple):
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
