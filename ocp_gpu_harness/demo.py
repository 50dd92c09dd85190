"""The demo (`hack/demo.sh`, `python -m ocp_gpu_harness.demo`): the operator at work on a local
control plane, shown as it sees the cluster.

Starts a real control plane (etcd, kube-apiserver, controller-manager,
scheduler, kwok) in OpenShift mode, GPU nodes on two RHCOS versions plus CPU
nodes, installs the ClusterPolicy CRD and `cluster-policy`, runs `ocp-gpu run`
as a separate process, then plays a short scenario while a live table shows
nodes, labels, driver DaemonSets and the ClusterPolicy's status.  The end of the
scenario (or Ctrl-C) stops everything it started; `--follow` keeps the cluster up
for exploring until Ctrl-C.  The state directory (≈ 70 MB, including the CA and
admin keys) is removed on exit unless `--keep-state`, `OCP_GPU_KEEP_STATE=1` or an
explicit `--state-dir` asks to keep it.  Without a terminal, the scenario's lines are
printed as they are said and a snapshot of the tables only when it differs from the
previous one, so a pipe or CI log is not flooded.

Failures are explained, never a traceback: each step is named (`_step`), and a step that
fails prints the step, the command and its stderr (or what a wait last saw), the
operator's fate, and where the state directory with the control plane's logs is (kept on
failure), then exits 1.  Ctrl-C (or SIGTERM) at any moment stops what the demo started and
removes its temporary files (exit 130); a second Ctrl-C while it stops is ignored.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ocp_gpu.model import apis, labels, operand_types
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import binaries, crds, openshift
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

CRD = Path(__file__).resolve().parents[1] / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"
CRD_NAME = f"{apis.POLICY_PLURAL}.{apis.POLICY_GROUP}"
RHCOS_OLD = "416.94.202407030122-0"
RHCOS_NEW = "417.94.202410090854-0"
DTK_TAGS = {
    RHCOS_OLD: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "a" * 64,
    RHCOS_NEW: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "b" * 64,
}
RHCOS_NEXT = "418.94.202502250000-0"
NEXT_DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "c" * 64
NAMESPACE = labels.OPENSHIFT_NAMESPACE
# Every driver pod (a DTK one's app is its DaemonSet's name).
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
NEXT_DRIVER = "550.127.05"
# How long the scenario waits for the operator at each step before it fails, naming the step: long
# enough for a loaded laptop (a step takes seconds on an idle one), short of hanging for ever.
WAIT_SECONDS = 300.0


class Narrator:
    """The scenario's running commentary: under the live table, or printed as it is said
    (``echo``) where there is no terminal."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._echo = echo

    def say(self, line: str) -> None:
        stamped = f"{time.strftime('%H:%M:%S')}  {line}"
        with self._lock:
            self.lines.append(stamped)
            del self.lines[:-8]
        if self._echo is not None:
            self._echo(stamped)

    def text(self) -> Text:
        with self._lock:
            return Text("\n".join(self.lines))


