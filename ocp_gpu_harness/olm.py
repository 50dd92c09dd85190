"""Operator Lifecycle Manager on the local control plane: OLM's own controllers as processes.

`olm` and `catalog` (built by hack/build-olm.sh from a checkout of
operator-framework/operator-lifecycle-manager: `SOURCE_HELP` says where) run against the
local API server with an admin kubeconfig, as they would in their Deployments; `opm serve` serves a file-based
catalog over gRPC on loopback, and a CatalogSource points at it with `spec.address`.

What is simulated, and why (docs/testing.md, "What is proved where"):

- kwok runs the Deployment pods OLM creates (they become Ready; nothing executes), so a
  CSV reaches `Succeeded` on the strength of the Deployment's status, as on a cluster.
- Bundles travel inside the catalog (olm.bundle.object properties, no bundle image):
  OLM then installs from the catalog's content instead of running an unpack Job that
  would pull the bundle image (no registry here).
- OLM's two controllers bind fixed ports for metrics and health (:8080 HTTP; :8443 with
  TLS); `catalog` gets a throwaway TLS pair so they do not collide.  Nothing reads those
  endpoints here, and a failed bind only logs (another program may hold :8080).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu_harness import binaries, cluster

BUILD_SCRIPT = Path("hack") / "build-olm.sh"
OLM_NAMESPACE = "olm"  # where OLM's controllers keep global catalogs and their leases


# Where hack/build-olm.sh looks for OLM's source, and how to put it there (its module is not
# served by the Go module proxy, so there is nothing to download it from but the repository).
SOURCE_HELP = (
    "OLM's source is absent: clone https://github.com/operator-framework/operator-lifecycle-manager "
    "into .cache/operator-lifecycle-manager in this repository, or set OCP_GPU_OLM_SRC to a checkout of it"
)


class OlmUnavailableError(RuntimeError):
    """OLM's source (or a build of it) is not on this machine."""


def _script(*args: str) -> str:
    out = subprocess.run(
        ["bash", str(binaries.repo_root() / BUILD_SCRIPT), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip()


def source_dir() -> Path | None:
    """OLM's source as hack/build-olm.sh finds it, or None."""
    found = _script("--print-src")
    return Path(found) if found else None


def bin_dir() -> Path:
    return Path(_script("--print-dir"))


def is_built() -> bool:
    directory = bin_dir()
    return all((directory / name).is_file() for name in ("olm", "catalog")) and (directory / "crds").is_dir()


def build(progress: Callable[[str], None] | None = None) -> Path:
    """Build `olm` and `catalog` (cached); OlmUnavailableError without a source."""
    if source_dir() is None:
        raise OlmUnavailableError(SOURCE_HELP)
    proc = subprocess.Popen(
        ["bash", str(binaries.repo_root() / BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if progress:
            progress(line)
    if proc.wait() != 0:
        raise OlmUnavailableError("hack/build-olm.sh failed (see its output above)")
    return bin_dir()


def crd_files() -> list[Path]:
    return sorted((bin_dir() / "crds").glob("*.yaml"))


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class _Proc:
    def __init__(self, name: str, args: Sequence[str], log: Path, env: dict[str, str]) -> None:
        self.name, self.log = name, log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(
                list(args), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class OlmProcesses:
    """`olm`, `catalog` and `opm serve` as processes; a context manager stopping them all."""

    def __init__(self, kubeconfig: Path, catalog_dir: Path, opm: Path, state_dir: Path) -> None:
        self.kubeconfig, self.catalog_dir, self.opm, self.state_dir = kubeconfig, catalog_dir, opm, state_dir
        self.catalog_port = 0
        self.busy_ports: list[int] = []
        self._procs: list[_Proc] = []

    def __enter__(self) -> OlmProcesses:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        # NB: OLM's controllers bind :8080 and :8443 (fixed) for health and metrics only; a
        # failed bind is logged, not fatal (cmd/olm/main.go, cmd/catalog/main.go), and nothing
        # here reads them: another program holding either port (a shared machine) is no reason
        # to stop.  `busy_ports` names them for the log.
        self.busy_ports = [port for port in (8080, 8443) if not port_is_free(port)]
        self.state_dir.mkdir(parents=True, exist_ok=True)
        bins = bin_dir()
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        tls = Path(tempfile.mkdtemp(prefix="olm-tls-", dir=self.state_dir))
        cert, key = cluster.write_serving_certificate(tls, "olm-catalog-operator", ["localhost"])
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.catalog_port = int(sock.getsockname()[1])
        self._procs.append(
            _Proc(
                "opm-serve",
                [
                    str(self.opm),
                    "serve",
                    str(self.catalog_dir),
                    "-p",
                    str(self.catalog_port),
                ],
                self.state_dir / "opm-serve.log",
                env,
            )
        )
        self._procs.append(
            _Proc(
                "olm",
                [
                    str(bins / "olm"),
                    "--namespace",
                    OLM_NAMESPACE,
                    "--writeStatusName",
                    "",
                    "--writePackageServerStatusName",
                    "",
                ],
                self.state_dir / "olm.log",
                env,
            )
        )
        self._procs.append(
            _Proc(
                "catalog",
                [
                    str(bins / "catalog"),
                    "--namespace",
                    OLM_NAMESPACE,
                    "--writeStatusName",
                    "",
                    "--tls-cert",
                    str(cert),
                    "--tls-key",
                    str(key),
                ],
                self.state_dir / "catalog.log",
                env,
            )
        )

    def serve_another(self, catalog_dir: Path) -> int:
        """Serve `catalog_dir` on a new port, stop the old catalog server; returns the new port.

        As a new catalog image does on a cluster (a new catalog pod, a new address): the test
        then points the CatalogSource's `spec.address` at the port this returns.
        """
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        old = [proc for proc in self._procs if proc.name == "opm-serve"]
        served = _Proc(
            "opm-serve",
            [str(self.opm), "serve", str(catalog_dir), "-p", str(port)],
            self.state_dir / f"opm-serve-{port}.log",
            {**os.environ, "KUBECONFIG": str(self.kubeconfig)},
        )
        for proc in old:
            proc.stop()
            self._procs.remove(proc)
        self._procs.insert(0, served)
        self.catalog_dir, self.catalog_port = catalog_dir, port
        return port

    def check(self) -> None:
        """Raise naming any process that exited, with its log tail."""
        for proc in self._procs:
            if proc.popen.poll() is not None:
                raise OlmUnavailableError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")

    def logs(self) -> dict[str, str]:
        return {proc.name: proc.tail(60) for proc in self._procs}

    def stop(self) -> None:
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()


def load_crds() -> Iterator[dict[str, Any]]:
    for path in crd_files():
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield document
