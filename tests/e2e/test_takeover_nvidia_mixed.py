"""We test taking over from NVIDIA's GPU Operator on a vanilla Kubernetes cluster whose GPU nodes run
two OS versions, on the local control plane, without NVIDIA's binary: what its v26.7.0 left with its
Helm chart's default ClusterPolicy on two RHEL 9.4 and two Ubuntu 22.04 GPU nodes (NFD's os_release
labels; tests/e2e/data/nvidia-takeover-vanilla-mixed.yaml, captured from a real run by
`hack/capture_nvidia_fixtures.py --platform vanilla-mixed`) is restored, with a GPU workload pod on
every GPU node; then ocp-gpu starts.

What NVIDIA's operator made, as captured: one `nvidia-driver-daemonset` on every GPU node of both OS
versions, with the driver image of the first GPU node's OS (its getGPUNodeOSInfo lists one node) on
all of them.  ocp-gpu runs one driver DaemonSet per OS (`nvidia-driver-daemonset-rhel9.4`,
`-ubuntu22.04`), each with its own OS's image.  We check:

- the policy is `ready` within the takeover's budget (test_takeover_nvidia.READY_BUDGET_S);
- no driver pod on either OS is restarted or replaced (same uids, restart counts unchanged): on the
  nodes of the other OS, NVIDIA's pods run the same driver built for another OS, which works there
  (Ready), so by the rule (planning/drivers/driver_currency.other_os_build) it is current and keeps
  running until its next restart brings its own OS's image; no GPU workload pod is deleted or
  evicted, no node is cordoned, never two driver pods on a node (sampled), every GPU node reads
  upgrade-done, nothing is written in the next 30 s;
- NVIDIA's DaemonSet is gone; each of ocp-gpu's two is the controller of exactly the driver pods on
  its OS's nodes, its template carrying its OS's image, and `DriverPodsOnPreviousTemplate` counts
  every driver pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ocp_gpu.kube import clients
from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import nvidia_fixtures
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import quiet_writes, read_policy
from .test_takeover_nvidia import (
    Invariants,
    assert_undisturbed,
    gpu_workloads,
    nvidias_driver_pods_running,
    take_over,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FIXTURE = Path(__file__).parent / "data" / "nvidia-takeover-vanilla-mixed.yaml"
# The two OS keys (NFD's ID + VERSION_ID) of the captured nodes, and the image tag suffix for each (NVIDIA's:
# the major version only for RHEL).
OS_TAGS = {"rhel9.4": "rhel9", "ubuntu22.04": "ubuntu22.04"}
OS_KEYS = tuple(OS_TAGS)


@pytest.fixture
def restored_mixed(
    kube: client.ApiClient, api: clients.ApiClient, namespace: str
) -> Iterator[nvidia_fixtures.Restored]:
    """NVIDIA's mixed-OS vanilla capture restored: no OpenShift API is served."""
    made = nvidia_fixtures.restore(kube, api, FIXTURE, namespace)
    yield made
    custom = client.CustomObjectsApi(kube)
    custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", made.policy_name)
    fake_nodes.delete_nodes(kube, list(made.nodes.values()))


def os_key(node: client.V1Node) -> str:
    node_labels = node.metadata.labels
    return f"{node_labels[labels.OS_ID]}{node_labels[labels.OS_VERSION_ID]}"


def driver_image(pod_spec: client.V1PodSpec) -> str:
    return str(next(c.image for c in pod_spec.containers if c.name == "nvidia-driver-ctr"))


def test_ocp_gpu_takes_over_nvidias_driver_daemonset_on_two_os_versions_without_a_driver_restart(
    kube: client.ApiClient,
    namespace: str,
    restored_mixed: nvidia_fixtures.Restored,
    start_operator: Callable[..., OperatorProcess],
    control_plane: LocalControlPlane,
) -> None:
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    nodes = sorted(restored_mixed.nodes.values())
    assert restored_mixed.skipped == [], restored_mixed.skipped
    node_os = {name: os_key(core.read_node(name)) for name in nodes}
    assert sorted(set(node_os.values())) == list(OS_KEYS), node_os
    # NVIDIA's one driver DaemonSet, on both OS versions, with one OS's image on every node
    assert ("DaemonSet", labels.DRIVER_APP) in restored_mixed.objects
    before = nvidias_driver_pods_running(kube, namespace, nodes)
    nvidia_images = {driver_image(p.spec) for p in before.values()}
    assert len(nvidia_images) == 1, nvidia_images
    assert {p.spec.node_name for p in before.values()} == set(nodes)
    workloads = gpu_workloads(kube, namespace, nodes)

    with Invariants(kube, namespace, nodes, workloads) as invariants:
        take_over(kube, start_operator, restored_mixed.policy_name)
        # The window: 30 s after the takeover, in which the operator writes nothing.
        writes = quiet_writes(control_plane, 30)

    after = assert_undisturbed(kube, namespace, nodes, before, invariants, writes)
    with pytest.raises(client.exceptions.ApiException):
        apps.read_namespaced_daemon_set(labels.DRIVER_APP, namespace)
    (nvidia_image,) = nvidia_images
    version = nvidia_image.rpartition(":")[2].split("-")[0]
    for key in OS_KEYS:
        ours = apps.read_namespaced_daemon_set(f"{labels.DRIVER_DAEMONSET_PREFIX}{key}", namespace)
        # its own OS's image of the same driver, for the pods it makes from now on
        assert driver_image(ours.spec.template.spec).endswith(f":{version}-{OS_TAGS[key]}"), key
        controlled = {
            p.spec.node_name
            for p in after.values()
            if [r.uid for r in p.metadata.owner_references or () if r.controller] == [ours.metadata.uid]
        }
        assert controlled == {name for name, found in node_os.items() if found == key}, (key, controlled)
    status = read_policy(kube, restored_mixed.policy_name)["status"]
    previous = next(c for c in status["conditions"] if c["type"] == "DriverPodsOnPreviousTemplate")
    assert previous["message"].startswith(f"{len(nodes)} driver pod(s) run an older template"), previous