class StepFailed(Exception):
    """A step of the demo failed: what the user is shown instead of a traceback."""

    def __init__(self, reason: str, command: Sequence[str] = (), stderr: str = "", step: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.command = tuple(str(part) for part in command)
        self.stderr = stderr
        self.step = step
        # Where to look next (the operator's fate, a saved traceback), one line each.
        self.notes: list[str] = []
        # An unexpected error's traceback: saved in the state directory, not shown.
        self.traceback = ""


# Seconds after which a Ctrl-C that came where it could not be raised is sent again.
RAISE_AGAIN_S = 0.1


class _Interrupts:
    """Ctrl-C (or SIGTERM, SIGHUP) interrupts the demo once; the next ones are ignored while it
    stops what it started, so the stopping is never cut short (it takes seconds: every process
    gets SIGTERM, then SIGKILL after a grace period)."""

    def __init__(self) -> None:
        self.stopping = False
        self.interrupted = False
        # Sends `signum` again to this process a moment later (a test replaces it).
        self.send_again: Callable[[int], object] = lambda signum: threading.Timer(
            RAISE_AGAIN_S, os.kill, (os.getpid(), signum)
        ).start()

    def _handle(self, signum: int, frame: types.FrameType | None) -> None:
        if self.stopping:
            # NB: os.write, not print: a signal handler may run in the middle of a print.
            os.write(2, b"\nstill stopping what the demo started: one moment\n")
            return
        self.interrupted = True
        if frame is not None and frame.f_code.co_filename == logging.__file__:
            # NB: raised here, the KeyboardInterrupt would be lost: logging's lock hooks run
            # around every fork (os.register_at_fork), where an exception is printed and
            # dropped, and a Ctrl-C while the control plane's processes were forked left the
            # demo running to the end (a stress run of tests/e2e/test_demo.py).  Once out of it.
            self.send_again(signum)
            return
        self.stopping = True
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            # Signal handlers can only be set from the main thread (tests may call main elsewhere).
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {signum: signal.signal(signum, self._handle) for signum in signals}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def main(state_dir: Path | None, live: bool, follow: bool, keep_state: bool = False) -> int:
    """Run the demo; 0 when the scenario ran to the end (or `follow` ended with Ctrl-C after it),
    1 when a step failed (explained on stderr, state directory kept), 130 when interrupted."""
    console = Console()
    live = live and console.is_terminal
    if not console.is_terminal:
        # Logs and pipes: wide enough that the tables do not wrap, and lines (paths) never cut.
        console = Console(width=150, soft_wrap=True)
    errors = Console(stderr=True, width=None if console.is_terminal else 150, highlight=False)
    keep = keep_state or state_dir is not None or os.environ.get("OCP_GPU_KEEP_STATE") == "1"
    interrupts = _Interrupts()
    work: Path | None = None
    failure: StepFailed | None = None
    scenario_done = threading.Event()
    began = time.monotonic()
    with interrupts.installed():
        try:
            with _step("locate (or build) the local control plane binaries"):
                console.print("[bold]ocp-gpu demo[/]: building/locating the local control plane binaries…")
                binaries.ensure_binaries()
            work = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="ocp-gpu-demo-"))
            with _step("run the demo"):
                _run_demo(console, work, live, follow, interrupts, scenario_done)
        except StepFailed as failed:
            failure = failed
        except KeyboardInterrupt:
            pass
        finally:
            # Whatever comes next (a failure's report, the removal) must not be cut short.
            interrupts.stopping = True
        if failure is not None:
            _report_failure(errors, failure, work)
            return 1
        if work is not None:
            if keep:
                console.print(f"state kept in {work} (control plane logs, operator log, kubeconfig, keys)")
            else:
                # NB: it holds the control plane's CA and admin private keys: never leave it behind.
                shutil.rmtree(work, ignore_errors=True)
                console.print(f"removed {work} (keep it with --keep-state or OCP_GPU_KEEP_STATE=1)")
        if interrupts.interrupted and not (follow and scenario_done.is_set()):
            errors.print("interrupted: the operator and the control plane it started are stopped")
            return 130
    console.print(f"demo done in {time.monotonic() - began:.0f}s: the scenario ran to the end")
    return 0


def _report_failure(errors: Console, failure: StepFailed, work: Path | None) -> None:
    """What failed, the command and its stderr, and where the logs are: no traceback."""
    lines = [
        f"[bold red]demo failed[/] at step: [bold]{escape(failure.step)}[/]",
        f"  error: {escape(failure.reason)}",
    ]
    if failure.command:
        lines.append(f"  command: {escape(shlex.join(failure.command))}")
    if failure.stderr.strip():
        lines.append("  stderr:")
        lines += [f"    {escape(line)}" for line in failure.stderr.strip().splitlines()[-30:]]
    lines += [f"  {escape(note)}" for note in failure.notes]
    if work is not None and failure.traceback:
        saved = work / "demo-error.txt"
        with contextlib.suppress(OSError):
            saved.write_text(failure.traceback)
            lines.append(f"  the traceback, for a bug report: {saved}")
    if work is None:
        lines.append("  no state directory was created yet")
    else:
        cluster = work / "cluster"
        operator_log = work / "operator.log"
        lines.append(
            f"  state kept in {work}: control plane logs in {cluster / 'logs'}/, "
            + (f"operator log {operator_log}, " if operator_log.exists() else "")
            + f"kubeconfig {cluster / 'kubeconfigs' / 'admin.kubeconfig'}"
        )
        lines.append(f"  (it holds the local cluster's CA and admin keys: rm -r {work} when done)")
    errors.print("\n".join(lines), soft_wrap=True)


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    """Name what the demo is doing, so that a failure inside says which step failed."""
    try:
        yield
    except StepFailed as failed:
        failed.step = failed.step or name
        raise
    except client.exceptions.ApiException as error:
        raise StepFailed(
            f"the API server answered {error.status} {error.reason}: {_api_message(error)}", step=name
        ) from error
    except Exception as error:
        unexpected = StepFailed(f"{type(error).__name__}: {error}", step=name)
        unexpected.traceback = traceback.format_exc()
        raise unexpected from error


