"""We test these aspects of the driver DaemonSets on the local control plane, with the real
DaemonSet controller, scheduler and kwok's fake kubelets:

(a) nodes on two RHCOS versions -> two DaemonSets, each pod only on its matching nodes;
(b) an MCO-style update of every node from V1 to V2: the V2 DaemonSet appears with the first
    migrated node, V1 is deleted only after its last node moved, and no node ever runs two
    driver pods (sampled);
(c) a missing driver-toolkit tag -> labelled DaemonSet, condition and Event; the tag appears ->
    the DaemonSet is updated;
(d) the ImageStream deleted -> nothing deleted, a clear status;
(e) a vanilla cluster with ubuntu20.04 and ubuntu22.04 nodes -> two DaemonSets, right images;
(f) the operator killed in the middle of (b) -> converges, no duplicate or orphan DaemonSet;
(g) `kubectl get pods -n <ns> -lapp.kubernetes.io/component=nvidia-driver` lists every driver pod;
(h) the last node of a version leaves it and comes straight back (gaps of 0 to 1 s, so the
    return lands before, during and after the delete): the version's DaemonSet exists again,
    the node runs a Ready driver pod of it, and the other version's DaemonSet is gone;
(i) RHCOS 9 (`9.6.<date>-0`) and RHCOS 10 (`10.1.<date>-0`) pools side by side, each build with
    its own DaemonSet, DTK tag (never `latest`/`latest-rhel-10`) and driver OS tag; the RHCOS 9
    pool moves to RHCOS 10 and the RHCOS 10 pool to the next 10.1 build, never two driver
    pods on a node, and the 9.6 DaemonSet goes with its last node.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    BackgroundSampler,
    condition,
    kubectl,
    patch_policy,
    read_policy,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

V1 = "416.94.202407030122-0"
V2 = "417.94.202410090854-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
TAGS = {V1: DTK + "1" * 64, V2: DTK + "2" * 64}
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
DS_V1, DS_V2 = f"nvidia-driver-daemonset-{V1}", f"nvidia-driver-daemonset-{V2}"


def driver_daemonsets(kube: client.ApiClient, namespace: str) -> dict[str, Any]:
    found = client.AppsV1Api(kube).list_namespaced_daemon_set(
        namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
    )
    return {ds.metadata.name: ds for ds in found.items}


def driver_pods_by_node(kube: client.ApiClient, namespace: str) -> dict[str, list[str]]:
    by_node: dict[str, list[str]] = collections.defaultdict(list)
    for pod in client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=DRIVER_PODS).items:
        if pod.spec.node_name:
            by_node[pod.spec.node_name].append(pod.metadata.labels.get(labels.DTK_RHCOS, "?"))
    return dict(by_node)


def all_ready(kube: client.ApiClient, namespace: str, expected: set[str]) -> bool:
    daemonsets = driver_daemonsets(kube, namespace)
    # NB: a status the DaemonSet controller has not written for this generation yet says nothing.
    return set(daemonsets) == expected and all(
        ds.status.observed_generation == ds.metadata.generation
        and ds.status.desired_number_scheduled > 0
        and ds.status.number_ready == ds.status.desired_number_scheduled
        for ds in daemonsets.values()
    )


def v1_nodes_driven(
    kube: client.ApiClient,
    namespace: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> tuple[list[str], OperatorProcess]:
    """Three RHCOS V1 nodes and the operator, once their V1 driver DaemonSet is ready.
    Budget READY_S: the operator's start, a pass, the DaemonSet controller and kwok."""
    nodes = gpu_nodes(3, rhcos=V1)
    operator = start_operator()
    wait_for(lambda: all_ready(kube, namespace, {DS_V1}), READY_S, what="V1 DaemonSet ready")
    return nodes, operator


