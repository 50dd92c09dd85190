"""We test these aspects of `ocp-gpu validate cuda|plugin` on the local control plane,
run as a user with only the RBAC the validator documents (get/create/delete pods in
its namespace, get nodes):

- cuda: the vectorAdd pod is created on the validator's node by name (no scheduler),
  owned by the validator's own pod; completed -> cuda-ready written, failed -> markers
  removed and the termination message names the pod and its container's exit; still
  running at --timeout -> failure saying so; the pod is deleted either way, and a
  leftover from an earlier run is replaced; with no RuntimeClass (cdi.nriPluginEnabled) it asks
  the toolkit's NRI plugin for every GPU by annotation, as NVIDIA's;
- plugin: the node's GPU resource is found (nvidia.com/gpu or a renamed one), a pod
  requesting one goes through the real scheduler and starts on that node ->
  plugin-ready, also on a cordoned node (a driver upgrade validates before it
  uncordons); a node advertising no GPU, or one whose GPUs are all taken
  (Insufficient nvidia.com/gpu), fails with the scheduler's reason.

NB: kwok runs no containers.  A pod whose container would exit gets its end through
the harness's pod fates (`ocp-gpu.harness/pod-fate: succeeded|failed`, kwok stages,
see ocp_gpu_harness/stages.py), put on the workload pod with the validator's
--workload-annotation.  Without a fate, kwok keeps the pod Running forever.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.commands import validate
from ocp_gpu.planning.operands.validation import Component
from ocp_gpu.rendering import validation_workloads
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import polling, stages
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name

from .conftest import REACT_S

pytestmark = pytest.mark.e2e

ALL_MARKERS = ("driver-ready", "toolkit-ready", "cuda-ready", "plugin-ready")


@pytest.fixture
def node(kube: client.ApiClient) -> Iterator[Callable[..., str]]:
    """Make a Ready GPU node with `gpus` nvidia.com/gpu (or other allocatable resources)."""
    created: list[str] = []

    def make(gpus: int = 1, extra: dict[str, str] | None = None) -> str:
        manifest = fake_nodes.gpu_node(unique_name("val"), gpus=gpus)
        for key in ("capacity", "allocatable"):
            manifest["status"][key].update(extra or {})
        fake_nodes.create_nodes(kube, [manifest])
        created.append(manifest["metadata"]["name"])
        return str(manifest["metadata"]["name"])

    yield make
    fake_nodes.delete_nodes(kube, created)


@pytest.fixture
def validator_kubeconfig(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str
) -> Iterator[Path]:
    """A kubeconfig with exactly the RBAC the validator's docstring asks for."""
    user = unique_name("validator")
    rbac = client.RbacAuthorizationV1Api(kube)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": user},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create", "delete"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    )
    rbac.create_cluster_role(
        {"metadata": {"name": user}, "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )
    yield control_plane.make_kubeconfig(user)
    rbac.delete_cluster_role_binding(user)
    rbac.delete_cluster_role(user)


@pytest.fixture
def runtime_class(kube: client.ApiClient) -> Iterator[str]:
    """A RuntimeClass of our own (the operator's `nvidia` may come and go with other tests)."""
    name = unique_name("nvidia")
    node_api = client.NodeV1Api(kube)
    node_api.create_runtime_class({"metadata": {"name": name}, "handler": "nvidia"})
    yield name
    node_api.delete_runtime_class(name)


@pytest.fixture
def validations(tmp_path: Path) -> Path:
    directory = tmp_path / "validations"
    directory.mkdir()
    for marker in ALL_MARKERS:
        (directory / marker).write_text("")
    return directory


class Validator:
    """`ocp-gpu validate` as the validator pod runs it: its RBAC-limited kubeconfig, its
    validations directory and termination log, our RuntimeClass; and what it leaves behind."""

    def __init__(
        self, kube: client.ApiClient, namespace: str, kubeconfig: Path, validations: Path, runtime_class: str
    ) -> None:
        self.kube, self.namespace, self.kubeconfig = kube, namespace, kubeconfig
        self.validations, self.runtime_class = validations, runtime_class

    def run(
        self,
        component: str,
        node: str,
        *extra: str,
        env: dict[str, str] | None = None,
        runtime_class: str | None = None,
    ) -> int:
        """The exit status of one `ocp-gpu validate <component>` on `node`."""
        args = validate.parse(
            [
                component,
                "--kubeconfig",
                str(self.kubeconfig),
                "--validations-dir",
                str(self.validations),
                "--termination-log",
                str(self.termination_log),
                "--node-name",
                node,
                "--namespace",
                self.namespace,
                "--image",
                "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                # A test that should pass never needs the default 300 s; one that hangs fails sooner.
                "--timeout",
                "60",
                *extra,
            ]
        )
        runtime = self.runtime_class if runtime_class is None else runtime_class
        return validate.main(args, {"VALIDATOR_RUNTIME_CLASS": runtime, **(env or {})})

    @property
    def termination_log(self) -> Path:
        return self.validations.parent / "termination-log"

    def message(self) -> str:
        """What the validator wrote to its termination log."""
        return self.termination_log.read_text()

    def markers(self) -> set[str]:
        return {path.name for path in self.validations.iterdir()}

    def pods(self, component: Component) -> list[Any]:
        """The workload pods of that component's validation."""
        selector = f"app={validation_workloads.WORKLOAD_APPS[component]}"
        return list(
            client.CoreV1Api(self.kube).list_namespaced_pod(self.namespace, label_selector=selector).items
        )

    def wait_gone(self, component: Component) -> None:
        """The validator deletes its workload pod either way. Budget REACT_S: kwok removes a
        deleted pod within a second on a quiet machine."""
        polling.wait_for(
            lambda: not self.pods(component),
            REACT_S,
            what=f"{validation_workloads.WORKLOAD_APPS[component]} pods gone",
            interval=0.1,
        )

    @contextlib.contextmanager
    def watching(self, component: Component) -> Iterator[list[Any]]:
        """Every state of the workload pods while the block runs (the validator deletes them
        after): `_watch_pods`, stopped however the block ends."""
        seen: list[Any] = []
        stop = _watch_pods(self.kube, self.namespace, validation_workloads.WORKLOAD_APPS[component], seen)
        try:
            yield seen
        finally:
            stop()


@pytest.fixture
def validator(
    kube: client.ApiClient, namespace: str, validator_kubeconfig: Path, validations: Path, runtime_class: str
) -> Validator:
    return Validator(kube, namespace, validator_kubeconfig, validations, runtime_class)


def _fate(fate: str) -> tuple[str, str]:
    return ("--workload-annotation", f"{stages.FATE_ANNOTATION}={fate}")


# --- cuda ----------------------------------------------------------------------------------


def test_cuda_completed(
    kube: client.ApiClient,
    namespace: str,
    node: Callable[..., str],
    validator: Validator,
) -> None:
    name = node()
    core = client.CoreV1Api(kube)
    # The validator's own pod (POD_NAME, downward API) owns the workload.
    own = core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "validator"},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "v"}]},
        },
    )
    with validator.watching(Component.CUDA) as seen:
        status = validator.run("cuda", name, *_fate(stages.FATE_SUCCEEDED), env={"POD_NAME": "validator"})
    assert status == 0
    assert validator.markers() == {"driver-ready", "toolkit-ready", "cuda-ready"}
    # The pod ran on this node, placed by name, owned by the validator's pod, and succeeded.
    assert seen, "no workload pod was seen"
    assert {pod.spec.node_name for pod in seen} == {name}
    assert seen[0].metadata.owner_references[0].uid == own.metadata.uid
    assert "Succeeded" in {pod.status.phase for pod in seen}
    validator.wait_gone(Component.CUDA)