def _api_message(error: client.exceptions.ApiException) -> str:
    try:
        return str(json.loads(error.body or "").get("message", error.body))
    except (ValueError, AttributeError):
        return str(error.body)


def _run(command: Sequence[str], timeout: float = 120) -> str:
    """Run a command; its stdout, or `StepFailed` with the command and its stderr."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as error:
        raise StepFailed(
            f"{command[0]} not found ({error.strerror}): install it or put it on PATH", command
        ) from error
    except subprocess.TimeoutExpired as error:
        stderr = (
            error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr or ""
        )
        raise StepFailed(f"no answer after {timeout:.0f}s", command, stderr) from error
    if done.returncode != 0:
        raise StepFailed(f"exit code {done.returncode}", command, done.stderr)
    return done.stdout


def _run_demo(
    console: Console,
    work: Path,
    live: bool,
    follow: bool,
    interrupts: _Interrupts,
    scenario_done: threading.Event,
) -> None:
    narrator = Narrator(
        echo=None if live else lambda line: console.print(line, markup=False, highlight=False)
    )
    operator: OperatorProcess | None = None
    with contextlib.ExitStack() as stack:
        try:
            with _step("start the local control plane"):
                # The caller removes (or keeps) `work`, so the control plane never deletes part of it.
                control_plane = stack.enter_context(LocalControlPlane(work / "cluster", keep_state=True))
            console.print(
                f"control plane up in {control_plane.startup_seconds:.1f}s; "
                f"kubeconfig: [cyan]{control_plane.kubeconfig}[/]"
            )
            api = stack.enter_context(control_plane.api_client())
            _prepare_cluster(control_plane, api, narrator)
            with _step("start the operator (ocp-gpu run)"):
                operator = OperatorProcess(
                    control_plane.kubeconfig,
                    NAMESPACE,
                    work / "operator.log",
                    # Re-check upgrades every 2 s rather than 10 s: the demo has no time to lose.
                    env={"OCP_GPU_UPGRADE_RECHECK_SECONDS": "2"},
                )
                stack.callback(operator.stop)
                operator.start()
                operator.wait_http("/healthz", timeout=120)
            narrator.say(f"operator started (pid {operator.pid}); log: {operator.log_path}")
            running = operator
            with _display(console, live, lambda: _render(api, running, narrator if live else None)):
                _scenario(api, narrator)
                scenario_done.set()
                if follow:
                    narrator.say(
                        "scenario done: explore with "
                        f"`kubectl --kubeconfig {control_plane.kubeconfig} get nodes --show-labels`; "
                        "Ctrl-C stops everything"
                    )
                    # Ctrl-C is how --follow ends: not an interruption of the scenario.
                    with contextlib.suppress(KeyboardInterrupt):
                        while True:
                            time.sleep(1)
                else:
                    narrator.say("scenario done: stopping (run with --follow to keep the cluster up)")
                    time.sleep(1)
            # The last picture, tables and all, before everything stops.
            with contextlib.suppress(Exception):
                console.print(_render(api, operator, narrator if live else None))
        except StepFailed as failed:
            if operator is not None:
                failed.notes += _operator_notes(operator)
            raise
        finally:
            # Stopping (the operator, then the control plane) must not be cut short by a second Ctrl-C.
            interrupts.stopping = True
            console.print("stopping the operator and the control plane…")


def _operator_notes(operator: OperatorProcess) -> list[str]:
    """The operator's fate, for a failure report: it is often the reason a wait timed out."""
    if operator.running():
        return [f"operator: running (pid {operator.pid}); log: {operator.log_path}"]
    tail = operator.log().splitlines()[-15:]
    return [
        f"operator: exited (pid {operator.pid}); last lines of {operator.log_path}:",
        *(f"  {line}" for line in tail),
    ]


