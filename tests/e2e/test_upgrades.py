"""We test these aspects of driver upgrades on the local control plane (seed 000), with GPU
workload pods on kwok nodes that advertise `nvidia.com/gpu`:

- the seed's exact `kubectl patch clusterpolicy/cluster-policy ... /spec/driver/version` rolls
  every node through the states to `upgrade-done`, with maxParallelUpgrades 1 and then 3
  (the largest concurrency observed is asserted);
- GPU pods are deleted, other pods are untouched (drain disabled);
- the seed's `kubectl get node -l nvidia.com/gpu.present -ojsonpath=...` and
  `kubectl get events --sort-by='.lastTimestamp' | grep GPUDriverUpgrade` show what the seed shows;
- a node the admin cordoned before the upgrade stays cordoned after it;
- the skip label keeps a node out (upgrade-required while its driver is old);
  pause (`autoUpgrade: false`) freezes and resume continues;
- a PodDisruptionBudget blocks a drain -> timeout -> upgrade-failed -> recovery by relabelling;
- a new driver pod whose image cannot be pulled times out in pod-restart-required into
  upgrade-failed (counted in gpu_operator_nodes_upgrades_failed, with a GPUDriverUpgrade Event):
  the node keeps the upgrade's cordon, no other node starts, and relabelling recovers it;
- waitForCompletion holds a node until its job's pod completes, and only that node: another
  node upgrades meanwhile (each node's steps go on by themselves, not pass by pass);
- the operator killed mid-upgrade resumes from the labels.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import stages
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    IN_FLIGHT,
    REACT_S,
    READY_S,
    STEP_S,
    UPGRADE_S,
    UpgradeStateWatch,
    driver_pods_ready,
    holds_for,
    kubectl,
    patch_policy,
    start_job,
    wait_for,
)

pytestmark = pytest.mark.e2e

SEED_PATCH = '[{"op": "replace", "path": "/spec/driver/version", "value":"510.85.02"}]'
SEED_JSONPATH = (
    '-ojsonpath={range .items[*]}{.metadata.name}{"\\t"}'
    '{.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state}{"\\n"}{end}'
)


def states(kube: client.ApiClient, names: list[str]) -> dict[str, str]:
    found = {}
    for node in client.CoreV1Api(kube).list_node(label_selector=labels.GPU_PRESENT).items:
        if node.metadata.name in names:
            found[node.metadata.name] = (node.metadata.labels or {}).get(labels.UPGRADE_STATE, "")
    return found


def all_done(kube: client.ApiClient, names: list[str]) -> bool:
    return set(states(kube, names).values()) == {"upgrade-done"} and len(states(kube, names)) == len(names)


class Fleet:
    """Vanilla GPU nodes (one driver DaemonSet) under a policy, the operator that upgrades them
    (`start_operator`), and what the seed does to them with kubectl."""

    def __init__(
        self,
        kube: client.ApiClient,
        control_plane: LocalControlPlane,
        apply_policy: Callable[..., Any],
        start_operator: Callable[..., OperatorProcess],
    ) -> None:
        self.kube, self.control_plane, self.apply_policy = kube, control_plane, apply_policy
        self._start_operator = start_operator
        self.made: list[str] = []
        self.operators: list[OperatorProcess] = []

    def start_operator(self, *args: str, **kwargs: Any) -> OperatorProcess:
        """`start_operator`, remembered so it stops before the nodes go (as when the test held it)."""
        proc = self._start_operator(*args, **kwargs)
        self.operators.append(proc)
        return proc

    def __call__(
        self, count: int, upgrade_policy: dict[str, Any] | None = None, **node_kwargs: Any
    ) -> list[str]:
        """`count` new nodes, and the policy (driver 550.90.07) with that upgrade policy."""
        names = [unique_name("gpu") for _ in range(count)]
        fake_nodes.create_nodes(self.kube, [fake_nodes.vanilla_gpu_node(n, **node_kwargs) for n in names])
        self.made.extend(names)
        self.apply_policy(spec={"driver": {"version": "550.90.07", "upgradePolicy": upgrade_policy or {}}})
        return names

    def kubectl(self, *args: str) -> str:
        return kubectl(self.control_plane, *args).stdout

    def seed_patch(self) -> None:
        """The seed's `kubectl patch clusterpolicy/cluster-policy --type=json -p ...`: to 510.85.02."""
        self.kubectl("patch", "clusterpolicy/cluster-policy", "--type=json", "-p", SEED_PATCH)

    def relabel(self, node: str) -> None:
        """What the seed tells the admin to do after fixing the cause of an upgrade-failed."""
        self.kubectl("label", "node", node, f"{labels.UPGRADE_STATE}=upgrade-required", "--overwrite")


