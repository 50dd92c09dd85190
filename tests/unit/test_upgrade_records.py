"""We test these aspects of turning API objects into upgrade records (ocp_gpu/kube/upgrading.py, no API):

- driver pods: owner DaemonSet, revision hash, NVIDIA's readiness (Running, every container ready),
  restarts and waiting reason of unready containers (init containers too), terminating;
- workload pods: GPU requests or limits (nvidia.com/gpu*, nvidia.com/mig-*; app containers only),
  a VM's GPU (any other nvidia.com/ resource: the sandbox device plugin's), controller kind, emptyDir,
  mirror pods, phase;
- nodes: state label, skip label, NVIDIA's presence semantics for the initial-state annotation,
  timers (unparsable ones dropped), Ready condition (absent counts as Ready);
- the current revision of each DaemonSet: highest `.revision`, hash from the label or the name,
  revisions of other owners ignored;
- DaemonSet status: unscheduled pods counted only once the controller observed the spec.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.kube import reading, upgrading
from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.upgrade_observations import UpgradeState
from tests.unit._upgrades import NOW

DS_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "name": "nvidia-driver-daemonset-x",
    "controller": True,
}


def pod_body(
    *,
    phase: str = "Running",
    ready: tuple[bool, ...] = (True,),
    restarts: int = 0,
    waiting: str = "",
    init: tuple[dict[str, Any], ...] = (),
    owner: dict[str, Any] | None = DS_OWNER,
    **spec: Any,
) -> dict[str, Any]:
    statuses = [
        {
            "name": f"c{i}",
            "ready": is_ready,
            "restartCount": restarts,
            "state": {"waiting": {"reason": waiting}} if waiting and not is_ready else {"running": {}},
        }
        for i, is_ready in enumerate(ready)
    ]
    return {
        "metadata": {
            "name": "nvidia-driver-daemonset-x-abcde",
            "namespace": "nvidia-gpu-operator",
            "uid": "u1",
            "labels": {"app": "nvidia-driver-daemonset", "controller-revision-hash": "7c9a5d"},
            "ownerReferences": [owner] if owner else [],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c0"}], **spec},
        "status": {"phase": phase, "containerStatuses": statuses, "initContainerStatuses": list(init)},
    }


@pytest.mark.parametrize(
    ("body", "ready"),
    [
        (pod_body(), True),
        (pod_body(ready=(True, False)), False),
        (pod_body(phase="Pending", ready=(True,)), False),
        (pod_body(ready=()), False),
    ],
    ids=["ready", "one-not-ready", "pending", "no-containers"],
)
def test_driver_pod_readiness(body: dict[str, Any], ready: bool) -> None:
    assert upgrading.driver_pod(body).ready is ready


def test_driver_pod_record() -> None:
    record = upgrading.driver_pod(pod_body(ready=(False,), restarts=12, waiting="CrashLoopBackOff"))
    assert (record.daemonset, record.revision_hash, record.node) == (
        "nvidia-driver-daemonset-x",
        "7c9a5d",
        "n1",
    )
    assert (record.restart_count, record.waiting_reason, record.terminating) == (
        12,
        "CrashLoopBackOff",
        False,
    )
    assert str(record.ref) == "nvidia-gpu-operator/nvidia-driver-daemonset-x-abcde" and record.ref.uid == "u1"


def test_driver_pod_init_container_restarts_count() -> None:
    init = (
        {
            "name": "k8s-driver-manager",
            "ready": False,
            "restartCount": 11,
            "state": {"waiting": {"reason": "Error"}},
        },
    )
    record = upgrading.driver_pod(pod_body(phase="Pending", ready=(), init=init))
    assert (record.restart_count, record.waiting_reason) == (11, "Error")


def test_orphan_and_terminating_driver_pods() -> None:
    body = pod_body(owner=None)
    body["metadata"]["deletionTimestamp"] = "2025-03-01T12:00:00Z"
    record = upgrading.driver_pod(body)
    assert record.daemonset is None and record.terminating


@pytest.mark.parametrize(
    ("resources", "gpu", "vm_gpu"),
    [
        ({"limits": {"nvidia.com/gpu": "1"}}, True, False),
        ({"requests": {"nvidia.com/mig-2g.10gb": "1"}}, True, False),
        ({"limits": {"nvidia.com/gpu.shared": "1"}}, True, False),
        # KubeVirt's virt-launcher: a passthrough model, a vGPU type.
        ({"limits": {"nvidia.com/GA102GL_A10": "1", "devices.kubevirt.io/kvm": "1"}}, False, True),
        ({"requests": {"nvidia.com/NVIDIA_A10-4Q": "1"}}, False, True),
        ({"limits": {"cpu": "1", "amd.com/gpu": "1"}}, False, False),
        ({}, False, False),
    ],
)
def test_workload_pod_gpu(resources: dict[str, Any], gpu: bool, vm_gpu: bool) -> None:
    body = pod_body(containers=[{"name": "c0", "resources": resources}])
    record = upgrading.workload_pod(body)
    assert (record.requests_gpu, record.requests_vm_gpu) == (gpu, vm_gpu)


def test_init_containers_do_not_make_a_gpu_pod() -> None:
    body = pod_body(initContainers=[{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])
    assert upgrading.workload_pod(body).requests_gpu is False


def test_workload_pod_record() -> None:
    body = pod_body(
        owner={"kind": "Job", "name": "train", "controller": True}, volumes=[{"name": "s", "emptyDir": {}}]
    )
    body["metadata"]["annotations"] = {upgrading.MIRROR_ANNOTATION: "x"}
    record = upgrading.workload_pod(body)
    assert (record.controller_kind, record.uses_empty_dir, record.mirror, record.phase) == (
        "Job",
        True,
        True,
        "Running",
    )
    bare = upgrading.workload_pod(
        pod_body(owner={"kind": "ReplicaSet", "name": "r"})
    )  # an owner, not a controller
    assert bare.controller_kind is None and not bare.has_controller


def node_body(
    node_labels: dict[str, str], annotations: dict[str, str], conditions: list[Any]
) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": node_labels, "annotations": annotations},
        "spec": {"unschedulable": True},
        "status": {"conditions": conditions},
    }


def test_upgrade_node_record() -> None:
    body = node_body(
        {labels.UPGRADE_STATE: "validation-required", labels.UPGRADE_SKIP: "true"},
        {
            upgrade_observations.INITIAL_UNSCHEDULABLE: "",
            upgrade_observations.VALIDATION_START: upgrade_observations.format_timestamp(NOW),
            upgrade_observations.DRAIN_START: "garbage",
            labels.UPGRADE_ENABLED_ANNOTATION: "true",
        },
        [{"type": "Ready", "status": "False"}],
    )
    record = upgrading.upgrade_node(body)
    assert record.state is UpgradeState.VALIDATION_REQUIRED
    assert record.skip and record.upgrade_enabled and record.unschedulable and not record.ready
    # NVIDIA tests the annotation's presence, whatever its value.
    assert record.initially_unschedulable and not record.cordoned_by_upgrade
    assert dict(record.timers) == {upgrade_observations.VALIDATION_START: NOW}


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([], True),
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "Unknown"}], False),
    ],
)
def test_node_readiness(conditions: list[Any], ready: bool) -> None:
    assert upgrading.upgrade_node(node_body({}, {}, conditions)).ready is ready


def test_heartbeats_leave_node_facts_unchanged() -> None:
    """The watch keeps NodeFacts: a heartbeat must not look like a change (it would wake passes)."""
    before = node_body({labels.UPGRADE_STATE: "upgrade-done"}, {}, [{"type": "Ready", "status": "True"}])
    after = node_body(
        {labels.UPGRADE_STATE: "upgrade-done"},
        {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "1"},
        [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-22T05:00:00Z"}],
    )
    assert reading.node_facts(before) == reading.node_facts(after)
    not_ready = node_body({labels.UPGRADE_STATE: "upgrade-done"}, {}, [{"type": "Ready", "status": "False"}])
    assert reading.node_facts(not_ready) != reading.node_facts(before)


def test_upgrade_annotations_are_kept_and_others_dropped() -> None:
    facts = reading.node_facts(
        node_body(
            {},
            {upgrade_observations.CORDONED_BY_UPGRADE: "true", "machineconfiguration.openshift.io/s": "x"},
            [],
        )
    )
    assert dict(facts.annotations) == {upgrade_observations.CORDONED_BY_UPGRADE: "true"}


def test_skip_needs_true() -> None:
    assert not upgrading.upgrade_node(node_body({labels.UPGRADE_SKIP: "false"}, {}, [])).skip


def revision(owner: str | None, name: str, number: int, hash_label: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {}}
    if owner:
        metadata["ownerReferences"] = [{"kind": "DaemonSet", "name": owner, "controller": True}]
    if hash_label:
        metadata["labels"]["controller-revision-hash"] = hash_label
    return {"metadata": metadata, "revision": number}


def test_current_revisions() -> None:
    revisions = [
        revision("ds-a", "ds-a-111", 1, "111"),
        revision("ds-a", "ds-a-333", 3, "333"),
        revision("ds-a", "ds-a-222", 2, "222"),
        revision("ds-b", "ds-b-abc", 1),
        revision(None, "orphan-zzz", 9, "zzz"),
    ]
    assert upgrading.current_revisions(revisions) == {"ds-a": "333", "ds-b": "abc"}


@pytest.mark.parametrize(
    ("status", "generation", "unscheduled"),
    [
        ({"observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 1}, 2, 2),
        ({"observedGeneration": 1, "desiredNumberScheduled": 3, "currentNumberScheduled": 1}, 2, 0),
        ({"observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 3}, 2, 0),
    ],
    ids=["missing-pods", "not-observed", "whole"],
)
def test_driver_revision(status: dict[str, int], generation: int, unscheduled: int) -> None:
    body = {"metadata": {"name": "ds", "generation": generation}, "status": status}
    assert upgrading.driver_revision(body, "h").unscheduled == unscheduled


def test_one_snapshot_builder_for_watches_and_lists() -> None:
    """The watches' records and a LIST's JSON reach the same UpgradeSnapshot (model.upgrade_observations
    builds both)."""
    gpu = node_body({labels.NFD_NVIDIA_PCI: "true"}, {}, [])
    cpu = {**node_body({}, {}, []), "metadata": {"name": "cpu", "labels": {}, "annotations": {}}}
    daemonset = {
        "metadata": {"name": "nvidia-driver-daemonset-x", "generation": 2},
        "status": {"observedGeneration": 2, "desiredNumberScheduled": 2, "currentNumberScheduled": 1},
    }
    driver = upgrading.driver_pod(pod_body())
    validator = upgrading.validator_pod(pod_body())
    snap = upgrade_observations.upgrade_snapshot(
        upgrade_observations.upgrade_nodes([reading.node_facts(gpu), reading.node_facts(cpu)], [driver]),
        [reading.driver_daemonset(daemonset)],
        {"nvidia-driver-daemonset-x": "7c9a5d"},
        {},
        [validator],
        validator_deployed=True,
    )
    # Only GPU nodes, each with the driver pods bound to it.
    assert [(node.name, node.driver_pods) for node in snap.nodes] == [("n1", (driver,))]
    # The one "unscheduled" rule, the same as for a DaemonSet read by a LIST.
    assert snap.daemonsets["nvidia-driver-daemonset-x"] == upgrading.driver_revision(daemonset, "7c9a5d")
    assert snap.daemonsets["nvidia-driver-daemonset-x"].unscheduled == 1
    assert dict(snap.validator_pods) == {"n1": (validator,)}


def test_a_trimmed_revision_keeps_what_current_revisions_reads() -> None:
    """The watch keeps ControllerRevisions trimmed (reading.controller_revision); LISTs read them whole."""
    whole = [
        {**revision("ds-a", "ds-a-111", 1, "111"), "data": {"spec": {"template": {"big": "x" * 100}}}},
        {**revision("ds-a", "ds-a-333", 3, "333"), "data": {"spec": {}}},
        revision("ds-b", "ds-b-abc", 1),
    ]
    trimmed = [reading.controller_revision(body) for body in whole]
    assert all("data" not in body for body in trimmed)
    assert (
        upgrading.current_revisions(trimmed)
        == upgrading.current_revisions(whole)
        == {"ds-a": "333", "ds-b": "abc"}
    )
