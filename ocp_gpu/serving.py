"""The operator's HTTP endpoints: /metrics, /healthz (alive) and /readyz (leading or standing by)."""

from __future__ import annotations

import dataclasses
import http.server
import threading

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ocp_gpu import metrics


@dataclasses.dataclass
class Health:
    """Flags the operator flips as it starts; read by the probe handlers."""

    alive: bool = True
    ready: bool = False
    role: str = "starting"


def serve(address: str, port: int, health: Health) -> http.server.ThreadingHTTPServer:
    """Start the endpoints on a daemon thread; returns the server (call .shutdown() to stop)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/livez"):
                self._reply(200 if health.alive else 500, f"{health.role}\n".encode(), "text/plain")
            elif path == "/readyz":
                self._reply(200 if health.ready else 503, f"{health.role}\n".encode(), "text/plain")
            else:
                self._reply(404, b"not found\n", "text/plain")

        def _reply(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            # Probes hit these endpoints every few seconds: keep them out of the log.
            return

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http-endpoints", daemon=True).start()
    return server