@pytest.fixture
def gpu_cluster(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> Iterator[Fleet]:
    """A maker of GPU nodes and their policy; the nodes are deleted after the test."""
    fleet = Fleet(kube, control_plane, apply_policy, start_operator)
    yield fleet
    for proc in fleet.operators:
        proc.stop()  # idempotent: start_operator's own teardown stops it again and reads its log
    fake_nodes.delete_nodes(kube, fleet.made)


def new_driver_ready(kube: client.ApiClient, namespace: str, nodes: list[str], version: str) -> bool:
    """conftest's driver_pods_ready; NB: a Ready pod being deleted counts, as it always did here."""
    return driver_pods_ready(kube, namespace, nodes, version, deleting_too=True)


def gpu_workload(kube: client.ApiClient, namespace: str, node: str) -> str:
    """A one-replica Deployment whose pod uses a GPU on `node`; returns its pod's name."""
    name = unique_name("train")
    client.AppsV1Api(kube).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        # NB: no blanket toleration: it would tolerate the cordon too.
                        "containers": [
                            {
                                "name": "cuda",
                                "image": "cuda:12",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    pod = wait_for(
        lambda: [
            p
            for p in client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=f"app={name}").items
            if p.status.phase == "Running"
        ],
        REACT_S,
        what="GPU pod running",
    )
    return str(pod[0].metadata.name)


def plain_pod(kube: client.ApiClient, namespace: str, node: str) -> str:
    name = unique_name("web")
    client.CoreV1Api(kube).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {
                "nodeName": node,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "web", "image": "nginx"}],
            },
        },
    )
    return str(client.CoreV1Api(kube).read_namespaced_pod(name, namespace).metadata.uid)


def first_labelling_events(kube: client.ApiClient, nodes: list[str]) -> list[str] | None:
    """The nodes the batched upgrade-done Events on the ClusterPolicy name (each once), once
    every node is named; None before.  Fails on a per-node upgrade-done Event."""
    done = "Successfully updated node state label to [upgrade-done]"
    named: list[str] = []
    for event in client.CoreV1Api(kube).list_namespaced_event("default").items:
        if event.reason != "GPUDriverUpgrade" or done not in event.message:
            continue
        # NB: Events outlive the tests before this one (their nodes have other names).
        assert event.involved_object.name not in nodes, (event.involved_object.name, event.message)
        if event.involved_object.kind == "ClusterPolicy":
            named += [name for name in event.message.split(": ", 1)[1].split(", ") if name in nodes]
    return named if set(named) >= set(nodes) else None


def relabel_and_recover(
    kube: client.ApiClient, namespace: str, fleet: Fleet, node: str, nodes: list[str]
) -> None:
    """The admin relabels the failed `node` as the seed says: every node ends on the new driver,
    upgrade-done, and `node` is uncordoned. Budget READY_S: one node's whole upgrade (cordon,
    drain, a new driver pod, validation, uncordon; seconds on a quiet machine)."""
    fleet.relabel(node)
    wait_for(
        lambda: new_driver_ready(kube, namespace, nodes, "510.85.02") and all_done(kube, nodes),
        READY_S,
        what="recovered",
    )
    assert not client.CoreV1Api(kube).read_node(node).spec.unschedulable


