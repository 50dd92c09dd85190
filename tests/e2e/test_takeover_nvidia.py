"""We test taking over from NVIDIA's GPU Operator on the local control plane, without its binary:
what its v26.7.0 left for its OperatorHub example policy on GPU nodes of two RHCOS versions
(tests/e2e/data/nvidia-takeover.yaml, captured from a real run by hack/capture_nvidia_fixtures.py:
every object with its managedFields, labels and ownerReferences, the running pods and the
DaemonSets' ControllerRevisions) is restored (harness/nvidia_fixtures.py), with a GPU workload pod
on every GPU node; then ocp-gpu starts, and:

- the policy is `ready` within READY_BUDGET_S (the issue's 30 s) of ocp-gpu leading;
- no driver pod is restarted or replaced (same uids, restart counts unchanged), no GPU workload pod
  is deleted or evicted, no node is cordoned, and no node ever runs two driver pods (sampled);
- every GPU node reads upgrade-done, and `DriverPodsOnPreviousTemplate` counts NVIDIA's driver pods;
- status.migratedFrom lists what was adopted (the MPS control daemon and the `nvidia-cdi`
  RuntimeClass among them: ocp-gpu renders them as NVIDIA's operator does), and what NVIDIA's
  operator left that ocp-gpu renders nothing for and the policy owns (its `nvidia-*` ClusterRoles)
  is gone;
- every object ocp-gpu renders that NVIDIA's operator had made is ocp-gpu's alone (no other field
  manager owns a field of it: the live object is what ocp-gpu applies);
- in the next 30 s ocp-gpu writes nothing.

On vanilla Kubernetes (tests/e2e/data/nvidia-takeover-vanilla.yaml: NVIDIA's v26.7.0 with its Helm
chart's default ClusterPolicy on Ubuntu 22.04 GPU nodes: its single `nvidia-driver-daemonset`,
selector app=nvidia-driver-daemonset, where ocp-gpu runs one DaemonSet per OS), the same takeover:
ready, no driver pod restarted or replaced, no GPU pod lost, no node cordoned, never two driver
pods on a node (sampled), 0 writes in the next 30 s; NVIDIA's driver DaemonSet is gone, and
ocp-gpu's `nvidia-driver-daemonset-ubuntu22.04` is the controller of every one of NVIDIA's
driver pods.  Then the hand back's part that is not NVIDIA's binary: ocp-gpu stopped, its driver
DaemonSets deleted leaving their pods (the documented `kubectl delete daemonset ...
--cascade=orphan`), NVIDIA's DaemonSet made again as NVIDIA's operator renders it for the same
policy (the captured one): it adopts the same driver pods (no second pod on a node, sampled), and
its status counts every pod updated, i.e. each pod's controller-revision-hash is the DaemonSet's
current revision, which is what NVIDIA's upgrade controller (k8s-operator-libs podInSyncWithDS)
requires to leave a driver pod alone.

And, after such a takeover, that a policy change rolls as on any cluster of ocp-gpu's: the
ClusterPolicy's `driver.version` changed, both driver DaemonSets take the new image and the upgrade
controller replaces the driver pods node by node (never more nodes in flight than NVIDIA's example's
`maxParallelUpgrades: 1`, every state seen through a watch; never two driver pods on a node,
sampled), every node ending `upgrade-done` with a Ready driver pod of the new version.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.kube import clients
from ocp_gpu.model import labels, releases
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import nvidia_fixtures
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    IN_FLIGHT,
    REACT_S,
    READY_S,
    STEP_S,
    BackgroundSampler,
    UpgradeStateWatch,
    patch_policy,
    quiet_writes,
    read_policy,
    wait_for,
)

# NB: the default 300 s is less than the sum of one test's budgets (NVIDIA's pods running again
# READY_S, the workloads STEP_S, the takeover READY_S, the 30 s window, the hand back's waits):
# at load 35 the first test was stopped mid-takeover by it.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FIXTURE = Path(__file__).parent / "data" / "nvidia-takeover.yaml"
VANILLA_FIXTURE = Path(__file__).parent / "data" / "nvidia-takeover-vanilla.yaml"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
# Seconds from the moment ocp-gpu leads (it can act) to `ready`, as the issue asks; the process's start
# before it (interpreter, imports, election: ~1 s quiet, 7 to 10 s at load 24 to 27) is printed beside
# it.  Measured with concurrent adoption: 3.1 and 4.5 s quiet (load 1), 9 s at load 12, 25.9 to 29.3 s
# at load 24 to 27 (the first pass ~13 s, then the non-driver DaemonSets rolling node by node as
# NVIDIA's policies' maxUnavailable 1 says).  CI's load with two workers is 4 to 10.
READY_BUDGET_S = 30
WORKLOAD = "gpu-workload"
# A driver version other than the release's (the one NVIDIA's operator ran): a change to roll.
NEW_DRIVER_VERSION = "580.95.05"
# One node's driver upgrade (cordon, pod deletion, driver restart, validation, uncordon) takes a
# few of the node agent's passes, 5 to 10 s quiet; NVIDIA's example upgrades one node at a time.
# Per node, ten times that on a loaded machine (conftest's budgets).
UPGRADE_PER_NODE_S = 60


def foreign_managers(obj: dict[str, Any]) -> list[str]:
    return sorted(
        f"{m.get('manager')} ({m.get('operation')})"
        for m in obj["metadata"].get("managedFields") or ()
        if not m.get("subresource") and (m.get("manager") != "ocp-gpu" or m.get("operation") != "Apply")
    )


class Invariants(BackgroundSampler):
    """Sampled: the most driver pods on a node, cordoned nodes, GPU workload pods gone or going."""

    def __init__(self, kube: client.ApiClient, namespace: str, nodes: list[str], workloads: set[str]) -> None:
        super().__init__()
        self.core = client.CoreV1Api(kube)
        self.namespace, self.nodes, self.workloads = namespace, nodes, workloads
        self.most_drivers = 0
        self.cordoned: set[str] = set()
        self.workloads_lost: set[str] = set()

    def sample(self) -> None:
        pods = self.core.list_namespaced_pod(self.namespace).items
        drivers = collections.Counter(
            p.spec.node_name
            for p in pods
            if (p.metadata.labels or {}).get(labels.COMPONENT) == labels.DRIVER_COMPONENT and p.spec.node_name
        )
        self.most_drivers = max(self.most_drivers, max(drivers.values(), default=0))
        alive = {p.metadata.uid for p in pods if not p.metadata.deletion_timestamp}
        self.workloads_lost |= self.workloads - alive
        for name in self.nodes:
            if self.core.read_node(name).spec.unschedulable:
                self.cordoned.add(name)


@pytest.fixture
def scc_api(kube: client.ApiClient) -> Iterator[None]:
    """OpenShift serves SecurityContextConstraints (NVIDIA's operator made some); the emulation does not."""
    crds = client.ApiextensionsV1Api(kube)
    crd = nvidia_fixtures.SCC_CRD
    crds.create_custom_resource_definition(crd)
    wait_for(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in crds.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or ()
        ),
        STEP_S,
        what="the SCC CRD established",
    )
    yield
    crds.delete_custom_resource_definition(crd["metadata"]["name"])


