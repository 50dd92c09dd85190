"""We test these aspects of how the operator's transport (kube/sending.py) reads HTTP/1.1 answers,
without a server (the requests themselves: tests/e2e/test_transport.py):

- a body by Content-Length, by chunks (with extensions and trailers), or up to the server's close;
- an interim 100 Continue skipped; HEAD, 204 and 304 without a body;
- keep-alive unless `Connection: close` (HTTP/1.1) or without `keep-alive` (HTTP/1.0);
- repeated headers joined, names in lower case;
- a connection closed before the status line is stale (retried once on a new connection),
  a short body or garbage is a protocol error, never a silently cut answer;
- after a quiet spell in which the server closed every pooled connection, a request still gets
  its answer (the retry opens a new connection instead of taking another stale one), and a pooled
  connection the server has visibly closed is dropped before any request is sent on it.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from typing import Any

import pytest

from ocp_gpu.kube import authenticating, requesting, sending


def read(raw: bytes, method: str = "GET") -> tuple[sending.Response, bool]:
    return sending._read_response(io.BytesIO(raw), method)


def test_content_length_and_keep_alive() -> None:
    response, keep = read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nx-a: 2\r\n\r\n{}extra")
    assert response == sending.Response(200, "OK", {"content-length": "2", "x-a": "1, 2"}, b"{}")
    assert keep


def test_chunked_with_extension_and_trailer() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n2\r\nef\r\n0\r\nT: v\r\n\r\n"
    )
    response, keep = read(raw)
    assert response.data == b"abcdef" and keep


def test_close_delimited_and_connection_close() -> None:
    response, keep = read(b"HTTP/1.1 500 Internal Server Error\r\n\r\nboom")
    assert (response.status, response.reason, response.data, keep) == (
        500,
        "Internal Server Error",
        b"boom",
        False,
    )
    _, keep = read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert not keep
    _, keep = read(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert not keep
    _, keep = read(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
    assert keep


def test_interim_answers_and_bodiless_responses() -> None:
    response, _ = read(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx")
    assert (response.status, response.data) == (201, b"x")
    for raw, method in (
        (b"HTTP/1.1 204 No Content\r\n\r\n", "DELETE"),
        (b"HTTP/1.1 304 Not Modified\r\n\r\n", "GET"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "HEAD"),
    ):
        response, keep = read(raw, method)
        assert response.data == b"" and keep


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", sending.ClosedError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", sending.ClosedError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", sending.ProtocolError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", sending.ProtocolError),
        (b"SSH-2.0-OpenSSH\r\n\r\n", sending.ProtocolError),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", sending.ProtocolError),
    ],
)
def test_cut_or_garbled_answers_raise(raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        read(raw)
    # Both are connection errors: callers that retry on OSError treat them alike.
    assert issubclass(error, ConnectionError)


def test_a_closed_connection_is_the_stale_kind_retried_once() -> None:
    assert issubclass(sending.ClosedError, sending._STALE)
    assert not issubclass(sending.ProtocolError, sending._STALE)


def test_every_idle_connection_closed_by_the_server_still_gets_the_answer_on_a_new_one() -> None:
    # The API server closes keep-alive connections idle for longer than its idle timeout: after a
    # quiet spell every pooled connection is stale, and the retry must not take another of them.
    # A plain-HTTP server on loopback: the first two connections are closed unanswered, the next answered.
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[int] = []

    def serve() -> None:
        while len(accepted) < 3:
            conn, _ = server.accept()
            accepted.append(1)
            if len(accepted) <= 2:
                conn.close()
                continue
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = sending.ApiClient(authenticating.Credentials(server=f"http://127.0.0.1:{port}"))
    try:
        # two pooled connections, both closed by the server while idle
        for _ in range(2):
            client._give_back(client._open(None, 5.0))
        response = client.send("GET", "/api")
        assert (response.status, response.data) == (200, b"{}")
    finally:
        client.close()
        server.close()
    thread.join(5)
    assert len(accepted) == 3


def test_a_pooled_connection_the_server_closed_is_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    closed = threading.Event()

    def serve() -> None:
        first, _ = server.accept()
        first.close()  # idle too long: the server closes it
        closed.set()
        second, _ = server.accept()
        second.recv(65536)
        second.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        second.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    reads: list[int] = []
    original = sending._read_response

    def counting(reader: Any, method: str) -> tuple[sending.Response, bool]:
        reads.append(1)
        return original(reader, method)

    monkeypatch.setattr(sending, "_read_response", counting)
    client = sending.ApiClient(authenticating.Credentials(server=f"http://127.0.0.1:{port}"))
    try:
        client._give_back(client._open(None, 5.0))
        assert closed.wait(5)
        deadline = time.monotonic() + 5
        while not sending._closed_by_peer(client._idle[0].sock) and time.monotonic() < deadline:
            time.sleep(0.01)  # the FIN on its way
        assert client.send("GET", "/api").data == b"{}"
        assert reads == [1]  # no attempt on the closed connection
    finally:
        client.close()
        server.close()
    thread.join(5)


def test_a_write_whose_answer_comes_back_through_a_watch_is_not_decoded() -> None:
    # A node label patch answers with the whole Node, which the node watch delivers anyway
    # (kube/labelling.py: thousands at start-up): requesting.request(decoded=False) skips it.
    class Answering:
        def send(self, method: str, path: str, **_: Any) -> sending.Response:
            return sending.Response(200, "OK", {}, b'{"kind": "Node", cut')

    client: Any = Answering()
    assert requesting.request(client, "PATCH", "/api/v1/nodes/n1", body={}, decoded=False) is None
    with pytest.raises(ValueError):
        requesting.request(client, "PATCH", "/api/v1/nodes/n1", body={})