@pytest.mark.parametrize("parallel", [1, 3])
def test_seed_patch_rolls_every_node_to_upgrade_done(
    parallel: int,
    kube: client.ApiClient,
    namespace: str,
    gpu_cluster: Fleet,
) -> None:
    nodes = gpu_cluster(4, upgrade_policy={"maxParallelUpgrades": parallel, "maxUnavailable": "100%"})
    cordoned = nodes[-1]
    fake_nodes.cordon(kube, cordoned)
    gpu_cluster.start_operator()
    wait_for(lambda: new_driver_ready(kube, namespace, nodes, "550.90.07"), STEP_S, what="driver pods ready")
    wait_for(lambda: all_done(kube, nodes), STEP_S, what="initial upgrade-done labels")
    # The first labels (no upgrade yet): one Event a pass on the ClusterPolicy naming the nodes,
    # none per node (planning/batched_events).
    first = wait_for(
        lambda: first_labelling_events(kube, nodes), REACT_S, what="the batched upgrade-done Event"
    )
    assert sorted(first) == sorted(nodes), first
    gpu_pods = {node: gpu_workload(kube, namespace, node) for node in nodes[:2]}
    plain = {node: plain_pod(kube, namespace, node) for node in nodes[:2]}

    with UpgradeStateWatch(kube, nodes) as sampler:
        gpu_cluster.seed_patch()
        wait_for(
            lambda: new_driver_ready(kube, namespace, nodes, "510.85.02") and all_done(kube, nodes),
            UPGRADE_S,
            what="every node upgraded",
        )
    assert sampler.max_in_flight <= parallel
    if parallel == 3:
        assert sampler.max_in_flight >= 2, "no parallelism observed"
    assert {"cordon-required", "pod-restart-required", "upgrade-done"} <= sampler.seen

    core = client.CoreV1Api(kube)
    remaining = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
    assert not set(gpu_pods.values()) & remaining, "GPU pods were not deleted"
    for uid in plain.values():
        assert uid in {p.metadata.uid for p in core.list_namespaced_pod(namespace).items}, (
            "a plain pod was touched"
        )
    assert core.read_node(cordoned).spec.unschedulable, "the admin's cordon was lifted"
    assert not any(core.read_node(n).spec.unschedulable for n in nodes[:-1])

    # What the seed's commands show.
    listed = gpu_cluster.kubectl("get", "node", "-l", "nvidia.com/gpu.present", SEED_JSONPATH)
    for node in nodes:
        assert f"{node}\tupgrade-done" in listed
    events = gpu_cluster.kubectl("get", "events", "--sort-by=.lastTimestamp")
    lines = [line for line in events.splitlines() if "GPUDriverUpgrade" in line and nodes[0] in line]
    text = "\n".join(lines)
    for state in (
        "upgrade-required",
        "cordon-required",
        "pod-restart-required",
        "uncordon-required",
        "upgrade-done",
    ):
        assert f"Successfully updated node state label to [{state}]" in text


def test_skip_label_pause_and_resume(
    kube: client.ApiClient,
    namespace: str,
    gpu_cluster: Fleet,
) -> None:
    nodes = gpu_cluster(3, upgrade_policy={"maxParallelUpgrades": 1})
    skipped = nodes[0]
    client.CoreV1Api(kube).patch_node(skipped, {"metadata": {"labels": {labels.UPGRADE_SKIP: "true"}}})
    proc = gpu_cluster.start_operator()
    wait_for(lambda: new_driver_ready(kube, namespace, nodes, "550.90.07"), STEP_S, what="driver pods ready")
    wait_for(lambda: all_done(kube, nodes[1:]), STEP_S, what="initial labels")
    patch_policy(kube, {"driver": {"upgradePolicy": {"autoUpgrade": False}}})
    wait_for(lambda: proc.metric("gpu_operator_auto_upgrade_enabled") == 0, REACT_S, what="paused metric")
    gpu_cluster.seed_patch()
    # A window: an unpaused operator starts an upgrade within a pass of the change (0.2 s quiet).
    holds_for(
        lambda: all(state in ("", "upgrade-done") for state in states(kube, nodes).values()),
        5,
        what="paused: no node leaves upgrade-done",
    )
    assert not new_driver_ready(kube, namespace, nodes[1:2], "510.85.02"), "paused, yet a driver restarted"

    patch_policy(kube, {"driver": {"upgradePolicy": {"autoUpgrade": True}}})
    wait_for(
        lambda: new_driver_ready(kube, namespace, nodes[1:], "510.85.02") and all_done(kube, nodes[1:]),
        READY_S,
        what="resumed upgrade finished",
    )
    assert not new_driver_ready(kube, namespace, [skipped], "510.85.02"), "the skipped node was upgraded"
    # As NVIDIA's: the skipped node runs the old driver, so it says upgrade-required, not upgrade-done.
    wait_for(
        lambda: states(kube, nodes)[skipped] == "upgrade-required",
        REACT_S,
        what="skipped node upgrade-required",
    )
    assert proc.metric("gpu_operator_auto_upgrade_enabled") == 1