def _prepare_cluster(control_plane: LocalControlPlane, api: client.ApiClient, narrator: Narrator) -> None:
    with _step("install the OpenShift APIs (ClusterVersion, Proxy, ImageStream) and the Driver Toolkit tags"):
        openshift.install_openshift_apis(api)
        openshift.set_driver_toolkit_tags(api, DTK_TAGS)
    with _step("install the ClusterPolicy CRD"):
        _run(
            [
                "kubectl",
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "apply",
                "--server-side",
                "-f",
                str(CRD),
            ]
        )
        # NB: polled, not `kubectl wait` (harness/crds.py says why).
        crds.wait_until_served(api, [CRD_NAME])
    with _step(f"create namespace {NAMESPACE} and the nodes"):
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        fake_nodes.create_nodes(
            api,
            [
                # SIMULATION: the node agent advertises their GPUs once a device plugin pod is Ready there.
                *(
                    fake_nodes.gpu_node(f"gpu-{i}", rhcos=RHCOS_OLD, gpus=4, simulated=True)
                    for i in range(1, 4)
                ),
                *(
                    fake_nodes.gpu_node(f"gpu-{i}", rhcos=RHCOS_NEW, gpus=4, simulated=True)
                    for i in range(4, 6)
                ),
                fake_nodes.cpu_node("cpu-1"),
                fake_nodes.cpu_node("cpu-2"),
            ],
        )
    narrator.say(
        f"cluster is 'OpenShift': 5 GPU nodes on RHCOS {RHCOS_OLD} (3) and {RHCOS_NEW} (2), 2 CPU nodes"
    )


def _scenario(api: client.ApiClient, narrator: Narrator) -> None:
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    time.sleep(2)
    gpu_nodes = [f"gpu-{i}" for i in range(1, 6)]
    with _step("create cluster-policy and wait for the GPU stack to be Ready on every GPU node"):
        narrator.say("admin: kubectl apply cluster-policy")
        custom.create_cluster_custom_object(
            apis.POLICY_GROUP,
            apis.POLICY_VERSION,
            apis.POLICY_PLURAL,
            {
                "apiVersion": apis.POLICY_API_VERSION,
                "kind": apis.POLICY_KIND,
                "metadata": {"name": labels.CLUSTER_POLICY_NAME},
                "spec": {"operator": {"use_ocp_driver_toolkit": True}, "driver": {"version": "550.90.07"}},
            },
        )
        _narrate_allocatable(core, narrator, gpu_nodes, WAIT_SECONDS)
        _wait(
            "cluster-policy to be ready",
            lambda: _policy_state(custom) == "ready",
            WAIT_SECONDS,
            lambda: f"state {_policy_state(custom)!r}",
        )
        narrator.say(
            "operator: GPU nodes labelled nvidia.com/gpu.present and gpu.deploy.*; CPU nodes untouched"
        )
        narrator.say(
            f"operator: driver DaemonSets, one per RHCOS version: {', '.join(_driver_daemonsets(api))}"
        )
    time.sleep(3)
    with _step("opt gpu-5 out of the driver"):
        narrator.say("admin: kubectl label node gpu-5 nvidia.com/gpu.deploy.driver=false --overwrite")
        core.patch_node("gpu-5", {"metadata": {"labels": {labels.deploy_label("driver"): "false"}}})
    time.sleep(3)
    with _step("add GPU node gpu-6 on the newer RHCOS"):
        narrator.say("a new GPU node gpu-6 joins on the newer RHCOS")
        fake_nodes.create_nodes(api, [fake_nodes.gpu_node("gpu-6", rhcos=RHCOS_NEW, gpus=4, simulated=True)])
        _wait(
            "the operator to label gpu-6 nvidia.com/gpu.present=true",
            lambda: (core.read_node("gpu-6").metadata.labels or {}).get(labels.GPU_PRESENT) == "true",
            WAIT_SECONDS,
        )
        narrator.say("operator: gpu-6 labelled; gpu-5 keeps the admin's driver opt-out")
    time.sleep(3)
    with _step(f"OpenShift upgrade of the GPU pool to RHCOS {RHCOS_NEXT}"):
        _openshift_upgrade(api, narrator)
    time.sleep(3)
    with _step(f"driver upgrade to {NEXT_DRIVER}"):
        _driver_upgrade(api, narrator)
    time.sleep(3)