@pytest.fixture
def restored(
    kube: client.ApiClient,
    api: clients.ApiClient,
    openshift: client.ApiClient,
    monitoring_api: client.ApiClient,
    scc_api: None,
    namespace: str,
) -> Iterator[nvidia_fixtures.Restored]:
    header, _ = nvidia_fixtures.load(FIXTURE)
    openshift_emulation.set_driver_toolkit_tags(
        openshift, {version: DTK + str(i + 1) * 64 for i, version in enumerate(header["rhcos"])}
    )
    made = nvidia_fixtures.restore(kube, api, FIXTURE, namespace)
    yield made
    custom = client.CustomObjectsApi(kube)
    custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", made.policy_name)
    fake_nodes.delete_nodes(kube, list(made.nodes.values()))


def driver_pods(kube: client.ApiClient, namespace: str) -> dict[str, Any]:
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=DRIVER_PODS).items
    return {p.metadata.uid: p for p in pods if not p.metadata.deletion_timestamp}


def restarts(pod: Any) -> int:
    return sum(s.restart_count for s in pod.status.container_statuses or ())


def assert_undisturbed(
    kube: client.ApiClient,
    namespace: str,
    nodes: list[str],
    before: dict[str, Any],
    invariants: Invariants,
    writes: list[str],
) -> dict[str, Any]:
    """After a takeover: the same driver pods, none restarted, never two on a node, none cordoned, no
    GPU workload lost, nothing written in the quiet window, every node upgrade-done. Returns the pods."""
    after = driver_pods(kube, namespace)
    assert set(after) == set(before), "a driver pod was replaced"
    assert {uid: restarts(p) for uid, p in after.items()} == {uid: restarts(p) for uid, p in before.items()}
    assert invariants.samples > 0
    assert invariants.most_drivers == 1
    assert invariants.cordoned == set()
    assert invariants.workloads_lost == set()
    assert writes == [], writes
    core = client.CoreV1Api(kube)
    for node in nodes:
        assert core.read_node(node).metadata.labels.get(labels.UPGRADE_STATE) == "upgrade-done"
    return after


