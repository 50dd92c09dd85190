"""We test these aspects of the operator's own watches (kube/watching.py) on a real API server, on
a control plane of its own (the test restarts kube-apiserver): the operand pod watch
(kube/pod_watch.py) and, beside it through the same outage, the node watch (kube/node_watch.py)
and our DaemonSets' watch (kube/daemonset_watch.py):

- its first LIST hands over exactly the operand-labelled pods of its namespace (not other
  pods, not other namespaces), in pages (of 2 here: every listing below spans pages);
- pods created, changed and deleted arrive as facts;
- a watch the server ends (timeoutSeconds) resumes from its resourceVersion: a new WATCH
  request, no second LIST;
- kube-apiserver killed, etcd compacted, kube-apiserver restarted: the watch retries through
  the outage, gets 410 Gone for its compacted resourceVersion, lists again, and then sees pods
  created and deleted again;
- the node watch lists every node (GPU and not), sees a label change, a cordon and a deletion as
  facts (kubelet heartbeats change nothing it keeps), and through the same outage lists again
  (410 Gone), forgetting a node deleted meanwhile and seeing one created after;
- the DaemonSet watch lists only our DaemonSets of its namespace, sees an edit and a deletion,
  and after the outage forgets one deleted meanwhile and sees one created after.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, connecting, daemonset_watch, node_watch, pod_watch, watching
from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import binaries, faults
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane
from tests.e2e.conftest import wait_for

from .conftest import REACT_S, STEP_S

pytestmark = pytest.mark.e2e

PLUGIN = operand_catalog.DEVICE_PLUGIN.app


class Recorder:
    """A sink (of pod or node facts) that keeps what it was told (called from the watch's loop thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listings: list[set[str]] = []
        # By name: pods.PodFacts or nodes.NodeFacts.
        self.pods: dict[str, Any] = {}
        self.events: list[tuple[str, str]] = []

    def listed(self, facts: Sequence[Any]) -> None:
        with self.lock:
            self.listings.append({fact.name for fact in facts})
            self.pods = {fact.name: fact for fact in facts}

    def seen(self, facts: Any) -> None:
        with self.lock:
            self.pods[facts.name] = facts
            self.events.append(("seen", facts.name))

    def gone(self, name: str) -> None:
        with self.lock:
            self.pods.pop(name, None)
            self.events.append(("gone", name))


@pytest.fixture
def own_control_plane(control_plane: LocalControlPlane) -> Iterator[LocalControlPlane]:
    """A control plane for this test alone (``control_plane`` is requested only so the
    session's skip and build logic applies)."""
    with LocalControlPlane(binaries=binaries.ensure_binaries()) as plane:
        yield plane


def make_pod(core: client.CoreV1Api, namespace: str, name: str, app: str | None = PLUGIN) -> None:
    metadata: dict[str, Any] = {"name": name}
    if app:
        metadata["labels"] = {"app": app}
    body = {"metadata": metadata, "spec": {"containers": [{"name": "c", "image": "example.invalid/c:1"}]}}
    core.create_namespaced_pod(namespace, body)


def make_daemonset(apps: client.AppsV1Api, namespace: str, name: str, *, ours: bool = True) -> None:
    """A DaemonSet whose pods fit no node (the watch is the point, not its pods)."""
    selector = {"app": name}
    metadata: dict[str, Any] = {"name": name, "annotations": {labels.APPLIED_HASH: "h1"}}
    if ours:
        metadata["labels"] = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
    pod_spec = {
        "nodeSelector": {"nowhere": "true"},
        "containers": [{"name": "c", "image": "example.invalid/c:1"}],
    }
    body = {
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": selector}, "spec": pod_spec},
        },
    }
    apps.create_namespaced_daemon_set(namespace, body)