def _narrate_allocatable(
    core: client.CoreV1Api, narrator: Narrator, names: list[str], timeout: float
) -> None:
    """Say each node's GPUs as they become allocatable (driver -> toolkit -> device plugin Ready there)."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting:
        for name in list(waiting):
            gpus = (core.read_node(name).status.allocatable or {}).get("nvidia.com/gpu")
            if gpus:
                narrator.say(
                    f"{name}: driver, toolkit, device plugin Ready: nvidia.com/gpu {gpus} allocatable"
                )
                waiting.remove(name)
        if waiting and time.monotonic() > deadline:
            raise StepFailed(
                f"timed out after {timeout:.0f}s waiting for nvidia.com/gpu to be allocatable on "
                + ", ".join(waiting)
            )
        time.sleep(0.5)


def _driver_daemonsets(api: client.ApiClient) -> list[str]:
    """The driver DaemonSets' names, sorted."""
    found = client.AppsV1Api(api).list_namespaced_daemon_set(
        NAMESPACE, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
    )
    return sorted(ds.metadata.name for ds in found.items)


def _openshift_upgrade(api: client.ApiClient, narrator: Narrator) -> None:
    """An OpenShift upgrade as the cluster lives it: new DTK tag, then MCO rolls the pool."""
    narrator.say(f"OpenShift upgrade starts: the release adds driver-toolkit:{RHCOS_NEXT}")
    openshift.set_driver_toolkit_tags(api, {**DTK_TAGS, RHCOS_NEXT: NEXT_DTK})
    time.sleep(2)
    pool = sorted(
        node.metadata.name
        for node in client.CoreV1Api(api).list_node(label_selector=f"{labels.NFD_NVIDIA_PCI}=true").items
    )
    narrator.say(f"MCO rolls the GPU pool to RHCOS {RHCOS_NEXT}, one node at a time (maxUnavailable 1)")

    def step(node: str, phase: str) -> None:
        if phase in (fake_nodes.PHASE_CORDON, fake_nodes.PHASE_UPDATE, fake_nodes.PHASE_DONE):
            narrator.say(f"MCO: {node} {phase}")
            time.sleep(1.5)

    fake_nodes.simulate_mco_update(api, pool, RHCOS_NEXT, max_unavailable=1, on_step=step)
    # Only the new version's DaemonSet is left once the old versions' last nodes have moved.
    _wait(
        f"the driver DaemonSets to be the one of RHCOS {RHCOS_NEXT} alone",
        lambda: [RHCOS_NEXT in name for name in _driver_daemonsets(api)] == [True],
        WAIT_SECONDS,
        lambda: f"driver DaemonSets {_driver_daemonsets(api)}",
    )
    narrator.say(
        "upgrade done: each old version's DaemonSet was deleted once its last node had moved; "
        f"left: {', '.join(_driver_daemonsets(api))}"
    )


def _driver_upgrade(api: client.ApiClient, narrator: Narrator) -> None:
    """The seed's driver upgrade: patch the version, watch the upgrade controller roll it node by node."""
    narrator.say(
        "admin: kubectl patch clusterpolicy/cluster-policy --type='json' "
        f'-p=\'[{{"op": "replace", "path": "/spec/driver/version", "value":"{NEXT_DRIVER}"}}]\''
    )
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        apis.POLICY_GROUP,
        apis.POLICY_VERSION,
        apis.POLICY_PLURAL,
        labels.CLUSTER_POLICY_NAME,
        {"spec": {"driver": {"version": NEXT_DRIVER}}},
    )
    narrator.say(
        "upgrade controller: one node at a time (maxParallelUpgrades 1): cordon, delete GPU pods, "
        "restart the driver pod, uncordon"
    )
    core = client.CoreV1Api(api)

    def driver_nodes() -> list[client.V1Node]:
        selector = f"{labels.GPU_PRESENT}=true,{labels.deploy_label('driver')}=true"
        return list(core.list_node(label_selector=selector).items)

    def rolled() -> bool:
        gpu = driver_nodes()
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=DRIVER_PODS).items
        current = [
            p
            for p in pods
            if p.spec.containers[0].image.split(":")[-1].startswith(NEXT_DRIVER)
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
        ]
        done = all((n.metadata.labels or {}).get(labels.UPGRADE_STATE) == "upgrade-done" for n in gpu)
        return done and len(current) == len(gpu)

    def upgrade_states() -> str:
        return ", ".join(
            f"{n.metadata.name} {(n.metadata.labels or {}).get(labels.UPGRADE_STATE, '-')}"
            for n in driver_nodes()
        )

    _wait(
        f"driver {NEXT_DRIVER} Ready and upgrade-done on every GPU node", rolled, WAIT_SECONDS, upgrade_states
    )
    narrator.say(
        f"driver {NEXT_DRIVER} on every GPU node; every node upgrade-done "
        "(kubectl get events | grep GPUDriverUpgrade shows each step)"
    )


