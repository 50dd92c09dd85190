"""We test these aspects of the operand pod watch (kube/pod_watch.py) on a real API server, on a
control plane of its own (the test restarts kube-apiserver):

- its first LIST hands over exactly the operand-labelled pods of its namespace (not other
  pods, not other namespaces), in pages;
- pods created, changed and deleted arrive as facts;
- a watch the server ends (timeoutSeconds) resumes from its resourceVersion: a new WATCH
  request, no second LIST;
- kube-apiserver killed, etcd compacted, kube-apiserver restarted: the watch retries through
  the outage, gets 410 Gone for its compacted resourceVersion, lists again, and then sees pods
  created and deleted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.harness import binaries, faults
from ocp_gpu.harness.cluster import LocalControlPlane
from ocp_gpu.kube import clients, connecting, pod_watch
from ocp_gpu.model import operands, pods
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

PLUGIN = operands.DEVICE_PLUGIN.app


class Recorder:
    """A PodSink that keeps what it was told (called from the watch's loop thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listings: list[set[str]] = []
        self.pods: dict[str, pods.PodFacts] = {}
        self.events: list[tuple[str, str]] = []

    def listed(self, facts: Sequence[pods.PodFacts]) -> None:
        with self.lock:
            self.listings.append({fact.name for fact in facts})
            self.pods = {fact.name: fact for fact in facts}

    def seen(self, facts: pods.PodFacts) -> None:
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
    with LocalControlPlane(binaries=binaries.ensure_binaries(), start_timeout=180) as plane:
        yield plane


def make_pod(core: client.CoreV1Api, namespace: str, name: str, app: str | None = PLUGIN) -> None:
    metadata: dict[str, Any] = {"name": name}
    if app:
        metadata["labels"] = {"app": app}
    body = {"metadata": metadata, "spec": {"containers": [{"name": "c", "image": "example.invalid/c:1"}]}}
    core.create_namespaced_pod(namespace, body)


def test_list_watch_resume_and_relist_after_compaction(own_control_plane: LocalControlPlane) -> None:
    plane = own_control_plane
    kube = plane.api_client()
    core = client.CoreV1Api(kube)
    for namespace in ("operands", "elsewhere"):
        core.create_namespace({"metadata": {"name": namespace}})
    for i in range(5):
        make_pod(core, "operands", f"plugin-{i}")
    make_pod(core, "operands", "not-an-operand", app="something-else")
    make_pod(core, "elsewhere", "plugin-elsewhere")

    api = clients.load_api_client(plane.kubeconfig)
    recorder = Recorder()
    watch = pod_watch.PodWatch(
        lambda renew: connecting.connection_info(api), "operands", recorder, watch_timeout_s=2
    )
    loop = asyncio.new_event_loop()
    task: asyncio.Task[None] | None = None

    def serve() -> None:
        nonlocal task
        task = loop.create_task(watch.run())
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        wait_for(lambda: recorder.listings, what="the first listing")
        assert recorder.listings == [{f"plugin-{i}" for i in range(5)}]

        # Changes arrive (the scheduler's PodScheduled=False condition too: several per pod).
        make_pod(core, "operands", "plugin-new")
        core.patch_namespaced_pod("plugin-0", "operands", {"metadata": {"labels": {"extra": "x"}}})
        core.delete_namespaced_pod("plugin-1", "operands", grace_period_seconds=0)
        wait_for(lambda: ("gone", "plugin-1") in recorder.events, what="the deletion")
        assert "plugin-new" in recorder.pods and "plugin-1" not in recorder.pods
        assert ("seen", "plugin-0") in recorder.events

        # The server ends each watch after 2 s: it resumes, without listing again.
        wait_for(lambda: watch.watches >= 3, timeout=30, what="two resumed watches")
        assert watch.lists == 1
        make_pod(core, "operands", "plugin-after-resume")
        wait_for(lambda: "plugin-after-resume" in recorder.pods, what="a pod after a resume")

        # The API server goes away; etcd forgets every version the watch could resume from.
        plane.kill_process("kube-apiserver")
        # NB: the watch may hold etcd's very last revision (a bookmark): bump it first.
        faults.bump_etcd_revision(plane.etcd_url)
        faults.compact_etcd(plane.etcd_url)
        plane.restart_process("kube-apiserver")
        core.delete_namespaced_pod("plugin-2", "operands", grace_period_seconds=0)
        make_pod(core, "operands", "plugin-after-restart")
        wait_for(lambda: "plugin-after-restart" in recorder.pods, timeout=60, what="a pod after the restart")
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
    finally:
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=30)
        loop.close()
        kube.close()