def nvidias_driver_pods_running(kube: client.ApiClient, namespace: str, nodes: list[str]) -> dict[str, Any]:
    """NVIDIA's pods run again, adopted by NVIDIA's DaemonSets, one driver pod per GPU node."""
    pods: dict[str, Any] = wait_for(
        lambda: (
            pods
            if len(pods := driver_pods(kube, namespace)) == len(nodes)
            and all(p.status.phase == "Running" and p.metadata.owner_references for p in pods.values())
            else None
        ),
        READY_S,
        what="NVIDIA's driver pods running again",
    )
    return pods


def gpu_workloads(kube: client.ApiClient, namespace: str, nodes: list[str]) -> set[str]:
    """One running GPU workload pod (`nvidia.com/gpu: 1`) on each node; their uids."""
    core = client.CoreV1Api(kube)
    workloads: set[str] = set()
    for node in nodes:
        pod = core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"generateName": f"{WORKLOAD}-", "labels": {"app": WORKLOAD}},
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                    ],
                },
            },
        )
        workloads.add(pod.metadata.uid)
    wait_for(
        lambda: all(
            p.status.phase == "Running"
            for p in core.list_namespaced_pod(namespace, label_selector=f"app={WORKLOAD}").items
        ),
        STEP_S,
        what="the GPU workload pods running",
    )
    return workloads


def take_over(
    kube: client.ApiClient, start_operator: Callable[..., OperatorProcess], policy: str
) -> OperatorProcess:
    """ocp-gpu starts with the images its install sets (by digest: model/releases, NVIDIA's
    v26.7.0 set) and takes NVIDIA's ClusterPolicy over, until it is ready."""
    # NB: a 30 s lease (conftest's TEST_LEASE_S is for the tests that change leaders): at load 35 a renewal
    # took longer than 4 s mid-takeover, the operator stopped and the policy never became ready
    operator = start_operator(
        "--lease-duration", "30", "--lease-renew-deadline", "20", image_env=releases.with_release_defaults({})
    )
    assert operator.started_at is not None
    leading = time.monotonic() - operator.started_at
    wait_for(
        lambda: (read_policy(kube, policy).get("status") or {}).get("state") == "ready",
        READY_S,
        interval=0.2,
        what="the policy ready after the takeover",
    )
    ready = time.monotonic() - operator.started_at
    # Where the time went (the operator's log has the pass and each state change).
    print(
        f"takeover: process start to leading {leading:.1f} s, to ready {ready:.1f} s, leading to ready "
        f"{ready - leading:.1f} s (at {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f})"
    )
    assert ready - leading <= READY_BUDGET_S, (ready, leading)
    return operator