def test_pdb_blocks_drain_then_failed_then_recovery_by_relabelling(
    kube: client.ApiClient,
    namespace: str,
    gpu_cluster: Fleet,
) -> None:
    # Short timeouts: the PodDisruptionBudget below blocks the drain until its timeout.
    drain_after_2s = {
        "gpuPodDeletion": {"timeoutSeconds": 2},
        "drain": {"enable": True, "timeoutSeconds": 4, "podSelector": "app=guarded", "deleteEmptyDir": True},
    }
    nodes = gpu_cluster(1, upgrade_policy=drain_after_2s)
    node = nodes[0]
    gpu_cluster.start_operator()
    wait_for(lambda: all_done(kube, nodes), STEP_S, what="initial label")
    # A GPU pod with an emptyDir may not be deleted (gpuPodDeletion.deleteEmptyDir false) -> drain,
    # which may evict it (drain.deleteEmptyDir true) but a PodDisruptionBudget forbids it.
    client.AppsV1Api(kube).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "guarded"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "guarded"}},
                "template": {
                    "metadata": {"labels": {"app": "guarded"}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "volumes": [{"name": "scratch", "emptyDir": {}}],
                        "containers": [
                            {
                                "name": "c",
                                "image": "cuda",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                            }
                        ],
                    },
                },
            },
        },
    )
    client.PolicyV1Api(kube).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "guard"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )

    def guarded() -> list[str]:
        pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector="app=guarded").items
        return [p.metadata.name for p in pods if p.status.phase == "Running"]

    before = wait_for(guarded, REACT_S, what="guarded pod running")
    gpu_cluster.seed_patch()
    with UpgradeStateWatch(kube, nodes) as sampler:
        wait_for(lambda: states(kube, nodes)[node] == "upgrade-failed", READY_S, what="upgrade-failed")
    assert "drain-required" in sampler.seen
    assert guarded() == before, "the PodDisruptionBudget was not honoured"

    # The admin fixes the cause and relabels, as the seed says.
    client.PolicyV1Api(kube).delete_namespaced_pod_disruption_budget("guard", namespace)
    relabel_and_recover(kube, namespace, gpu_cluster, node, nodes)


def test_wait_for_completion_holds_the_node_until_the_job_pod_completes(
    kube: client.ApiClient,
    namespace: str,
    gpu_cluster: Fleet,
) -> None:
    nodes = gpu_cluster(
        2,
        upgrade_policy={
            "waitForCompletion": {"podSelector": "job=batch"},
            "maxParallelUpgrades": 2,
            "maxUnavailable": "100%",
        },
    )
    node, other = nodes
    gpu_cluster.start_operator()
    wait_for(lambda: all_done(kube, nodes), STEP_S, what="initial label")
    start_job(kube, namespace, node, "batch")
    wait_for(
        lambda: client.CoreV1Api(kube).read_namespaced_pod("batch", namespace).status.phase == "Running",
        REACT_S,
        what="batch pod running",
    )
    gpu_cluster.seed_patch()
    wait_for(lambda: states(kube, nodes)[node] == "wait-for-jobs-required", STEP_S, what="waiting for jobs")
    # The other node (no job on it) is not held by this one's wait: it finishes meanwhile.
    wait_for(
        lambda: (
            states(kube, nodes)[other] == "upgrade-done"
            and new_driver_ready(kube, namespace, [other], "510.85.02")
        ),
        STEP_S,
        what="the other node upgraded while the first waits",
    )
    assert states(kube, nodes)[node] == "wait-for-jobs-required", "did not wait for the job"
    # The job finishes.
    client.CoreV1Api(kube).patch_namespaced_pod_status("batch", namespace, {"status": {"phase": "Succeeded"}})
    client.CoreV1Api(kube).delete_namespaced_pod("batch", namespace)
    wait_for(
        lambda: all_done(kube, nodes) and new_driver_ready(kube, namespace, nodes, "510.85.02"),
        READY_S,
        what="upgrade after the job",
    )


