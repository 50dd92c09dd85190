"""`ocp-gpu demo`: the operator at work on a local control plane, shown as it sees the cluster.

Starts a real control plane (etcd, kube-apiserver, controller-manager,
scheduler, kwok) in OpenShift mode, GPU nodes on two RHCOS versions plus CPU
nodes, installs the ClusterPolicy CRD and `cluster-policy`, runs `ocp-gpu run`
as a separate process, then plays a short scenario while a live table shows
nodes, labels, driver DaemonSets and the ClusterPolicy's status.  The end of the
scenario (or Ctrl-C) stops everything it started; `--follow` keeps the cluster up
for exploring until Ctrl-C.  The state directory (≈ 70 MB, including the CA and
admin keys) is removed on exit unless `--keep-state`, `OCP_GPU_KEEP_STATE=1` or an
explicit `--state-dir` asks to keep it.  Without a terminal, a snapshot is printed
only when it differs from the previous one, so a pipe or CI log is not flooded.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ocp_gpu.harness import binaries, openshift
from ocp_gpu.harness import nodes as fake_nodes
from ocp_gpu.harness.cluster import LocalControlPlane
from ocp_gpu.harness.operating import OperatorProcess
from ocp_gpu.model import apis, labels, operands

CRD = Path(__file__).resolve().parent / "crds" / "clusterpolicies.nvidia.com.yaml"
RHCOS_OLD = "416.94.202407030122-0"
RHCOS_NEW = "417.94.202410090854-0"
DTK_TAGS = {
    RHCOS_OLD: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "a" * 64,
    RHCOS_NEW: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "b" * 64,
}
RHCOS_NEXT = "418.94.202502250000-0"
NEXT_DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "c" * 64
NAMESPACE = labels.OPENSHIFT_NAMESPACE
NEXT_DRIVER = "550.127.05"


class Narrator:
    """The scenario's running commentary, shown under the table."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            self.lines.append(f"{time.strftime('%H:%M:%S')}  {line}")
            del self.lines[:-8]

    def text(self) -> Text:
        with self._lock:
            return Text("\n".join(self.lines))


def main(state_dir: Path | None, live: bool, follow: bool, keep_state: bool = False) -> int:
    console = Console()
    live = live and console.is_terminal
    if not console.is_terminal:
        # Logs and pipes: wide enough that the tables do not wrap.
        console = Console(width=150)
    keep = keep_state or state_dir is not None or os.environ.get("OCP_GPU_KEEP_STATE") == "1"
    console.print("[bold]ocp-gpu demo[/]: building/locating the local control plane binaries…")
    binaries.ensure_binaries()
    work = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="ocp-gpu-demo-"))
    try:
        _run_demo(console, work, live, follow)
    finally:
        if keep:
            console.print(f"state kept in {work} (control plane logs, operator log, kubeconfig, keys)")
        else:
            # NB: it holds the control plane's CA and admin private keys: never leave it behind.
            shutil.rmtree(work, ignore_errors=True)
            console.print(f"removed {work} (keep it with --keep-state or OCP_GPU_KEEP_STATE=1)")
    return 0


def _run_demo(console: Console, work: Path, live: bool, follow: bool) -> None:
    narrator = Narrator()
    # The caller removes (or keeps) `work`, so the control plane never deletes part of it.
    with LocalControlPlane(work / "cluster", keep_state=True) as control_plane:
        console.print(
            f"control plane up in {control_plane.startup_seconds:.1f}s; "
            f"kubeconfig: [cyan]{control_plane.kubeconfig}[/]"
        )
        api = control_plane.api_client()
        _prepare_cluster(control_plane, api, narrator)
        operator = OperatorProcess(
            control_plane.kubeconfig,
            NAMESPACE,
            work / "operator.log",
            # Re-check upgrades every 2 s rather than 10 s: the demo has no time to lose.
            env={"OCP_GPU_UPGRADE_RECHECK_SECONDS": "2"},
        ).start()
        narrator.say(f"operator started (pid {operator.pid}); log: {operator.log_path}")
        try:
            with _display(console, live, lambda: _render(api, operator, narrator)):
                _scenario(api, narrator)
                if follow:
                    narrator.say(
                        "scenario done: explore with "
                        f"`kubectl --kubeconfig {control_plane.kubeconfig} get nodes --show-labels`; "
                        "Ctrl-C stops everything"
                    )
                    while True:
                        time.sleep(1)
                narrator.say("scenario done: stopping (run with --follow to keep the cluster up)")
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            operator.stop()
            console.print(_render(api, operator, narrator))
            console.print("stopping the operator and the control plane…")