def test_ocp_gpu_takes_over_from_nvidias_operator_without_a_driver_restart(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    restored: nvidia_fixtures.Restored,
    start_operator: Callable[..., OperatorProcess],
    control_plane: LocalControlPlane,
) -> None:
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    nodes = sorted(restored.nodes.values())
    header_rhcos = nvidia_fixtures.load(FIXTURE)[0]["rhcos"]
    assert restored.skipped == [], restored.skipped
    before = nvidias_driver_pods_running(kube, namespace, nodes)
    # the driver NVIDIA's operator ran is the one ocp-gpu's release defaults to: the same driver
    assert nvidia_fixtures.driver_image(FIXTURE) == releases.with_release_defaults({})["DRIVER_IMAGE"]
    workloads = gpu_workloads(kube, namespace, nodes)

    with Invariants(kube, namespace, nodes, workloads) as invariants:
        # The images as ocp-gpu's install sets them (by digest: model/releases): NVIDIA's v26.7.0 set.
        take_over(kube, start_operator, restored.policy_name)
        # The window: 30 s of nothing changing after the takeover, in which nothing is written.
        writes = quiet_writes(control_plane, 30)

    assert_undisturbed(kube, namespace, nodes, before, invariants, writes)
    status = read_policy(kube, restored.policy_name)["status"]
    migrated = status["migratedFrom"]
    assert f"DaemonSet {namespace}/nvidia-driver-daemonset-{header_rhcos[0]}" in migrated["adopted"]
    # ocp-gpu renders the MPS control daemon and, with CDI on (the example's), the nvidia-cdi and
    # nvidia-legacy RuntimeClasses as NVIDIA's operator does: adopted, not deleted.
    assert f"DaemonSet {namespace}/nvidia-device-plugin-mps-control-daemon" in migrated["adopted"]
    assert f"ServiceAccount {namespace}/nvidia-device-plugin-mps-control-daemon" in migrated["adopted"]
    assert not [item for item in migrated["deleted"] if item.startswith(("RuntimeClass ", "DaemonSet "))]
    node_api = client.NodeV1Api(kube)
    for name in ("nvidia", "nvidia-cdi", "nvidia-legacy"):
        runtime_class = node_api.read_runtime_class(name)
        assert runtime_class.metadata.labels.get(labels.MANAGED_BY) == labels.MANAGED_BY_VALUE, name
    # what NVIDIA's operator left that ocp-gpu renders nothing for, owned by the policy: deleted
    # (NVIDIA's ClusterRoles where ocp-gpu's are ocp-gpu-nvidia-*)
    assert any(item.startswith("ClusterRole ") for item in migrated["deleted"]), migrated["deleted"]
    assert migrated["left"] == []
    previous = next(c for c in status["conditions"] if c["type"] == "DriverPodsOnPreviousTemplate")
    assert previous["message"].startswith(f"{len(nodes)} driver pod(s) run an older template")
    # Everything ocp-gpu applies under a name NVIDIA's operator had used is ocp-gpu's alone.
    adopted = []
    for kind, name in restored.objects:
        reader = {
            "DaemonSet": lambda n: apps.read_namespaced_daemon_set(n, namespace, _preload_content=False),
            "ServiceAccount": lambda n: core.read_namespaced_service_account(
                n, namespace, _preload_content=False
            ),
            "ConfigMap": lambda n: core.read_namespaced_config_map(n, namespace, _preload_content=False),
            "Service": lambda n: core.read_namespaced_service(n, namespace, _preload_content=False),
        }.get(kind)
        if reader is None:
            continue
        try:
            obj = json.loads(reader(name).data)
        except client.exceptions.ApiException as error:
            # a leftover deleted (status.migratedFrom.deleted)
            assert error.status == 404 and f"{kind} {namespace}/{name}" in migrated["deleted"], (kind, name)
            continue
        if (obj["metadata"].get("labels") or {}).get(labels.MANAGED_BY) != labels.MANAGED_BY_VALUE:
            continue
        adopted.append(f"{kind} {name}")
        assert foreign_managers(obj) == [], (kind, name, foreign_managers(obj))
    expected = {
        f"DaemonSet {name}"
        for name in (
            "nvidia-container-toolkit-daemonset",
            "nvidia-device-plugin-daemonset",
            "nvidia-operator-validator",
            "gpu-feature-discovery",
            *(f"nvidia-driver-daemonset-{version}" for version in nvidia_fixtures.load(FIXTURE)[0]["rhcos"]),
        )
    }
    assert expected <= set(adopted), adopted