@pytest.fixture
def gpu_nodes(kube: client.ApiClient) -> Iterator[Callable[..., list[str]]]:
    made: list[str] = []

    def make(count: int, **kwargs: Any) -> list[str]:
        vanilla = kwargs.pop("vanilla", False)
        names = [unique_name("gpu") for _ in range(count)]
        builder = fake_nodes.vanilla_gpu_node if vanilla else fake_nodes.gpu_node
        fake_nodes.create_nodes(kube, [builder(name, **kwargs) for name in names])
        made.extend(names)
        return names

    yield make
    fake_nodes.delete_nodes(kube, made)


@pytest.fixture
def dtk_cluster(
    openshift: client.ApiClient, namespace: str, apply_policy: Callable[..., dict[str, Any]]
) -> str:
    """OpenShift emulation with driver-toolkit tags for V1 and V2 and `cluster-policy` applied."""
    openshift_emulation.set_driver_toolkit_tags(openshift, TAGS)
    apply_policy()
    return namespace


def test_a_one_daemonset_per_rhcos_version_pods_only_on_matching_nodes(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    control_plane: LocalControlPlane,
) -> None:
    old = gpu_nodes(2, rhcos=V1)
    new = gpu_nodes(1, rhcos=V2)
    start_operator()
    names = {f"nvidia-driver-daemonset-{V1}", f"nvidia-driver-daemonset-{V2}"}
    wait_for(lambda: all_ready(kube, dtk_cluster, names), STEP_S, what="two ready driver DaemonSets")
    daemonsets = driver_daemonsets(kube, dtk_cluster)
    for version in (V1, V2):
        ds = daemonsets[f"nvidia-driver-daemonset-{version}"]
        assert ds.metadata.labels[labels.DTK_DAEMONSET] == "true"
        assert ds.metadata.labels[labels.DTK_RHCOS] == version
        assert ds.spec.update_strategy.type == "OnDelete"
        containers = {c.name: c for c in ds.spec.template.spec.containers}
        assert containers["openshift-driver-toolkit-ctr"].image == TAGS[version]
        volumes = {v.name for v in ds.spec.template.spec.volumes}
        assert "shared-nvidia-driver-toolkit" in volumes
        assert ds.metadata.owner_references[0].kind == "ClusterPolicy"
    by_node = driver_pods_by_node(kube, dtk_cluster)
    assert {node: by_node[node] for node in old} == {node: [V1] for node in old}
    assert {node: by_node[node] for node in new} == {node: [V2] for node in new}
    # (g) the seed's command lists every driver pod.
    listed = kubectl(control_plane, "get", "pods", "-n", dtk_cluster, f"-l{DRIVER_PODS}", "-o", "name").stdout
    assert len(listed.split()) == 3
    # NB: ready means every operand Ready on every GPU node (driver -> toolkit -> plugin -> validator).
    wait_for(
        lambda: (read_policy(kube).get("status") or {}).get("state") == "ready", READY_S, what="policy ready"
    )
    status = read_policy(kube)["status"]
    summary = {entry["key"]: entry for entry in status["driverDaemonSets"]}
    assert summary[V1]["nodes"] == 2 and summary[V1]["dtkImage"] == TAGS[V1]


class PodSampler(BackgroundSampler):
    """Samples driver pods per node; remembers the worst moment."""

    def __init__(self, kube: client.ApiClient, namespace: str) -> None:
        super().__init__()
        self._kube, self._namespace = kube, namespace
        self.max_pods_on_a_node = 0
        self.worst: dict[str, list[str]] = {}

    def sample(self) -> None:
        by_node = driver_pods_by_node(self._kube, self._namespace)
        worst = max((len(pods) for pods in by_node.values()), default=0)
        if worst > self.max_pods_on_a_node:
            self.max_pods_on_a_node, self.worst = worst, by_node


