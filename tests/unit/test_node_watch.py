"""We test these aspects of the node watch without a server (the stream itself is
kube/watching.py's, shared with the pod watch: tests/unit/test_pod_watch.py and, on a real
API server, tests/e2e/test_node_watch.py):

- one Node object becomes the facts the view keeps, once per event (`reading.node_facts`, the
  watch's converter): the labels we decide on, unschedulable, the Ready condition's status;
  nothing of a heartbeat;
- the node view (reconcilers/node_view): a complete listing opens the start-up barrier only
  with kopf's kinds listed too; a re-list forgets nodes deleted meanwhile; only a change to
  what is kept marks the node dirty and wakes the loops; a node moving to another RHCOS
  version is urgent, a node joining is not; a deleted node is dirty once; the upgrade state
  alone wakes only the upgrade loop (but an opted-out node's); our own label patch coming back
  is progress for the main pass, not a re-plan of the node.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.kube import node_watch, reading
from ocp_gpu.model import labels, nodes
from ocp_gpu.reconcilers import node_view, runtime

RHCOS_A = "416.94.202407030122-0"
RHCOS_B = "417.94.202410090854-0"


def node(
    name: str,
    rhcos: str = RHCOS_A,
    *,
    unschedulable: bool = False,
    ready: bool = True,
    heartbeat: str = "2026-11-24T10:00:00Z",
    extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {
                labels.NFD_NVIDIA_PCI: "true",
                labels.OSTREE_VERSION: rhcos,
                labels.OS_ID: "rhcos",
                labels.OS_VERSION_ID: "4.16",
                "kubernetes.io/hostname": name,
                **(extra_labels or {}),
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "nvidia.com/gpu-driver-upgrade-enabled": "true"},
        },
        "spec": {"unschedulable": unschedulable},
        "status": {
            "allocatable": {"nvidia.com/gpu": "2", "cpu": "4"},
            "nodeInfo": {
                "osImage": f"Red Hat Enterprise Linux CoreOS {rhcos} (Plow)",
                "kernelVersion": "5.14",
            },
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastHeartbeatTime": heartbeat},
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat},
            ],
            "images": [{"names": ["example.invalid/big:1"], "sizeBytes": 1}],
        },
    }


def test_the_watch_converts_each_node_to_its_facts() -> None:
    watch = node_watch.NodeWatch(lambda renew: None, node_view.NodeView(_runtime()))  # type: ignore[arg-type,return-value]
    assert watch._parse is reading.node_facts and watch._path == "/api/v1/nodes" and not watch._selector
    facts = reading.node_facts(node("n1", unschedulable=True, ready=False))
    assert facts.name == "n1" and facts.unschedulable and not facts.ready and facts.gpus == 2
    assert facts.labels[labels.OSTREE_VERSION] == RHCOS_A
    assert facts.annotations == {"nvidia.com/gpu-driver-upgrade-enabled": "true"}
    # a heartbeat (and any field the record leaves out) makes equal facts
    assert reading.node_facts(node("n1", heartbeat="2026-11-24T10:01:00Z")) == reading.node_facts(node("n1"))


def _runtime() -> runtime.Runtime:
    return runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]


def _clear(rt: runtime.Runtime) -> None:
    rt.scheduler.take_changes()
    rt.scheduler.take_upgrade_marks()


def test_the_barrier_waits_for_the_other_kinds_and_the_node_listing() -> None:
    rt = _runtime()
    rt.view.watch("apps", "daemonsets")
    view = node_view.NodeView(rt)
    rt.view.mark_delivered("apps", "daemonsets")
    assert not rt.view.listed.is_set(), "the other kinds alone do not make the view complete"
    view.listed([reading.node_facts(node("n1"))])
    assert rt.view.listed.is_set()
    assert set(rt.view.node_facts) == {"n1"}


def test_a_re_list_forgets_nodes_deleted_while_no_watch_was_open() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.listed([reading.node_facts(node("n1")), reading.node_facts(node("n2"))])
    _clear(rt)
    view.listed([reading.node_facts(node("n2"))])
    assert set(rt.view.node_facts) == {"n2"}
    assert rt.scheduler.take_changes().nodes == {nodes.NodeName("n1")}, "only the deleted node is dirty"


def test_only_a_change_to_what_is_kept_marks_the_node() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.seen(reading.node_facts(node("n1")))
    assert rt.scheduler.take_changes().nodes == {"n1"}
    rt.scheduler.take_upgrade_marks()
    # a kubelet heartbeat: nothing
    view.seen(reading.node_facts(node("n1", heartbeat="2026-11-24T10:05:00Z")))
    assert not rt.scheduler.wake.is_set() and not rt.scheduler.upgrade_wake.is_set()
    # a cordon: the node is dirty, both loops wake, nothing urgent
    view.seen(reading.node_facts(node("n1", unschedulable=True)))
    marks = rt.scheduler
    assert marks.wake.is_set() and marks.upgrade_wake.is_set() and not marks.urgent.is_set()
    assert marks.take_changes().nodes == {"n1"} and rt.view.node_facts[nodes.NodeName("n1")].unschedulable


def test_a_node_moving_to_another_rhcos_version_is_urgent_a_joining_one_is_not() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.seen(reading.node_facts(node("n1")))
    assert not rt.scheduler.urgent.is_set(), "a node joining coalesces like any burst"
    _clear(rt)
    view.seen(reading.node_facts(node("n1", RHCOS_B)))
    assert rt.scheduler.urgent.is_set() and rt.scheduler.take_changes().nodes == {"n1"}


def test_a_deleted_node_is_dirty_once() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.seen(reading.node_facts(node("n1")))
    _clear(rt)
    view.gone("n1")
    assert not rt.view.node_facts and rt.scheduler.take_changes().nodes == {"n1"}
    view.gone("n1")
    assert not rt.scheduler.wake.is_set() and not rt.scheduler.take_changes().nodes


def test_the_upgrade_state_alone_wakes_only_the_upgrade_loop() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.seen(reading.node_facts(node("n1")))
    _clear(rt)
    done = {labels.UPGRADE_STATE: "upgrade-done"}
    view.seen(reading.node_facts(node("n1", extra_labels=done)))
    marks = rt.scheduler
    assert marks.upgrade_wake.is_set() and not marks.wake.is_set(), "the main pass plans nothing new"
    assert rt.view.node_facts[nodes.NodeName("n1")].labels[labels.UPGRADE_STATE] == "upgrade-done"
    assert not rt.scheduler.take_changes().nodes
    # the same label with a cordon: the main pass's too
    view.seen(reading.node_facts(node("n1", unschedulable=True, extra_labels=done)))
    assert rt.scheduler.wake.is_set() and rt.scheduler.take_changes().nodes == {"n1"}


def test_an_opted_out_node_s_upgrade_state_wakes_the_main_pass() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    opted_out = {labels.deploy_label("driver"): "false"}
    view.seen(reading.node_facts(node("n1", extra_labels=opted_out)))
    _clear(rt)
    view.seen(
        reading.node_facts(node("n1", extra_labels={**opted_out, labels.UPGRADE_STATE: "upgrade-done"}))
    )
    # planning/node_labels takes an idle state off a node with no driver
    assert rt.scheduler.wake.is_set() and rt.scheduler.take_changes().nodes == {"n1"}


def test_our_own_label_patch_coming_back_is_progress_for_the_main_pass() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.seen(reading.node_facts(node("n1")))
    view.seen(reading.node_facts(node("n2")))
    _clear(rt)
    ours = {labels.GPU_PRESENT: "true", labels.deploy_label("driver"): "true"}
    rt.cache.label_echoes[nodes.NodeName("n1")] = (ours, {})
    rt.cache.label_echoes[nodes.NodeName("n2")] = (ours, {})
    view.seen(reading.node_facts(node("n1", extra_labels=ours)))
    marks = rt.scheduler
    assert marks.wake.is_set() and not marks.substantive.is_set() and marks.upgrade_wake.is_set()
    assert not marks.take_changes().nodes and not rt.cache.label_echoes.get(nodes.NodeName("n1"))
    # someone else's label in the same event: the main pass re-plans the node
    view.seen(reading.node_facts(node("n2", extra_labels={**ours, "example.com/rack": "b"})))
    assert rt.scheduler.substantive.is_set() and rt.scheduler.take_changes().nodes == {"n2"}
    assert not rt.cache.label_echoes
