"""We test these aspects of NVIDIA's GPUCluster (nvidia.com/v1alpha1, its CRD as NVIDIA v26.7.0
ships it) on the local control plane, with the node agent SIMULATION (ocp_gpu_harness/node_agent.py,
dra_slices.py) standing in for NVIDIA's DRA kubelet plugin:

- a GPUCluster with no ClusterPolicy waits, saying so in its status (NoClusterPolicy);
- beside a ClusterPolicy whose `draDriver` is off, the GPUCluster alone brings up the DRA operand:
  the node's GPUs go to DRA (its dra-driver label, no device plugin pod), the kubelet plugin
  DaemonSet's pod is Ready, NVIDIA's DeviceClasses exist and the node publishes its ResourceSlice;
  the GPUCluster is `ready` with NVIDIA's conditions (Ready True Reconciled, Error False);
- the ClusterPolicy turning `draDriver` on refuses the GPUCluster: its status names the
  ClusterPolicy, the field and the fix (Ready False ClusterPolicyOwnsDRA, Error True NVIDIA's
  PrerequisiteNotMet, state notReady), a Warning Event on the GPUCluster says the same, and
  nothing running is deleted (the kubelet plugin DaemonSet is the same object, its pod Ready);
- NVIDIA's schema refuses a second GPUCluster by name (it is a singleton, `gpu-cluster`);
- the ClusterPolicy's `draDriver` off again, the GPUCluster owns the operand again (`ready`);
- deleting the GPUCluster removes what it brought: the kubelet plugin DaemonSet, the DeviceClasses,
  the slice; the node goes back to the device plugin (`nvidia.com/gpu` advertised again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.kube import clients
from ocp_gpu.model import apis
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import crds
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import CRD_PATH, READY_S, kubectl, patch_policy, ready_for_the_spec, wait_for
from .test_dra import DRA, PLUGIN, make_nodes, nvidia_gpus, operand_pods_on, slices_of  # noqa: F401
from .test_dra_compute_domains import device_classes

pytestmark = pytest.mark.e2e

GPU_CLUSTER_CRD = CRD_PATH.with_name("gpuclusters.nvidia.com.yaml")
NAME = "gpu-cluster"
GPU_CLASSES = {"gpu.nvidia.com", "mig.nvidia.com"}
KUBELET_PLUGIN = operand_catalog.DRA_DRIVER.app


@pytest.fixture(scope="session")
def gpu_cluster_crd(control_plane: LocalControlPlane) -> None:
    # NB: before the operator starts: it watches GPUClusters only if their CRD is served then.
    kubectl(control_plane, "apply", "--server-side", "-f", str(GPU_CLUSTER_CRD))
    with control_plane.api_client() as api:
        crds.wait_until_served(api, [f"{apis.GPU_CLUSTER_PLURAL}.{apis.GPU_CLUSTER_GROUP}"])


@pytest.fixture
def gpu_clusters(kube: client.ApiClient, gpu_cluster_crd: None) -> Iterator[client.CustomObjectsApi]:
    custom = client.CustomObjectsApi(kube)
    yield custom
    for item in custom.list_cluster_custom_object(
        apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_VERSION, apis.GPU_CLUSTER_PLURAL
    )["items"]:
        custom.delete_cluster_custom_object(
            apis.GPU_CLUSTER_GROUP,
            apis.GPU_CLUSTER_VERSION,
            apis.GPU_CLUSTER_PLURAL,
            item["metadata"]["name"],
        )


def create(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    body = {
        "apiVersion": apis.GPU_CLUSTER_API_VERSION,
        "kind": apis.GPU_CLUSTER_KIND,
        "metadata": {"name": name},
        # NVIDIA's sample, less DCGM (the ClusterPolicy's): the gpus capability only.
        "spec": {"draDriver": {"computeDomains": {"enabled": False}}},
    }
    created: dict[str, Any] = custom.create_cluster_custom_object(
        apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_VERSION, apis.GPU_CLUSTER_PLURAL, body
    )
    return created


def status_of(custom: client.CustomObjectsApi) -> dict[str, Any]:
    found: dict[str, Any] = custom.get_cluster_custom_object(
        apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_VERSION, apis.GPU_CLUSTER_PLURAL, NAME
    )
    return found.get("status") or {}


def condition(custom: client.CustomObjectsApi, kind: str) -> dict[str, Any] | None:
    return next((c for c in status_of(custom).get("conditions") or () if c["type"] == kind), None)


def reason_is(custom: client.CustomObjectsApi, kind: str, status: str, reason: str) -> bool:
    found = condition(custom, kind)
    return found is not None and (found["status"], found["reason"]) == (status, reason)


def kubelet_plugins(kube: client.ApiClient, namespace: str) -> list[Any]:
    return (
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, label_selector=f"app={KUBELET_PLUGIN}")
        .items
    )


def events_of(kube: client.ApiClient, uid: str, reason: str) -> list[str]:
    found = client.CoreV1Api(kube).list_namespaced_event(
        "default", field_selector=f"involvedObject.uid={uid},reason={reason}"
    )
    return [e.message for e in found.items]


def test_gpu_cluster_owns_the_dra_driver_beside_a_cluster_policy_without_it(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    make_nodes: Callable[..., list[str]],  # noqa: F811
    gpu_clusters: client.CustomObjectsApi,
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (node,) = make_nodes(1, gpus=2)
    start_operator()
    uid = create(gpu_clusters, NAME)["metadata"]["uid"]
    # Budget READY_S: the operator's first pass after its watches' first listings.
    wait_for(
        lambda: reason_is(gpu_clusters, "Ready", "False", "NoClusterPolicy"),
        READY_S,
        what="the GPUCluster waiting for a ClusterPolicy",
    )
    assert status_of(gpu_clusters)["state"] == "notReady"
    assert not kubelet_plugins(kube, namespace)

    # The ClusterPolicy, draDriver off (the default): the GPUCluster owns the DRA driver.
    apply_policy(spec={})

    def dra_up() -> bool:
        labels = client.CoreV1Api(kube).read_node(node).metadata.labels or {}
        ready = [d for d in kubelet_plugins(kube, namespace) if (d.status.number_ready or 0) >= 1]
        return labels.get(DRA) == "true" and bool(ready) and bool(slices_of(api, node))

    # Budget READY_S: the node's label, the DaemonSet's pod placed and readied by the simulation,
    # its slice published.
    wait_for(dra_up, READY_S, what="the DRA operand up on the node, its slice published")
    assert device_classes(api) >= GPU_CLASSES
    assert PLUGIN not in (client.CoreV1Api(kube).read_node(node).metadata.labels or {})
    assert operand_catalog.DEVICE_PLUGIN.app not in operand_pods_on(kube, namespace, node)
    wait_for(lambda: status_of(gpu_clusters).get("state") == "ready", READY_S, what="the GPUCluster ready")
    assert reason_is(gpu_clusters, "Ready", "True", "Reconciled")
    assert reason_is(gpu_clusters, "Error", "False", "Ready")
    assert status_of(gpu_clusters)["namespace"] == namespace
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")
    (daemonset,) = kubelet_plugins(kube, namespace)

    # The ClusterPolicy enables draDriver itself: the GPUCluster is refused, nothing deleted.
    patch_policy(kube, {"draDriver": {"enabled": True}})
    wait_for(
        lambda: reason_is(gpu_clusters, "Ready", "False", "ClusterPolicyOwnsDRA"),
        READY_S,
        what="the GPUCluster refused",
    )
    error = condition(gpu_clusters, "Error")
    assert error is not None and (error["status"], error["reason"]) == ("True", "PrerequisiteNotMet")
    assert "ClusterPolicy 'cluster-policy'" in error["message"]
    assert "spec.draDriver.enabled" in error["message"]
    assert status_of(gpu_clusters)["state"] == "notReady"
    messages = wait_for(
        lambda: events_of(kube, uid, "ClusterPolicyOwnsDRA"), READY_S, what="the refusal's Event"
    )
    assert messages == [error["message"]]
    (still,) = kubelet_plugins(kube, namespace)
    assert still.metadata.uid == daemonset.metadata.uid and (still.status.number_ready or 0) >= 1
    assert slices_of(api, node)

    # A second GPUCluster: NVIDIA's schema refuses any name but gpu-cluster.
    with pytest.raises(client.exceptions.ApiException) as refused:
        create(gpu_clusters, "second")
    assert refused.value.status == 422 and "singleton" in str(refused.value.body)

    # draDriver off again: the GPUCluster owns the DRA driver again, the same DaemonSet.
    patch_policy(kube, {"draDriver": {"enabled": False}})
    wait_for(
        lambda: status_of(gpu_clusters).get("state") == "ready", READY_S, what="the GPUCluster ready again"
    )
    (again,) = kubelet_plugins(kube, namespace)
    assert again.metadata.uid == daemonset.metadata.uid

    # Deleting the GPUCluster removes what it brought; the node goes back to the device plugin.
    gpu_clusters.delete_cluster_custom_object(
        apis.GPU_CLUSTER_GROUP, apis.GPU_CLUSTER_VERSION, apis.GPU_CLUSTER_PLURAL, NAME
    )

    def dra_gone() -> bool:
        labels = client.CoreV1Api(kube).read_node(node).metadata.labels or {}
        return (
            not kubelet_plugins(kube, namespace)
            and not (GPU_CLASSES & device_classes(api))
            and not slices_of(api, node)
            and labels.get(PLUGIN) == "true"
            and labels.get(DRA) != "true"
        )

    wait_for(dra_gone, READY_S, what="the DRA operand gone, the node back to the device plugin")
    wait_for(lambda: nvidia_gpus(kube, node) == "2", READY_S, what="nvidia.com/gpu advertised again")