def driver_version_ready(pod: Any, version: str) -> bool:
    """The pod runs the driver image of `version` (`...driver:<version>-<os>`) and is Ready."""
    return any(f"/driver:{version}-" in c.image for c in pod.spec.containers) and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ()
    )


def test_a_driver_version_change_after_the_takeover_rolls_node_by_node(
    kube: client.ApiClient,
    namespace: str,
    restored: nvidia_fixtures.Restored,
    start_operator: Callable[..., OperatorProcess],
) -> None:
    apps = client.AppsV1Api(kube)
    nodes = sorted(restored.nodes.values())
    rhcos = nvidia_fixtures.load(FIXTURE)[0]["rhcos"]
    nvidias = nvidias_driver_pods_running(kube, namespace, nodes)
    take_over(kube, start_operator, restored.policy_name)
    wait_for(
        lambda: all(
            client.CoreV1Api(kube).read_node(n).metadata.labels.get(labels.UPGRADE_STATE) == "upgrade-done"
            for n in nodes
        ),
        REACT_S,
        what="every GPU node upgrade-done after the takeover",
    )
    # the takeover restarted nothing: the drivers are still NVIDIA's pods
    assert set(driver_pods(kube, namespace)) == set(nvidias)
    upgrade_policy = read_policy(kube, restored.policy_name)["spec"]["driver"]["upgradePolicy"]
    parallel = upgrade_policy["maxParallelUpgrades"]
    assert parallel == 1, upgrade_policy  # NVIDIA's OperatorHub example

    with UpgradeStateWatch(kube, nodes) as states, Invariants(kube, namespace, nodes, set()) as invariants:
        patch_policy(kube, {"driver": {"version": NEW_DRIVER_VERSION}}, name=restored.policy_name)
        wait_for(
            lambda: all(
                any(
                    f"/driver:{NEW_DRIVER_VERSION}-" in c.image
                    for c in apps.read_namespaced_daemon_set(
                        f"nvidia-driver-daemonset-{version}", namespace
                    ).spec.template.spec.containers
                )
                for version in rhcos
            ),
            REACT_S,
            what=f"both driver DaemonSets on driver {NEW_DRIVER_VERSION}",
        )
        wait_for(
            lambda: (
                # one pod per node (a pod not yet bound has no node: not yet)
                len(pods) == len(nodes)
                and {p.spec.node_name for p in pods.values()} == set(nodes)
                and all(driver_version_ready(p, NEW_DRIVER_VERSION) for p in pods.values())
                and all(states.current.get(n) == "upgrade-done" for n in nodes)
                if (pods := driver_pods(kube, namespace))
                else False
            ),
            UPGRADE_PER_NODE_S * len(nodes),
            what=f"every node upgrade-done with a Ready driver {NEW_DRIVER_VERSION} pod",
        )

    # node by node: never more nodes in flight than the policy allows, each node went through
    # the upgrade (cordoned, its driver pod restarted) and every one of NVIDIA's pods was replaced
    assert states.max_in_flight <= parallel, states.max_in_flight
    for node in nodes:
        assert {"cordon-required", "pod-restart-required", "upgrade-done"} <= states.seen_by_node[node], (
            node,
            states.seen_by_node[node],
        )
    assert set(driver_pods(kube, namespace)).isdisjoint(nvidias)
    assert invariants.samples > 0
    assert invariants.most_drivers == 1
    assert not any(client.CoreV1Api(kube).read_node(n).spec.unschedulable for n in nodes), (
        "a node left cordoned"
    )
    assert IN_FLIGHT.isdisjoint(states.current.values())


