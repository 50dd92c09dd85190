"""We test these aspects of the demo, run as a user runs it (issue 31), each run on a fresh
local control plane of its own:

- `bash hack/demo.sh --once` runs to the end, several times in a row (``OCP_GPU_DEMO_RUNS``,
  2 by default: about 2 minutes each), with rc 0, and its output says what the demo is about:
  the GPU stack Ready on every GPU node, one driver DaemonSet per RHCOS version, the OpenShift
  upgrade leaving only the new version's DaemonSet, the driver upgrade done on every node, the
  policy ready; no traceback; its state directory removed, no process of its left;
- a failing step (kubectl missing from PATH) is explained: rc 1, the step, the command, the
  error, where the control plane's logs are (the state directory is kept, logs and all), and
  no traceback; nothing it started is left running;
- Ctrl-C (SIGINT) while the control plane starts and in the middle of the scenario stops
  everything the demo started and removes its temporary files: rc 130, no process left, its
  TMPDIR empty.

Where hack/demo.sh would set up another venv (pytest not run from this repository's .venv),
the runs take the same code path without the set-up: ``python -m ocp_gpu_harness.demo --once``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from ocp_gpu_harness import demo

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DEMO_RUNS = int(os.environ.get("OCP_GPU_DEMO_RUNS", "2"))
# A run takes about 2 minutes on an idle machine; each wait of the scenario gives up after
# demo.WAIT_SECONDS, so a stuck run fails with its explanation well before this.
RUN_TIMEOUT = 900
CODE_PATH = (sys.executable, "-m", "ocp_gpu_harness.demo")


@dataclass
class DemoRun:
    rc: int
    out: str
    err: str
    seconds: float
    tmpdir: Path

    def transcript(self) -> str:
        return (
            f"rc {self.rc} after {self.seconds:.0f}s\n--- stdout ---\n{self.out}\n--- stderr ---\n{self.err}"
        )


def _demo_command() -> list[str]:
    """hack/demo.sh when pytest runs from the repository's .venv (hack/test.sh), as a user runs it."""
    if Path(sys.prefix).resolve() == (REPO / ".venv").resolve():
        return ["bash", str(REPO / "hack" / "demo.sh")]
    return list(CODE_PATH)