def run_mco_upgrade(
    kube: client.ApiClient,
    namespace: str,
    nodes: list[str],
    on_step: Callable[[str, str], None] | None = None,
) -> list[tuple[str, str, set[str]]]:
    """MCO-style V1 -> V2, recording the driver DaemonSets present after each node's phases."""
    record: list[tuple[str, str, set[str]]] = []

    def step(node: str, phase: str) -> None:
        record.append((node, phase, set(driver_daemonsets(kube, namespace))))
        if on_step:
            on_step(node, phase)

    fake_nodes.simulate_mco_update(kube, nodes, V2, max_unavailable=1, on_step=step)
    return record


def test_b_mco_update_moves_nodes_between_daemonsets_and_gc_waits_for_the_last_node(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    nodes, _ = v1_nodes_driven(kube, dtk_cluster, gpu_nodes, start_operator)
    ds_v1, ds_v2 = DS_V1, DS_V2

    with PodSampler(kube, dtk_cluster) as sampler:
        first_moved = nodes[0]
        seen_v2_after_first: list[bool] = []

        def on_step(node: str, phase: str) -> None:
            if node == first_moved and phase == fake_nodes.PHASE_DONE:
                # Budget REACT_S: a node moving to another driver key runs a pass at once.
                wait_for(lambda: ds_v2 in driver_daemonsets(kube, dtk_cluster), REACT_S, what="V2 DaemonSet")
                seen_v2_after_first.append(True)
            if node != nodes[-1] and phase == fake_nodes.PHASE_DONE:
                # V1 still has nodes: it must still exist.
                assert ds_v1 in driver_daemonsets(kube, dtk_cluster)

        run_mco_upgrade(kube, dtk_cluster, nodes, on_step)
        assert seen_v2_after_first == [True]
        wait_for(lambda: all_ready(kube, dtk_cluster, {ds_v2}), STEP_S, what="only V2 left, ready")
    assert sampler.samples >= 5
    assert sampler.max_pods_on_a_node <= 1, f"two driver pods on a node: {sampler.worst}"
    assert set(driver_pods_by_node(kube, dtk_cluster)) == set(nodes)


def move_node(kube: client.ApiClient, node: str, version: str) -> None:
    """The node as it looks after rebooting into `version` (NFD's label first, then the kubelet's osImage)."""
    core = client.CoreV1Api(kube)
    core.patch_node(node, {"metadata": {"labels": {labels.OSTREE_VERSION: version}}})
    osimage = f"Red Hat Enterprise Linux CoreOS {version} (Plow)"
    core.patch_node_status(node, {"status": {"nodeInfo": {"osImage": osimage}}})


def test_h_a_version_that_loses_its_last_node_and_gets_it_back_runs_its_driver_again(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    (node,) = gpu_nodes(1, rhcos=V1)
    start_operator()
    ds_v1 = f"nvidia-driver-daemonset-{V1}"
    wait_for(lambda: all_ready(kube, dtk_cluster, {ds_v1}), STEP_S, what="V1 ready")
    # NB: the moves start once the operator is quiet, so that no long first pass swallows them.
    wait_for(
        lambda: (read_policy(kube).get("status") or {}).get("state") == "ready", READY_S, what="policy ready"
    )

    def back_on_v1() -> bool:
        pods = client.CoreV1Api(kube).list_namespaced_pod(dtk_cluster, label_selector=DRIVER_PODS).items
        ready_here = [
            p
            for p in pods
            if p.spec.node_name == node
            and p.metadata.deletion_timestamp is None
            and p.metadata.owner_references[0].name == ds_v1
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
        ]
        return all_ready(kube, dtk_cluster, {ds_v1}) and len(ready_here) == 1

    recreated: dict[float, bool] = {}
    for gap in (0.0, 0.05, 0.15, 0.4, 1.0):
        uid = driver_daemonsets(kube, dtk_cluster)[ds_v1].metadata.uid
        move_node(kube, node, V2)
        time.sleep(gap)  # the gap under test: how long the node is away from V1
        move_node(kube, node, V1)
        wait_for(
            back_on_v1, REACT_S, interval=0.1, what=f"V1's DaemonSet and a Ready pod on {node} (gap {gap}s)"
        )
        recreated[gap] = driver_daemonsets(kube, dtk_cluster)[ds_v1].metadata.uid != uid
    # NB: the delete follows the node event within tens of milliseconds: a second away from
    # V1 is ample time for its DaemonSet to be deleted, and it came back with the node.
    assert recreated[1.0], recreated


def test_c_missing_tag_labels_daemonset_reports_and_recovers_when_the_tag_appears(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    version = "418.94.202501010000-0"
    nodes = gpu_nodes(1, rhcos=version)
    start_operator()
    name = f"nvidia-driver-daemonset-{version}"
    ds = wait_for(
        lambda: driver_daemonsets(kube, dtk_cluster).get(name), STEP_S, what="DaemonSet with missing tag"
    )
    assert ds.metadata.labels[labels.DTK_IMAGE_MISSING] == "true"
    env = {e.name: e.value for c in ds.spec.template.spec.containers for e in c.env or []}
    assert env["RHCOS_IMAGE_MISSING"] == "true"
    missing = wait_for(
        lambda: condition(read_policy(kube), "DriverToolkitImageMissing"), REACT_S, what="condition"
    )
    assert version in missing["message"] and nodes[0] in missing["message"]
    event = wait_for_event(kube, "DriverToolkitImageMissing", version)
    assert event.type == "Warning"

    image = DTK + "3" * 64
    openshift_emulation.set_driver_toolkit_tags(kube, {**TAGS, version: image})

    def updated() -> bool:
        current = driver_daemonsets(kube, dtk_cluster).get(name)
        if current is None or labels.DTK_IMAGE_MISSING in (current.metadata.labels or {}):
            return False
        images = {c.name: c.image for c in current.spec.template.spec.containers}
        return images.get("openshift-driver-toolkit-ctr") == image

    wait_for(updated, REACT_S, what="DaemonSet updated with the new tag")
    wait_for(
        lambda: not condition(read_policy(kube), "DriverToolkitImageMissing"),
        REACT_S,
        what="condition cleared",
    )


def test_d_imagestream_deleted_deletes_nothing_and_says_so(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    gpu_nodes(2, rhcos=V1)
    start_operator()
    name = f"nvidia-driver-daemonset-{V1}"
    wait_for(lambda: all_ready(kube, dtk_cluster, {name}), STEP_S, what="V1 ready")
    uid = driver_daemonsets(kube, dtk_cluster)[name].metadata.uid
    client.CustomObjectsApi(kube).delete_namespaced_custom_object(
        "image.openshift.io", "v1", "openshift", "imagestreams", "driver-toolkit"
    )
    problem = wait_for(
        lambda: condition(read_policy(kube), "DriverToolkitImageStreamProblem"),
        REACT_S,
        what="stream problem condition",
    )
    assert "driver-toolkit" in problem["message"]
    current = driver_daemonsets(kube, dtk_cluster)[name]
    assert current.metadata.uid == uid, "the DaemonSet was replaced"
    images = {c.name: c.image for c in current.spec.template.spec.containers}
    assert images["openshift-driver-toolkit-ctr"] == TAGS[V1], "a running DaemonSet lost its DTK image"


def test_e_vanilla_cluster_one_daemonset_per_os_version(
    kube: client.ApiClient,
    namespace: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    focal = gpu_nodes(1, vanilla=True, os_version="20.04", kernel="5.15.0-105-generic")
    jammy = gpu_nodes(2, vanilla=True, os_version="22.04")
    apply_policy(spec={"driver": {"version": "550.90.07"}})
    start_operator()
    names = {"nvidia-driver-daemonset-ubuntu20.04", "nvidia-driver-daemonset-ubuntu22.04"}
    wait_for(lambda: all_ready(kube, namespace, names), STEP_S, what="two vanilla DaemonSets ready")
    daemonsets = driver_daemonsets(kube, namespace)
    for os_tag in ("ubuntu20.04", "ubuntu22.04"):
        spec = daemonsets[f"nvidia-driver-daemonset-{os_tag}"].spec.template.spec
        assert [c.name for c in spec.containers] == ["nvidia-driver-ctr"]
        assert spec.containers[0].image == f"nvcr.io/nvidia/driver:550.90.07-{os_tag}"
    by_node = driver_pods_by_node(kube, namespace)
    assert set(by_node) == set(focal + jammy)


def test_f_operator_killed_mid_upgrade_converges_without_duplicates_or_orphans(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    nodes, first = v1_nodes_driven(kube, dtk_cluster, gpu_nodes, start_operator)
    ds_v2 = DS_V2
    replacement: list[OperatorProcess] = []

    def on_step(node: str, phase: str) -> None:
        if node == nodes[1] and phase == fake_nodes.PHASE_CORDON and not replacement:
            first.kill()
            replacement.append(start_operator(wait_role=None))

    run_mco_upgrade(kube, dtk_cluster, nodes, on_step)

    def driver_pods() -> list[Any]:
        listed = client.CoreV1Api(kube).list_namespaced_pod(dtk_cluster, label_selector=DRIVER_PODS)
        return list(listed.items)

    def converged() -> bool:
        # The DaemonSet's status can still carry the counts of a moment when fewer
        # nodes had migrated, so convergence is also judged on the pods themselves.
        # NB: a replacement pod is listed before the scheduler binds it (no node yet) and a
        # V1 pod being deleted is still listed: both are "not yet", not a crash.
        pods = driver_pods()
        on_nodes = sorted(p.spec.node_name or "<unbound>" for p in pods)
        return (
            all_ready(kube, dtk_cluster, {ds_v2})
            and not any(p.metadata.deletion_timestamp for p in pods)
            and on_nodes == sorted(nodes)
        )

    wait_for(converged, READY_S, what="converged on V2 only")
    assert len(driver_daemonsets(kube, dtk_cluster)) == 1
    pods = driver_pods()
    assert sorted(p.spec.node_name or "<unbound>" for p in pods) == sorted(nodes)
    assert all(p.metadata.owner_references[0].name == ds_v2 for p in pods)


def test_precompiled_image_that_cannot_be_pulled_falls_back_to_a_driver_toolkit_build(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    openshift_emulation.set_driver_toolkit_tags(openshift, TAGS)
    nodes = gpu_nodes(2, rhcos=V1)
    apply_policy(
        spec={
            "driver": {
                "usePrecompiled": True,
                "version": "570",
                "precompiledFallback": {
                    "enabled": True,
                    "version": "570.124.06",
                    "imagePullTimeoutSeconds": 3,
                },
            }
        }
    )
    start_operator()

    def precompiled() -> list[Any]:
        return [
            ds
            for ds in driver_daemonsets(kube, namespace).values()
            if ds.metadata.labels.get(labels.DRIVER_STRATEGY) == "precompiled"
        ]

    ds = wait_for(precompiled, STEP_S, what="precompiled DaemonSet")[0]
    assert ds.spec.template.spec.containers[0].image.startswith("nvcr.io/nvidia/driver:570-")
    pods = wait_for(
        lambda: [
            p
            for p in client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=DRIVER_PODS).items
            if p.spec.node_name in nodes
        ],
        STEP_S,
        what="precompiled driver pods",
    )
    for pod in pods:
        fake_nodes.set_pod_fate(kube, namespace, pod.metadata.name, "image-pull-failing")

    def fallback_ready() -> bool:
        daemonsets = list(driver_daemonsets(kube, namespace).values())
        return (
            len(daemonsets) == 1
            and daemonsets[0].metadata.labels.get(labels.DRIVER_STRATEGY) == "dtk"
            and daemonsets[0].status.number_ready == 2
        )

    wait_for(fallback_ready, READY_S, what="a ready DTK fallback DaemonSet replacing the precompiled one")
    fallback = next(iter(driver_daemonsets(kube, namespace).values()))
    images = {c.name: c.image for c in fallback.spec.template.spec.containers}
    assert images["nvidia-driver-ctr"].startswith("nvcr.io/nvidia/driver:570.124.06-")
    assert images["openshift-driver-toolkit-ctr"] == TAGS[V1]
    said = wait_for(lambda: condition(read_policy(kube), "PrecompiledDriverFallback"), REACT_S, what="status")
    assert "cannot be pulled" in said["message"]


def test_stale_nfd_label_is_reported_with_the_node_and_both_versions(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    node = gpu_nodes(1, rhcos=V1)[0]
    # NFD has not caught up: the kubelet already runs V2.
    client.CoreV1Api(kube).patch_node_status(
        node, {"status": {"nodeInfo": {"osImage": f"Red Hat Enterprise Linux CoreOS {V2} (Plow)"}}}
    )
    start_operator()
    stale = wait_for(lambda: condition(read_policy(kube), "NodeFeatureLabelStale"), REACT_S, what="condition")
    assert node in stale["message"] and V1 in stale["message"] and V2 in stale["message"]
    event = wait_for_event(kube, "NodeFeatureLabelStale", node)
    assert event.type == "Warning"


def test_switching_off_the_driver_toolkit_hands_nodes_over_without_two_driver_pods(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    nodes = gpu_nodes(2, rhcos=V1)
    start_operator()
    dtk_name = f"nvidia-driver-daemonset-{V1}"
    wait_for(lambda: all_ready(kube, dtk_cluster, {dtk_name}), STEP_S, what="DTK DaemonSet ready")
    with PodSampler(kube, dtk_cluster) as sampler:
        patch_policy(kube, {"operator": {"use_ocp_driver_toolkit": False}})

        def switched() -> bool:
            daemonsets = driver_daemonsets(kube, dtk_cluster)
            return (
                len(daemonsets) == 1
                and dtk_name not in daemonsets
                and all(ds.status.number_ready == 2 for ds in daemonsets.values())
            )

        wait_for(switched, READY_S, what="one ready non-DTK DaemonSet, the DTK one gone")
    assert sampler.max_pods_on_a_node <= 1, f"two driver pods on a node: {sampler.worst}"
    (vanilla,) = driver_daemonsets(kube, dtk_cluster).values()
    assert [c.name for c in vanilla.spec.template.spec.containers] == ["nvidia-driver-ctr"]
    assert set(driver_pods_by_node(kube, dtk_cluster)) == set(nodes)


def test_cluster_proxy_and_trusted_ca_reach_the_driver_container(
    kube: client.ApiClient,
    dtk_cluster: str,
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    openshift_emulation.set_cluster_proxy(
        kube,
        http="http://proxy.example:3128",
        https="http://proxy.example:3128",
        no_proxy=".cluster.local",
        trusted_ca_configmap="user-ca-bundle",
    )
    gpu_nodes(1, rhcos=V1)
    start_operator()
    name = f"nvidia-driver-daemonset-{V1}"

    def proxied() -> Any:
        ds = driver_daemonsets(kube, dtk_cluster).get(name)
        if ds is None:
            return None
        driver = next(c for c in ds.spec.template.spec.containers if c.name == "nvidia-driver-ctr")
        env = {e.name: e.value for e in driver.env or []}
        return (ds, driver, env) if env.get("HTTPS_PROXY") == "http://proxy.example:3128" else None

    ds, driver, env = wait_for(proxied, STEP_S, what="driver DaemonSet with the cluster proxy env")
    assert ".cluster.local" in env["NO_PROXY"]
    mounts = {m.name: m.mount_path for m in driver.volume_mounts or []}
    assert "trusted-ca" in mounts
    volume = next(v for v in ds.spec.template.spec.volumes if v.name == "trusted-ca")
    configmap = client.CoreV1Api(kube).read_namespaced_config_map(volume.config_map.name, dtk_cluster)
    # OpenShift's network operator fills it because of this label; we never write its data.
    assert configmap.metadata.labels["config.openshift.io/inject-trusted-cabundle"] == "true"
    assert not configmap.data


RHCOS9 = "9.6.20250909-0"
RHCOS10 = "10.1.20251015-0"
RHCOS10_NEXT = "10.1.20251112-0"
STREAM_TAGS = {RHCOS9: DTK + "9" * 64, RHCOS10: DTK + "a" * 64, RHCOS10_NEXT: DTK + "b" * 64}
LATEST_RHEL_10 = DTK + "c" * 64


def test_i_rhcos_9_and_10_pools_side_by_side_and_a_pool_moving_from_9_to_10(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    apply_policy: Callable[..., dict[str, Any]],
    gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    openshift_emulation.set_driver_toolkit_tags(openshift, STREAM_TAGS, latest_rhel_10=LATEST_RHEL_10)
    apply_policy()
    pool9 = gpu_nodes(2, rhcos=RHCOS9)
    pool10 = gpu_nodes(1, rhcos=RHCOS10)
    start_operator()
    ds9, ds10, ds10_next = (f"nvidia-driver-daemonset-{b}" for b in (RHCOS9, RHCOS10, RHCOS10_NEXT))
    wait_for(
        lambda: all_ready(kube, namespace, {ds9, ds10}), READY_S, what="an RHCOS 9 and an RHCOS 10 DaemonSet"
    )
    daemonsets = driver_daemonsets(kube, namespace)
    for build, os_tag in ((RHCOS9, "rhel9"), (RHCOS10, "rhel10")):
        ds = daemonsets[f"nvidia-driver-daemonset-{build}"]
        containers = {c.name: c.image for c in ds.spec.template.spec.containers}
        assert containers["openshift-driver-toolkit-ctr"] == STREAM_TAGS[build]
        assert ds.spec.template.spec.containers[0].image.endswith(f"-{os_tag}"), containers
        assert LATEST_RHEL_10 not in containers.values()
    by_node = driver_pods_by_node(kube, namespace)
    assert {n: by_node[n] for n in pool9 + pool10} == {n: [RHCOS9] for n in pool9} | {
        n: [RHCOS10] for n in pool10
    }

    with PodSampler(kube, namespace) as sampler:
        # the MCO moves the RHCOS 9 pool to RHCOS 10, then the RHCOS 10 pool to its next build
        fake_nodes.simulate_mco_update(kube, pool9, RHCOS10, max_unavailable=1)
        fake_nodes.simulate_mco_update(kube, pool10, RHCOS10_NEXT, max_unavailable=1)
        wait_for(
            lambda: all_ready(kube, namespace, {ds10, ds10_next}), READY_S, what="9.6 gone, both 10.1 ready"
        )
    assert sampler.max_pods_on_a_node <= 1, f"two driver pods on a node: {sampler.worst}"
    by_node = driver_pods_by_node(kube, namespace)
    assert {n: by_node[n] for n in pool9 + pool10} == {n: [RHCOS10] for n in pool9} | {
        n: [RHCOS10_NEXT] for n in pool10
    }
    moved = client.CoreV1Api(kube).read_node(pool9[0]).metadata.labels
    assert (moved[labels.OS_ID], moved[labels.OS_VERSION_ID]) == ("rhel", "10.1")
    next_ds = driver_daemonsets(kube, namespace)[ds10_next]
    assert {c.name: c.image for c in next_ds.spec.template.spec.containers}[
        "openshift-driver-toolkit-ctr"
    ] == STREAM_TAGS[RHCOS10_NEXT]
