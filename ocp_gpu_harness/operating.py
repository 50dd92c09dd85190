"""Running the operator under test (or in the demo) as a real `ocp-gpu run` process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ocp_gpu.model import releases
from ocp_gpu.planning import leadership


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The line the operator logs when it stops because it lost its Lease (operator.py), then exits 1.
DEPOSED_LINE = "stopping: lease ended"
# The kubelet's first crash back-off is 10 s; the tests' Lease is shorter than that
# (tests/e2e/conftest.TEST_LEASE_S), so a restarted replica comes back sooner here.
RESTART_DELAY_S = 2.0


@dataclass(frozen=True)
class Exit:
    code: int
    deposed: bool


class OperatorProcess:
    """One `ocp-gpu run` process with its own log file and metrics port."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log_path: Path,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        image_env: Mapping[str, str] | None = None,
        identity: str | None = None,
        restart_on_exit: bool = False,
    ) -> None:
        """``cwd``: where the process starts; `python -m` puts it first on sys.path, so a
        directory holding another ``ocp_gpu/`` (e.g. a commit's, extracted) is what runs.

        ``identity``: its leader Lease identity, as $POD_NAME (the pod's name in a cluster);
        None: one of its own, so every process is another pod unless a test restarts
        "the same pod" by passing the identity of an earlier one (`OperatorProcess.identity`).

        ``restart_on_exit``: as the kubelet restarts the container of the operator's Deployment
        (restartPolicy Always): a process that exits on its own (not by `stop` or `kill`) is
        started again, same identity, after `RESTART_DELAY_S`. The operator counts on it: a
        deposed leader exits non-zero "so the Deployment restarts us as a standby" (operator.py),
        and under load a test Lease can be lost. Each such exit is in `exits`; `crashes` are
        those that were not a deposition."""
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_path = log_path
        self.port = free_port()
        self._args = list(extra_args)
        self._env = dict(env or {})
        self._cwd = cwd
        # The *_IMAGE variables, exactly (the built-in release defaults fill the rest);
        # None: all of the release's, as the CSV and the Helm chart set them.
        self._image_env = releases.RELEASE_IMAGES if image_env is None else dict(image_env)
        self.identity = identity or f"ocp-gpu-operator-{os.urandom(4).hex()}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._restart_on_exit = restart_on_exit
        self._stopping = threading.Event()
        self._spawning = threading.Lock()
        self._log_offset = 0
        self.exits: list[Exit] = []
        # time.monotonic() when the process was started (None: not yet): what seconds-to-ready count from
        self.started_at: float | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def start(self) -> OperatorProcess:
        self._stopping.clear()
        self._spawn()
        if self._restart_on_exit:
            threading.Thread(target=self._restart_when_exited, name="operator-restarts", daemon=True).start()
        return self

    @property
    def crashes(self) -> list[Exit]:
        """Exits on its own that were not a deposition (a lost Lease)."""
        return [e for e in self.exits if not e.deposed]

    def _restart_when_exited(self) -> None:
        while not self._stopping.is_set():
            proc = self._proc
            assert proc is not None
            code = proc.wait()
            if self._stopping.is_set():
                return
            since_start = self.log()[self._log_offset :]
            self.exits.append(Exit(code, deposed=code == 1 and DEPOSED_LINE in since_start))
            if self._stopping.wait(RESTART_DELAY_S):
                return
            with self._spawning:
                # NB: under the lock `_signal` takes first: a stop now cannot miss the new process.
                if self._stopping.is_set():
                    return
                self._spawn()

    def _spawn(self) -> None:
        # As the CSV and the Helm chart set them; a test may override any.
        inherited = {k: v for k, v in os.environ.items() if k not in releases.RELEASE_IMAGES}
        env = {**inherited, **self._image_env, leadership.POD_NAME_ENV: self.identity, **self._env}
        # NB: the operator must not inherit a KUBECONFIG pointing elsewhere.
        env.pop("KUBECONFIG", None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = len(self.log())
        log = self.log_path.open("ab")
        self.started_at = time.monotonic()
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ocp_gpu.cli",
                "run",
                "--kubeconfig",
                str(self.kubeconfig),
                "--namespace",
                self.namespace,
                "--metrics-bind",
                f"127.0.0.1:{self.port}",
                *self._args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self._cwd,
            start_new_session=True,
        )
        log.close()

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def http_get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode()

    def wait_http(self, path: str = "/healthz", timeout: float = 60) -> None:
        """Wait until `path` answers 200. Budget 60 s: the interpreter, kopf and the client
        imported and the server up take a few seconds of CPU, ten times that in wall time on a
        loaded 2-core machine."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"operator exited early:\n{self.log()[-3000:]}")
            try:
                if self.http_get(path)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"operator {path} not up after {timeout}s:\n{self.log()[-3000:]}")

    def role(self) -> str:
        """'leader', 'standby' or 'starting', from /healthz."""
        return self.http_get("/healthz")[1].strip()

    def metric(self, name: str) -> float | None:
        """One un-labelled sample from /metrics (None if absent)."""
        for line in self.http_get("/metrics")[1].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM and wait (graceful: the lease is released)."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL: a crash; the lease is left to expire."""
        return self._signal(signal.SIGKILL, 10)

    def _signal(self, signum: int, timeout: float) -> int | None:
        with self._spawning:
            self._stopping.set()
        if self._proc is None or self._proc.poll() is not None:
            return None if self._proc is None else self._proc.returncode
        os.killpg(self._proc.pid, signum)
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            return self._proc.wait(5)