def _policy_state(custom: client.CustomObjectsApi) -> str:
    try:
        obj = custom.get_cluster_custom_object(
            apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, labels.CLUSTER_POLICY_NAME
        )
    except client.exceptions.ApiException:
        return ""
    return str((obj.get("status") or {}).get("state", ""))


def _wait(
    what: str, predicate: Callable[[], bool], timeout: float, describe: Callable[[], str] | None = None
) -> None:
    """Poll until ``predicate()``; `StepFailed` naming ``what`` (and what ``describe`` sees) on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            seen = ""
            if describe is not None:
                with contextlib.suppress(Exception):
                    seen = f"; last seen: {describe()}"
            raise StepFailed(f"timed out after {timeout:.0f}s waiting for {what}{seen}")
        time.sleep(0.3)


@contextlib.contextmanager
def _display(console: Console, live: bool, render: Callable[[], Any]) -> Iterator[None]:
    """A live table on a terminal; periodic snapshots otherwise (CI logs, pipes)."""
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        show: Callable[[], None]
        if live:
            view = stack.enter_context(Live(render(), console=console, refresh_per_second=2))
            interval = 0.5

            def show() -> None:
                view.update(render())
        else:
            interval = 5.0
            last = [""]

            def show() -> None:
                # Only what changed: a pipe gets a snapshot per change, not one every 5 s.
                shown = _plain_text(render())
                if shown != last[0]:
                    last[0] = shown
                    console.print(shown, end="", markup=False, highlight=False)

        def refresh() -> None:
            while not stop.wait(interval):
                # NB: a transient API error must not kill the display.
                with contextlib.suppress(Exception):
                    show()

        thread = threading.Thread(target=refresh, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(2)


def _plain_text(renderable: Any) -> str:
    """What `renderable` prints on a 150-column non-terminal, as plain text."""
    buffer = io.StringIO()
    Console(file=buffer, width=150, no_color=True, force_terminal=False).print(renderable)
    return buffer.getvalue()


def _render(api: client.ApiClient, operator: OperatorProcess, narrator: Narrator | None) -> Group:
    """The tables and the policy panel; with ``narrator``, the scenario's last lines under them
    (a live terminal; elsewhere the narration is printed as it is said)."""
    core = client.CoreV1Api(api)
    pods_by_node: dict[str, str] = {}
    for pod in core.list_namespaced_pod(NAMESPACE, label_selector=DRIVER_PODS).items:
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
        # The driver version from the image tag (<version>-<os>).
        version = pod.spec.containers[0].image.rsplit(":", 1)[-1].split("-")[0]
        mark = "ready" if ready else ("terminating" if pod.metadata.deletion_timestamp else "starting")
        pods_by_node[pod.spec.node_name or ""] = f"{version} {mark}"
    # Which other operands are Ready on each node: T(oolkit) V(alidator) P(lugin) G(FD).
    stack_by_node: dict[str, set[str]] = {}
    short = {
        operand_catalog.CONTAINER_TOOLKIT.app: "T",
        operand_catalog.OPERATOR_VALIDATOR.app: "V",
        operand_catalog.DEVICE_PLUGIN.app: "P",
        operand_catalog.GPU_FEATURE_DISCOVERY.app: "G",
    }
    selector = f"{labels.APP} in ({','.join(short)})"
    for pod in core.list_namespaced_pod(NAMESPACE, label_selector=selector).items:
        if any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ()):
            stack_by_node.setdefault(pod.spec.node_name or "", set()).add(
                short[pod.metadata.labels[labels.APP]]
            )
    nodes = Table(title="Nodes, as the operator sees them", title_justify="left")
    for column in (
        "node",
        "GPU",
        "RHCOS (NFD label)",
        "osImage",
        "deploy.driver",
        "driver pod",
        "stack Ready",
        "nvidia.com/gpu",
        "upgrade",
        "sched",
    ):
        nodes.add_column(column, no_wrap=True)
    for node in sorted(core.list_node().items, key=lambda n: n.metadata.name):
        lbl = node.metadata.labels or {}
        rhcos = lbl.get(labels.OSTREE_VERSION, "-")
        os_image = node.status.node_info.os_image if node.status and node.status.node_info else ""
        nodes.add_row(
            node.metadata.name,
            "yes" if lbl.get(labels.NFD_NVIDIA_PCI) == "true" else "-",
            rhcos,
            Text("matches", style="green") if rhcos in os_image else Text("differs", style="red"),
            _styled(lbl.get(labels.deploy_label("driver"), "-")),
            pods_by_node.get(node.metadata.name, "-"),
            " ".join(x for x in short.values() if x in stack_by_node.get(node.metadata.name, ())) or "-",
            (node.status.allocatable or {}).get("nvidia.com/gpu", "-"),
            lbl.get(labels.UPGRADE_STATE, "-"),
            Text("cordoned", style="yellow") if node.spec.unschedulable else "yes",
        )
    daemonsets = Table(title="Driver DaemonSets (one per RHCOS version)", title_justify="left")
    for column in ("name", "DTK image", "desired", "ready"):
        daemonsets.add_column(column, no_wrap=True)
    for ds in sorted(
        client.AppsV1Api(api)
        .list_namespaced_daemon_set(NAMESPACE, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}")
        .items,
        key=lambda d: d.metadata.name,
    ):
        lbl = ds.metadata.labels or {}
        sidecar = [c.image for c in ds.spec.template.spec.containers if c.name == operand_types.DTK_CONTAINER]
        dtk = (
            Text("tag missing", style="red")
            if lbl.get(labels.DTK_IMAGE_MISSING) == "true"
            else ("…" + sidecar[0][-12:] if sidecar else "-")
        )
        daemonsets.add_row(
            ds.metadata.name, dtk, str(ds.status.desired_number_scheduled), str(ds.status.number_ready)
        )
    parts: list[Any] = [nodes, daemonsets, _policy_panel(api, operator)]
    if narrator is not None:
        parts.append(Panel(narrator.text(), title="scenario"))
    return Group(*parts)


def _policy_panel(api: client.ApiClient, operator: OperatorProcess) -> Panel:
    try:
        obj = client.CustomObjectsApi(api).get_cluster_custom_object(
            apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, labels.CLUSTER_POLICY_NAME
        )
    except client.exceptions.ApiException:
        return Panel("no ClusterPolicy yet", title="ClusterPolicy cluster-policy")
    status = obj.get("status") or {}
    lines = [
        f"state: {status.get('state', '-')}   platform: {status.get('platform', '-')}   "
        f"operator: {operator.role() if operator.running() else 'stopped'}"
    ]
    lines += [
        f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
        for c in status.get("conditions") or []
    ]
    return Panel("\n".join(lines), title="ClusterPolicy cluster-policy")


def _styled(value: str) -> Text:
    return Text(value, style="red" if value == "false" else ("green" if value == "true" else ""))


def cli(argv: list[str] | None = None) -> int:
    """`python -m ocp_gpu_harness.demo [options]` (what hack/demo.sh runs)."""
    parser = argparse.ArgumentParser(
        prog="hack/demo.sh", description="start a local control plane and show the operator at work"
    )
    parser.add_argument("--state-dir", type=Path, default=None, help="where to keep its state (kept on exit)")
    parser.add_argument(
        "--keep-state",
        action="store_true",
        help="keep the state directory on exit (also OCP_GPU_KEEP_STATE=1)",
    )
    parser.add_argument(
        "--no-live", action="store_true", help="print snapshots (on change) instead of a live table"
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep the cluster up after the scenario, until Ctrl-C"
    )
    # The default since the demo stops by itself; kept so existing scripts keep working.
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return main(
        state_dir=args.state_dir,
        live=not args.no_live,
        follow=args.follow and not args.once,
        keep_state=args.keep_state,
    )


if __name__ == "__main__":
    sys.exit(cli())