@pytest.fixture
def restored_vanilla(
    kube: client.ApiClient, api: clients.ApiClient, namespace: str
) -> Iterator[nvidia_fixtures.Restored]:
    """NVIDIA's vanilla capture restored: no OpenShift API is served."""
    made = nvidia_fixtures.restore(kube, api, VANILLA_FIXTURE, namespace)
    yield made
    custom = client.CustomObjectsApi(kube)
    custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", made.policy_name)
    fake_nodes.delete_nodes(kube, list(made.nodes.values()))


def test_ocp_gpu_takes_over_nvidias_vanilla_driver_daemonset_and_hands_it_back_without_a_driver_restart(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    restored_vanilla: nvidia_fixtures.Restored,
    start_operator: Callable[..., OperatorProcess],
    control_plane: LocalControlPlane,
) -> None:
    apps = client.AppsV1Api(kube)
    nodes = sorted(restored_vanilla.nodes.values())
    assert restored_vanilla.skipped == [], restored_vanilla.skipped
    assert ("DaemonSet", labels.DRIVER_APP) in restored_vanilla.objects  # NVIDIA's one driver DaemonSet
    before = nvidias_driver_pods_running(kube, namespace, nodes)
    workloads = gpu_workloads(kube, namespace, nodes)

    with Invariants(kube, namespace, nodes, workloads) as invariants:
        operator = take_over(kube, start_operator, restored_vanilla.policy_name)
        # The window: 30 s after the vanilla takeover, in which the operator writes nothing.
        writes = quiet_writes(control_plane, 30)

    after = assert_undisturbed(kube, namespace, nodes, before, invariants, writes)
    # NVIDIA's DaemonSet is gone; ocp-gpu's per-OS one controls every one of NVIDIA's driver pods
    ours = apps.read_namespaced_daemon_set(f"{labels.DRIVER_DAEMONSET_PREFIX}ubuntu22.04", namespace)
    with pytest.raises(client.exceptions.ApiException):
        apps.read_namespaced_daemon_set(labels.DRIVER_APP, namespace)
    for pod in after.values():
        controllers = [ref.uid for ref in pod.metadata.owner_references or () if ref.controller]
        assert controllers == [ours.metadata.uid], (pod.metadata.name, controllers)
    status = read_policy(kube, restored_vanilla.policy_name)["status"]
    adopted = status["migratedFrom"]["adopted"]
    assert f"DaemonSet {namespace}/{ours.metadata.name}" in adopted, adopted

    # The hand back, as far as it is not NVIDIA's binary (module docstring).
    with Invariants(kube, namespace, nodes, workloads) as invariants:
        operator.stop()
        apps.delete_collection_namespaced_daemon_set(
            namespace,
            label_selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE},{labels.COMPONENT}={labels.DRIVER_COMPONENT}",
            propagation_policy="Orphan",
        )
        wait_for(
            lambda: not any(p.metadata.owner_references for p in driver_pods(kube, namespace).values()),
            STEP_S,
            what="ocp-gpu's driver DaemonSets gone, their pods orphaned",
        )
        nvidia_fixtures.recreate(
            api, VANILLA_FIXTURE, namespace, restored_vanilla, "DaemonSet", labels.DRIVER_APP
        )

        def nvidias_again() -> bool:
            ds = apps.read_namespaced_daemon_set(labels.DRIVER_APP, namespace)
            pods = driver_pods(kube, namespace)
            return (
                ds.status.observed_generation == ds.metadata.generation
                and ds.status.desired_number_scheduled == len(nodes)
                and ds.status.updated_number_scheduled == len(nodes)
                and ds.status.number_ready == len(nodes)
                and all(
                    [r.uid for r in p.metadata.owner_references or () if r.controller] == [ds.metadata.uid]
                    for p in pods.values()
                )
            )

        wait_for(
            nvidias_again, REACT_S, what="NVIDIA's DaemonSet controlling the same driver pods, all updated"
        )
    assert set(driver_pods(kube, namespace)) == set(before), "a driver pod was replaced handing back"
    assert invariants.samples > 0
    assert invariants.most_drivers == 1
    assert invariants.workloads_lost == set()