def _prepare_cluster(control_plane: LocalControlPlane, api: client.ApiClient, narrator: Narrator) -> None:
    openshift.install_openshift_apis(api)
    openshift.set_driver_toolkit_tags(api, DTK_TAGS)
    subprocess.run(
        ["kubectl", "--kubeconfig", str(control_plane.kubeconfig), "apply", "--server-side", "-f", str(CRD)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "wait",
            "--for=condition=Established",
            "crd/clusterpolicies.nvidia.com",
        ],
        check=True,
        capture_output=True,
    )
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    fake_nodes.create_nodes(
        api,
        [
            # SIMULATION: the node agent advertises their GPUs once a device plugin pod is Ready there.
            *(fake_nodes.gpu_node(f"gpu-{i}", rhcos=RHCOS_OLD, gpus=4, simulated=True) for i in range(1, 4)),
            *(fake_nodes.gpu_node(f"gpu-{i}", rhcos=RHCOS_NEW, gpus=4, simulated=True) for i in range(4, 6)),
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
    _narrate_allocatable(core, narrator, [f"gpu-{i}" for i in range(1, 6)], 180)
    _wait(lambda: _policy_state(custom) == "ready", 120)
    narrator.say("operator: GPU nodes labelled nvidia.com/gpu.present and gpu.deploy.*; CPU nodes untouched")
    time.sleep(3)
    narrator.say("admin: kubectl label node gpu-5 nvidia.com/gpu.deploy.driver=false --overwrite")
    core.patch_node("gpu-5", {"metadata": {"labels": {labels.deploy_label("driver"): "false"}}})
    time.sleep(3)
    narrator.say("a new GPU node gpu-6 joins on the newer RHCOS")
    fake_nodes.create_nodes(api, [fake_nodes.gpu_node("gpu-6", rhcos=RHCOS_NEW, gpus=4, simulated=True)])
    _wait(lambda: (core.read_node("gpu-6").metadata.labels or {}).get(labels.GPU_PRESENT) == "true", 30)
    narrator.say("operator: gpu-6 labelled; gpu-5 keeps the admin's driver opt-out")
    time.sleep(3)
    _openshift_upgrade(api, narrator)


def _narrate_allocatable(
    core: client.CoreV1Api, narrator: Narrator, names: list[str], timeout: float
) -> None:
    """Say each node's GPUs as they become allocatable (driver -> toolkit -> device plugin Ready there)."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting and time.monotonic() < deadline:
        for name in list(waiting):
            gpus = (core.read_node(name).status.allocatable or {}).get("nvidia.com/gpu")
            if gpus:
                narrator.say(
                    f"{name}: driver, toolkit, device plugin Ready: nvidia.com/gpu {gpus} allocatable"
                )
                waiting.remove(name)
        time.sleep(0.5)


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
    apps = client.AppsV1Api(api)
    _wait(
        lambda: (
            len(
                apps.list_namespaced_daemon_set(
                    NAMESPACE, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
                ).items
            )
            == 1
        ),
        60,
    )
    narrator.say("upgrade done: each old version's DaemonSet was deleted once its last node had moved")
    time.sleep(3)
    _driver_upgrade(api, narrator)


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

    def rolled() -> bool:
        gpu = core.list_node(label_selector=f"{labels.GPU_PRESENT}=true,{labels.deploy_label('driver')}=true")
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{labels.APP}={labels.DRIVER_APP}").items
        current = [
            p
            for p in pods
            if p.spec.containers[0].image.split(":")[-1].startswith(NEXT_DRIVER)
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
        ]
        done = all((n.metadata.labels or {}).get(labels.UPGRADE_STATE) == "upgrade-done" for n in gpu.items)
        return done and len(current) == len(gpu.items)

    _wait(rolled, 180)
    narrator.say(
        f"driver {NEXT_DRIVER} on every GPU node; every node upgrade-done "
        "(kubectl get events | grep GPUDriverUpgrade shows each step)"
    )
    time.sleep(3)


def _policy_state(custom: client.CustomObjectsApi) -> str:
    try:
        obj = custom.get_cluster_custom_object(
            apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, labels.CLUSTER_POLICY_NAME
        )
    except client.exceptions.ApiException:
        return ""
    return str((obj.get("status") or {}).get("state", ""))


def _wait(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
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


def _render(api: client.ApiClient, operator: OperatorProcess, narrator: Narrator) -> Group:
    core = client.CoreV1Api(api)
    pods_by_node: dict[str, str] = {}
    for pod in core.list_namespaced_pod(NAMESPACE, label_selector=f"{labels.APP}={labels.DRIVER_APP}").items:
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
        # The driver version from the image tag (<version>-<os>).
        version = pod.spec.containers[0].image.rsplit(":", 1)[-1].split("-")[0]
        mark = "ready" if ready else ("terminating" if pod.metadata.deletion_timestamp else "starting")
        pods_by_node[pod.spec.node_name or ""] = f"{version} {mark}"
    # Which other operands are Ready on each node: T(oolkit) V(alidator) P(lugin) G(FD).
    stack_by_node: dict[str, set[str]] = {}
    short = {
        operands.CONTAINER_TOOLKIT.app: "T",
        operands.OPERATOR_VALIDATOR.app: "V",
        operands.DEVICE_PLUGIN.app: "P",
        operands.GPU_FEATURE_DISCOVERY.app: "G",
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
        sidecar = [c.image for c in ds.spec.template.spec.containers if c.name == operands.DTK_CONTAINER]
        dtk = (
            Text("tag missing", style="red")
            if lbl.get(labels.DTK_IMAGE_MISSING) == "true"
            else ("…" + sidecar[0][-12:] if sidecar else "-")
        )
        daemonsets.add_row(
            ds.metadata.name, dtk, str(ds.status.desired_number_scheduled), str(ds.status.number_ready)
        )
    return Group(nodes, daemonsets, _policy_panel(api, operator), Panel(narrator.text(), title="scenario"))


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


if __name__ == "__main__":
    sys.exit(main(None, live=True, follow=False))