def test_operator_killed_mid_upgrade_resumes_from_the_labels(
    kube: client.ApiClient,
    namespace: str,
    gpu_cluster: Fleet,
) -> None:
    nodes = gpu_cluster(3, upgrade_policy={"maxParallelUpgrades": 1})
    first = gpu_cluster.start_operator()
    wait_for(lambda: all_done(kube, nodes), STEP_S, what="initial labels")
    gpu_cluster.seed_patch()

    def in_flight() -> dict[str, str] | None:
        now = states(kube, nodes)
        return now if any(s in IN_FLIGHT for s in now.values()) else None

    seen = wait_for(in_flight, STEP_S, what="an upgrade in flight")
    first.kill()
    mid = states(kube, nodes)
    gpu_cluster.start_operator(wait_role=None)
    wait_for(
        lambda: new_driver_ready(kube, namespace, nodes, "510.85.02") and all_done(kube, nodes),
        UPGRADE_S,
        what="resumed and finished",
    )
    # NB: kwok readies a pod at once, so the node seen in flight may finish its chain between that
    # poll and the kill (seen once in a full run: one node done, two upgrade-required): the kill
    # then lands between two nodes, the fleet's upgrade still mid-way, resumed from the labels.
    assert any(s in IN_FLIGHT for s in seen.values()), seen
    assert any(s != "upgrade-done" for s in mid.values()), (seen, mid)
    assert json.dumps(mid)  # recorded for the failure message above


def test_driver_image_pull_failing_times_out_into_upgrade_failed(
    kube: client.ApiClient,
    namespace: str,
    gpu_cluster: Fleet,
) -> None:
    nodes = gpu_cluster(2)
    operator = gpu_cluster.start_operator(env={"OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS": "5"})
    wait_for(lambda: all_done(kube, nodes), STEP_S, what="initial label")
    # The new version's image cannot be pulled: its pods carry the harness's pull-failure fate.
    failing = {stages.FATE_ANNOTATION: stages.FATE_IMAGE_PULL_FAILING}
    patch_policy(kube, {"driver": {"version": "510.85.02"}, "daemonsets": {"annotations": failing}})
    with UpgradeStateWatch(kube, nodes) as sampler:
        failed = wait_for(
            lambda: [n for n, s in states(kube, nodes).items() if s == "upgrade-failed"],
            READY_S,
            what="upgrade-failed after the pod-restart timeout",
        )
        # The window: the failed node holds the only slot, so no other node may start in 3 s
        # (a pass runs within 0.2 s of a change; the re-check every 1 s in the tests).
        time.sleep(3)
    assert len(failed) == 1 and "pod-restart-required" in sampler.seen
    [node] = failed
    [other] = [n for n in nodes if n != node]
    assert states(kube, nodes)[other] in ("upgrade-done", "upgrade-required")
    assert sampler.max_in_flight <= 1
    assert client.CoreV1Api(kube).read_node(node).spec.unschedulable, "the upgrade's cordon is kept"
    wait_for(
        lambda: operator.metric("gpu_operator_nodes_upgrades_failed") == 1, REACT_S, what="failed metric 1"
    )
    wait_for(
        lambda: [
            e
            for e in client.CoreV1Api(kube).list_namespaced_event("default").items
            if e.reason == "GPUDriverUpgrade"
            and e.involved_object.name == node
            and e.message == "Successfully updated node state label to [upgrade-failed]"
        ],
        REACT_S,
        what="GPUDriverUpgrade event about the failed node",
    )

    # The admin fixes the image and relabels, as the seed says: the node recovers and is uncordoned.
    patch_policy(kube, {"daemonsets": {"annotations": None}})
    relabel_and_recover(kube, namespace, gpu_cluster, node, nodes)
