"""We test the vGPU manager on OpenShift on the local control plane (OpenShift emulation, kwok nodes):

- a vm-vgpu GPU node on an RHCOS build gets `nvidia-vgpu-manager-daemonset-<build>` with the Driver
  Toolkit sidecar of that build's ImageStream tag, and its pod runs there (no driver pod: a VM node
  runs no container driver);
- the Machine Config Operator (simulated) moving the node to the next build brings that build's
  DaemonSet with its own tag, and the old one is deleted once its last node has left, as the
  driver's per-build DaemonSets are (the same planning code: planning/drivers/vgpu_manager_plan.py);
  never two vGPU manager pods on the node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import READY_S, STEP_S, wait_for
from .test_drivers import TAGS, V1, V2

pytestmark = pytest.mark.e2e

WORKLOAD = "nvidia.com/gpu.workload.config"
VGPU_IMAGE = {"repository": "registry.example.com/nvidia", "image": "vgpu-manager", "version": "570.124.03"}


def managers(kube: client.ApiClient, namespace: str) -> dict[str, client.V1DaemonSet]:
    found = client.AppsV1Api(kube).list_namespaced_daemon_set(
        namespace, label_selector=f"{labels.COMPONENT}={labels.VGPU_MANAGER_COMPONENT}"
    )
    return {ds.metadata.name: ds for ds in found.items}


def manager_pods_on(kube: client.ApiClient, namespace: str, node: str) -> list[client.V1Pod]:
    """The node's vGPU manager pods (by their owner's name), those being deleted too."""
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    return [
        p
        for p in pods
        if any(r.name.startswith(labels.VGPU_MANAGER_APP) for r in p.metadata.owner_references or ())
    ]


def runs_build(kube: client.ApiClient, namespace: str, node: str, build: str) -> bool:
    """The node's one vGPU manager pod is Ready and belongs to `build`'s DaemonSet."""
    pods = manager_pods_on(kube, namespace, node)
    return (
        len(pods) == 1
        and pods[0].metadata.owner_references[0].name == f"{labels.VGPU_MANAGER_APP}-{build}"
        and any(c.type == "Ready" and c.status == "True" for c in pods[0].status.conditions or ())
    )


@pytest.fixture
def vgpu_node(kube: client.ApiClient) -> Iterator[str]:
    name = unique_name("vgpu")
    fake_nodes.create_nodes(kube, [fake_nodes.gpu_node(name, rhcos=V1, extra_labels={WORKLOAD: "vm-vgpu"})])
    yield name
    fake_nodes.delete_nodes(kube, [name])


def test_the_vgpu_manager_runs_per_rhcos_build_with_its_driver_toolkit_and_follows_the_mco(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    vgpu_node: str,
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    openshift_emulation.set_driver_toolkit_tags(openshift, TAGS)
    apply_policy(spec={"sandboxWorkloads": {"enabled": True}, "vgpuManager": {"enabled": True, **VGPU_IMAGE}})
    start_operator()
    first = f"{labels.VGPU_MANAGER_APP}-{V1}"
    # Budget READY_S: the operator's start, a pass, the node's deploy label, the DaemonSet controller.
    wait_for(lambda: runs_build(kube, namespace, vgpu_node, V1), READY_S, what=f"{first}'s pod Ready")
    (manager,) = managers(kube, namespace).values()
    assert manager.metadata.name == first
    images = {c.image for c in manager.spec.template.spec.containers}
    assert TAGS[V1] in images, images  # the build's own Driver Toolkit tag, never `latest`
    assert manager.spec.template.spec.node_selector[labels.OSTREE_VERSION] == V1
    driver_pods = client.CoreV1Api(kube).list_namespaced_pod(
        namespace,
        label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}",
        field_selector=f"spec.nodeName={vgpu_node}",
    )
    assert not driver_pods.items, "a container driver on a VM node"

    # The MCO moves the node to the next build: that build's DaemonSet, and the old one collected.
    seen_pod_counts: set[int] = set()

    def moved() -> bool:
        seen_pod_counts.add(
            len([p for p in manager_pods_on(kube, namespace, vgpu_node) if p.status.phase == "Running"])
        )
        return runs_build(kube, namespace, vgpu_node, V2) and set(managers(kube, namespace)) == {
            f"{labels.VGPU_MANAGER_APP}-{V2}"
        }

    fake_nodes.simulate_mco_update(kube, [vgpu_node], V2)
    # Budget STEP_S: a pass on the node's new build, the new DaemonSet's pod, then the old one's deletion.
    wait_for(moved, STEP_S, what=f"{vgpu_node} on the {V2} vGPU manager, the {V1} one collected")
    (after,) = managers(kube, namespace).values()
    assert TAGS[V2] in {c.image for c in after.spec.template.spec.containers}
    assert max(seen_pod_counts) <= 1, seen_pod_counts