def test_list_watch_resume_and_relist_after_compaction(
    own_control_plane: LocalControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    plane = own_control_plane
    # Pages of 2: the 5 pods, 3 nodes and 3 DaemonSets each take several (continue tokens).
    monkeypatch.setattr(watching, "LIST_PAGE", 2)
    kube = plane.api_client()
    core = client.CoreV1Api(kube)
    for namespace in ("operands", "elsewhere"):
        core.create_namespace({"metadata": {"name": namespace}})
    for i in range(5):
        make_pod(core, "operands", f"plugin-{i}")
    make_pod(core, "operands", "not-an-operand", app="something-else")
    make_pod(core, "elsewhere", "plugin-elsewhere")
    apps = client.AppsV1Api(kube)
    for name in ("ds-0", "ds-1", "ds-2"):
        make_daemonset(apps, "operands", name)
    make_daemonset(apps, "operands", "not-ours", ours=False)
    make_daemonset(apps, "elsewhere", "ds-elsewhere")

    fake_nodes.create_nodes(
        kube, [fake_nodes.gpu_node("gpu-0"), fake_nodes.gpu_node("gpu-1"), fake_nodes.cpu_node("cpu-0")]
    )

    api = clients.load_api_client(plane.kubeconfig)
    recorder = Recorder()
    watch = pod_watch.PodWatch(
        lambda renew: connecting.connection_info(api),
        "operands",
        recorder,
        apps=operand_catalog.POD_APPS,
        watch_timeout_s=2,
    )
    node_recorder = Recorder()
    nodes = node_watch.NodeWatch(lambda renew: connecting.connection_info(api), node_recorder)
    ds_recorder = Recorder()
    daemonsets = daemonset_watch.DaemonSetWatch(
        lambda renew: connecting.connection_info(api), "operands", ds_recorder
    )
    loop = asyncio.new_event_loop()
    tasks: list[asyncio.Task[None]] = []

    def serve() -> None:
        tasks.extend([loop.create_task(w.run()) for w in (watch, nodes, daemonsets)])
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(asyncio.gather(*tasks))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        wait_for(lambda: recorder.listings, what="the first listing")
        assert recorder.listings == [{f"plugin-{i}" for i in range(5)}]
        wait_for(lambda: node_recorder.listings, what="the first node listing")
        assert node_recorder.listings == [{"gpu-0", "gpu-1", "cpu-0"}]
        assert node_recorder.pods["gpu-0"].is_gpu_node and not node_recorder.pods["cpu-0"].is_gpu_node

        wait_for(lambda: ds_recorder.listings, what="the first DaemonSet listing")
        assert ds_recorder.listings == [{"ds-0", "ds-1", "ds-2"}]
        apps.patch_namespaced_daemon_set(
            "ds-0", "operands", {"metadata": {"annotations": {labels.APPLIED_HASH: "edited"}}}
        )
        apps.delete_namespaced_daemon_set("ds-1", "operands")
        wait_for(
            lambda: (
                ds_recorder.pods["ds-0"].observed.applied_hash == "edited"
                and ("gone", "ds-1") in ds_recorder.events
            ),
            what="the DaemonSet changes",
        )

        # Node changes arrive as facts: a label, a cordon, a deletion.
        core.patch_node("gpu-0", {"metadata": {"labels": {labels.deploy_label("driver"): "false"}}})
        fake_nodes.cordon(kube, "gpu-1")
        fake_nodes.delete_nodes(kube, ["cpu-0"])
        wait_for(
            lambda: (
                node_recorder.pods["gpu-0"].labels.get(labels.deploy_label("driver")) == "false"
                and node_recorder.pods["gpu-1"].unschedulable
                and ("gone", "cpu-0") in node_recorder.events
            ),
            what="the node changes",
        )

        # Changes arrive (the scheduler's PodScheduled=False condition too: several per pod).
        make_pod(core, "operands", "plugin-new")
        core.patch_namespaced_pod("plugin-0", "operands", {"metadata": {"labels": {"extra": "x"}}})
        core.delete_namespaced_pod("plugin-1", "operands", grace_period_seconds=0)
        wait_for(lambda: ("gone", "plugin-1") in recorder.events, what="the deletion")
        assert "plugin-new" in recorder.pods and "plugin-1" not in recorder.pods
        assert ("seen", "plugin-0") in recorder.events

        # The server ends each watch after 2 s: it resumes, without listing again.
        wait_for(lambda: watch.watches >= 3, timeout=REACT_S, what="two resumed watches")
        assert watch.lists == 1
        make_pod(core, "operands", "plugin-after-resume")
        wait_for(lambda: "plugin-after-resume" in recorder.pods, what="a pod after a resume")

        # The API server goes away; etcd forgets every version the watch could resume from.
        plane.kill_process("kube-apiserver")
        # NB: the watch may hold etcd's very last revision (a bookmark): bump it first.
        faults.bump_etcd_revision(plane.etcd_url)
        faults.compact_etcd(plane.etcd_url)
        plane.restart_process("kube-apiserver")
        fake_nodes.delete_nodes(kube, ["gpu-1"])
        apps.delete_namespaced_daemon_set("ds-2", "operands")
        make_daemonset(apps, "operands", "ds-after-restart")
        fake_nodes.create_nodes(kube, [fake_nodes.gpu_node("gpu-after-restart")])
        core.delete_namespaced_pod("plugin-2", "operands", grace_period_seconds=0)
        make_pod(core, "operands", "plugin-after-restart")
        wait_for(
            lambda: "plugin-after-restart" in recorder.pods, timeout=STEP_S, what="a pod after the restart"
        )
        wait_for(lambda: "plugin-2" not in recorder.pods, what="the pod deleted meanwhile, forgotten")
        assert watch.lists >= 2, "a compacted resourceVersion is listed again"
        assert set(recorder.pods) == {
            "plugin-0",
            "plugin-3",
            "plugin-4",
            "plugin-new",
            "plugin-after-resume",
            "plugin-after-restart",
        }
        wait_for(
            lambda: set(node_recorder.pods) == {"gpu-0", "gpu-after-restart"},
            timeout=STEP_S,
            what="the nodes after the restart",
        )
        assert nodes.lists >= 2, "the node watch's compacted resourceVersion is listed again"
        assert nodes.lists == len(node_recorder.listings)
        wait_for(
            lambda: set(ds_recorder.pods) == {"ds-0", "ds-after-restart"},
            timeout=STEP_S,
            what="the DaemonSets after the restart",
        )
        assert daemonsets.lists >= 2, "the DaemonSet watch's compacted resourceVersion is listed again"
    finally:
        for task in tasks:
            loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=30)
        loop.close()
        kube.close()