def run_demo(
    command: list[str],
    tmp_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    interrupt_after: str | None = None,
    interrupt_delay: float = 0.0,
    timeout: float = RUN_TIMEOUT,
) -> DemoRun:
    """Run the demo with its own TMPDIR (so that what it leaves behind can be seen); with
    ``interrupt_after``, send SIGINT (Ctrl-C) ``interrupt_delay`` seconds after that text is
    on its stdout."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # NB: unbuffered, or the line to interrupt after would sit in the pipe's buffer.
    full_env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("OCP_GPU_KEEP_STATE", None)
    began = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Its own session: no terminal, and our own Ctrl-C stays ours.
        start_new_session=True,
    )
    out: list[str] = []
    err: list[str] = []
    interrupted = threading.Event()

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if interrupt_after and interrupt_after in line and not interrupted.is_set():
                interrupted.set()
                threading.Timer(interrupt_delay, proc.send_signal, (signal.SIGINT,)).start()

    def read_err() -> None:
        assert proc.stderr is not None
        err.extend(proc.stderr)

    readers = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for reader in readers:
        reader.start()
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(60)
    for reader in readers:
        reader.join(10)
    return DemoRun(rc, "".join(out), "".join(err), time.monotonic() - began, tmpdir)


def processes_mentioning(path: Path) -> list[str]:
    """Live processes whose command line names ``path`` (every process the demo starts names
    its state directory: etcd's data, the kubeconfigs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(f"{entry.name}: {cmdline[:160]}")
    return found


def assert_nothing_left(run: DemoRun) -> None:
    assert processes_mentioning(run.tmpdir) == [], run.transcript()
    assert sorted(p.name for p in run.tmpdir.iterdir()) == [], run.transcript()


def node_row(node: str, deploy_driver: str, driver_pod: str, upgrade: str) -> str:
    """A GPU node's row of the demo's table once everything is done: on the new RHCOS, the stack
    (toolkit, validator, plugin, GFD) Ready, 4 GPUs allocatable, schedulable."""
    cells = [node, "yes", re.escape(demo.RHCOS_NEXT), "matches", deploy_driver, re.escape(driver_pod)]
    cells += ["T V P G", "4", upgrade, "yes"]
    return "│ " + " +│ ".join(cells) + " +│"


@pytest.mark.timeout(RUN_TIMEOUT + 120)
@pytest.mark.parametrize("attempt", range(1, DEMO_RUNS + 1))
def test_the_demo_runs_to_the_end_as_a_user_runs_it(attempt: int, tmp_path: Path) -> None:
    run = run_demo([*_demo_command(), "--once"], tmp_path)
    print(f"demo run {attempt}: rc {run.rc} in {run.seconds:.0f}s")
    assert run.rc == 0, run.transcript()
    assert "Traceback" not in run.out + run.err, run.transcript()
    assert "demo failed" not in run.err, run.transcript()
    # The GPU stack Ready on each of the first five GPU nodes (driver, toolkit, device plugin).
    for node in range(1, 6):
        assert f"gpu-{node}: driver, toolkit, device plugin Ready: nvidia.com/gpu 4 allocatable" in run.out
    # One driver DaemonSet per RHCOS version.
    per_version = re.search(r"operator: driver DaemonSets, one per RHCOS version: (.*)", run.out)
    assert per_version, run.transcript()
    assert per_version.group(1).split(", ") == [
        f"nvidia-driver-daemonset-{demo.RHCOS_OLD}",
        f"nvidia-driver-daemonset-{demo.RHCOS_NEW}",
    ], run.transcript()
    # The OpenShift upgrade, then the driver upgrade, finished.
    assert (
        "upgrade done: each old version's DaemonSet was deleted once its last node had moved; "
        f"left: nvidia-driver-daemonset-{demo.RHCOS_NEXT}"
    ) in run.out, run.transcript()
    upgraded = run.out.find(f"driver {demo.NEXT_DRIVER} on every GPU node; every node upgrade-done")
    assert upgraded >= 0, run.transcript()
    # The last picture (after the driver upgrade): the policy ready, every GPU node's stack Ready.
    last = run.out[upgraded:]
    assert "state: ready" in last, run.transcript()
    assert (
        len(re.findall(node_row("gpu-[12346]", "true", f"{demo.NEXT_DRIVER} ready", "upgrade-done"), last))
        >= 5
    )
    # gpu-5, the admin's driver opt-out: no driver pod of ours, the rest of the stack Ready.
    assert re.search(node_row("gpu-5", "false", "-", "-"), last), run.transcript()
    assert re.search(r"demo done in \d+s: the scenario ran to the end", run.out), run.transcript()
    assert re.search(r"removed .*ocp-gpu-demo-", run.out), run.transcript()
    assert_nothing_left(run)


@pytest.mark.timeout(300)
def test_a_missing_kubectl_is_explained(tmp_path: Path) -> None:
    # PATH holds the venv's bin alone: python is there, kubectl is not (the control plane's
    # binaries are found by path).
    run = run_demo(
        [*CODE_PATH, "--once"], tmp_path, env={"PATH": str(Path(sys.executable).parent)}, timeout=240
    )
    assert run.rc == 1, run.transcript()
    assert "Traceback" not in run.out + run.err, run.transcript()
    assert "demo failed at step: install the ClusterPolicy CRD" in run.err, run.transcript()
    assert "error: kubectl not found (No such file or directory): install it or put it on PATH" in run.err
    assert re.search(r"command: kubectl --kubeconfig \S+admin.kubeconfig apply --server-side -f ", run.err)
    kept = re.search(r"state kept in (\S+): control plane logs in (\S+)/, kubeconfig ", run.err)
    assert kept, run.transcript()
    # The control plane's logs are where the message says, and were written.
    assert (Path(kept.group(2)) / "kube-apiserver.log").stat().st_size > 0
    assert processes_mentioning(run.tmpdir) == [], run.transcript()


# When to press Ctrl-C: after which line, how long after, and the line that must not come.
MOMENTS = {
    # The control plane's processes are being started (that takes several seconds).
    "while the control plane starts": (
        "building/locating the local control plane binaries",
        1.0,
        "control plane up",
    ),
    # The operator is at work: the policy was just created.
    "in the middle of the scenario": ("admin: kubectl apply cluster-policy", 0.0, "upgrade done"),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("after", "delay", "not_reached"), MOMENTS.values(), ids=MOMENTS.keys())
def test_ctrl_c_stops_everything_and_removes_its_files(
    after: str, delay: float, not_reached: str, tmp_path: Path
) -> None:
    run = run_demo(
        [*CODE_PATH, "--once"], tmp_path, interrupt_after=after, interrupt_delay=delay, timeout=240
    )
    assert run.rc == 130, run.transcript()
    assert not_reached not in run.out, f"interrupted too late: {run.transcript()}"
    assert "interrupted: the operator and the control plane it started are stopped" in run.err
    assert "Traceback" not in run.out + run.err, run.transcript()
    assert_nothing_left(run)