def test_cuda_under_the_nri_plugin(node: Callable[..., str], validator: Validator) -> None:
    """cdi.nriPluginEnabled: the operator gives the validation no RuntimeClass (VALIDATOR_RUNTIME_CLASS
    empty, as NVIDIA's setRuntimeClassName); the pod asks the toolkit's NRI plugin for every GPU by
    annotation instead, as NVIDIA's cuda-workload-validation.yaml."""
    name = node()
    with validator.watching(Component.CUDA) as seen:
        assert validator.run("cuda", name, *_fate(stages.FATE_SUCCEEDED), runtime_class="") == 0
    assert "cuda-ready" in validator.markers()
    assert seen, "no workload pod was seen"
    assert {pod.spec.runtime_class_name for pod in seen} == {None}
    assert {
        (pod.metadata.annotations or {}).get("nvidia.cdi.k8s.io/container.cuda-validation") for pod in seen
    } == {"management.nvidia.com/gpu=all"}
    # The annotation names the container that runs vectorAdd.
    assert {c.name for pod in seen for c in pod.spec.containers} == {"cuda-validation"}
    validator.wait_gone(Component.CUDA)


def test_cuda_failed_removes_markers_and_says_why(
    namespace: str, node: Callable[..., str], validator: Validator
) -> None:
    name = node()
    assert validator.run("cuda", name, *_fate(stages.FATE_FAILED)) == 1
    assert validator.markers() == {"driver-ready", "toolkit-ready"}
    message = validator.message()
    pod = validation_workloads.workload_pod_name(Component.CUDA, name)
    assert message.startswith(f"cuda validation failed: CUDA workload pod {namespace}/{pod} failed: ")
    assert f"container cuda-validation exited 1 (Error): {stages.FAILED_MESSAGE}" in message
    assert "RuntimeClass" in message
    validator.wait_gone(Component.CUDA)


def test_cuda_still_running_at_the_timeout(node: Callable[..., str], validator: Validator) -> None:
    """Without a fate kwok keeps the pod Running: a vectorAdd that never ends."""
    name = node()
    started = time.monotonic()
    assert validator.run("cuda", name, "--timeout", "3") == 1
    # It gave up rather than hung. Budget 60 s: the 3 s timeout plus the program's start-up and
    # its reads (2 s on a quiet machine, ten times that loaded); the message says "after 3s".
    assert time.monotonic() - started < 60
    message = validator.message()
    assert "gave up after 3s" in message and "is Running, waiting for it to complete" in message
    assert "cuda-ready" not in validator.markers()
    validator.wait_gone(Component.CUDA)


def test_cuda_replaces_a_leftover_pod(
    kube: client.ApiClient, namespace: str, node: Callable[..., str], validator: Validator
) -> None:
    """A validator that restarted finds its earlier pod (same name) and starts over."""
    name = node()
    pod_name = validation_workloads.workload_pod_name(Component.CUDA, name)
    client.CoreV1Api(kube).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": pod_name, "annotations": {stages.FATE_ANNOTATION: stages.FATE_FAILED}},
            "spec": {
                "nodeName": name,
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "old"}],
            },
        },
    )
    assert validator.run("cuda", name, *_fate(stages.FATE_SUCCEEDED)) == 0
    # Replaced, not judged: the failed leftover did not fail this run.
    assert "cuda-ready" in validator.markers()


def test_cuda_without_the_runtime_class(node: Callable[..., str], validator: Validator) -> None:
    """The API server's admission refuses the pod: the message says which RuntimeClass to create."""
    name = node()
    missing = f"{validator.runtime_class}-missing"
    assert validator.run("cuda", name, runtime_class=missing) == 1
    message = validator.message()
    assert f'RuntimeClass "{missing}" not found' in message
    assert f"create the RuntimeClass '{missing}'" in message


# --- plugin --------------------------------------------------------------------------------


def test_plugin_scheduled_with_a_gpu(
    node: Callable[..., str], validator: Validator, caplog: pytest.LogCaptureFixture
) -> None:
    node()  # another GPU node: the scheduler must still pick ours
    name = node(gpus=8)
    caplog.set_level("INFO", logger="ocp_gpu.validate")
    assert validator.run("plugin", name) == 0
    assert validator.markers() == set(ALL_MARKERS)
    assert f"was scheduled on {name} with a GPU and started" in caplog.text
    validator.wait_gone(Component.PLUGIN)


def test_plugin_on_a_cordoned_node(
    kube: client.ApiClient, node: Callable[..., str], validator: Validator
) -> None:
    """A driver upgrade validates with the node still cordoned (validation-required comes before
    uncordon-required): the workload tolerates the unschedulable taint, as DaemonSet pods do."""
    name = node(gpus=2)
    fake_nodes.cordon(kube, name)
    assert validator.run("plugin", name) == 0
    assert "plugin-ready" in validator.markers()


def test_plugin_with_a_renamed_resource(node: Callable[..., str], validator: Validator) -> None:
    """gpu:sharedgpu:4 on 8 GPUs: the node advertises nvidia.com/sharedgpu only."""
    name = node(gpus=0, extra={"nvidia.com/sharedgpu": "32"})
    with validator.watching(Component.PLUGIN) as seen:
        assert validator.run("plugin", name) == 0
    assert seen[0].spec.containers[0].resources.limits == {"nvidia.com/sharedgpu": "1"}


def test_plugin_node_without_gpus(node: Callable[..., str], validator: Validator) -> None:
    name = node(gpus=0)
    assert validator.run("plugin", name, "--timeout", "2") == 1
    message = validator.message()
    assert f"node {name} advertises no nvidia.com/ resource after 2s" in message
    assert "nvidia.com/gpu=0" in message
    assert "device plugin pod on this node" in message
    assert validator.markers() == {"driver-ready", "toolkit-ready", "cuda-ready"}
    assert not validator.pods(Component.PLUGIN)


def test_plugin_all_gpus_taken(
    kube: client.ApiClient, namespace: str, node: Callable[..., str], validator: Validator
) -> None:
    """The node advertises one GPU and a workload holds it: the scheduler says Insufficient."""
    name = node(gpus=1)
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "holder"},
            "spec": {
                "nodeName": name,
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
        },
    )
    assert validator.run("plugin", name, "--timeout", "4") == 1
    message = validator.message()
    assert "cannot be scheduled" in message and "Insufficient nvidia.com/gpu" in message
    assert "plugin-ready" not in validator.markers()
    validator.wait_gone(Component.PLUGIN)


# --- helpers -------------------------------------------------------------------------------


def _watch_pods(kube: client.ApiClient, namespace: str, app: str, seen: list[Any]) -> Callable[[], None]:
    """Record every state of the workload pods while the validator runs (it deletes them after).

    NB: watched from a LIST's resourceVersion, so a pod created before the watch request reaches
    the server is still seen (a 0.3 s sleep stood for that, and lost under load); `stop()` waits
    until every pod seen was seen deleted, so the last states are in (another 0.3 s sleep did).
    Budget REACT_S: kwok removes a deleted pod within a second on a quiet machine."""
    import threading

    from kubernetes import watch

    watcher = watch.Watch()
    core = client.CoreV1Api(kube)
    selector = f"app={app}"
    version = core.list_namespaced_pod(namespace, label_selector=selector).metadata.resource_version
    live: set[str] = set()

    def run() -> None:
        # NB: stop() may end the stream mid-chunk; what was seen is what counts.
        with contextlib.suppress(Exception):
            for event in watcher.stream(
                core.list_namespaced_pod,
                namespace,
                label_selector=selector,
                resource_version=version,
                timeout_seconds=120,
            ):
                pod = event["object"]
                seen.append(pod)
                if event["type"] == "DELETED":
                    live.discard(pod.metadata.uid)
                else:
                    live.add(pod.metadata.uid)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def stop() -> None:
        try:
            polling.wait_for(
                lambda: seen and not live, REACT_S, what=f"every {app} pod seen deleted", interval=0.1
            )
        finally:
            watcher.stop()

    return stop
