"""We test these aspects of an honest ClusterPolicy status on the local control plane:

- never `ready` while a GPU node has no driver DaemonSet selecting it (NFD's OS labels
  missing): the Ready condition names the node and the labels it lacks, and the policy
  becomes `ready` once NFD labels the node;
- `status.driverDaemonSets[].nodes` counts only the nodes the DaemonSet selects (an admin's
  `nvidia.com/gpu.deploy.driver=false` is not counted), as the DaemonSet controller does;
- while the spec is invalid, `status.driverDaemonSets` keeps describing the DaemonSets that
  keep running, instead of becoming empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.harness import nodes as fake_nodes
from ocp_gpu.harness.cluster import unique_name
from ocp_gpu.harness.operating import OperatorProcess
from ocp_gpu.model import labels

from .conftest import condition, read_policy, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def nodes(kube: client.ApiClient) -> Iterator[dict[str, str]]:
    """Two keyed GPU nodes, one opted out of the driver, and one that NFD has not labelled."""
    names = {key: unique_name(key) for key in ("keyed", "optout", "unlabelled")}
    unlabelled = fake_nodes.vanilla_gpu_node(names["unlabelled"])
    for key in (labels.OS_ID, labels.OS_VERSION_ID):
        del unlabelled["metadata"]["labels"][key]
    fake_nodes.create_nodes(
        kube,
        [
            fake_nodes.vanilla_gpu_node(names["keyed"]),
            fake_nodes.vanilla_gpu_node(
                names["optout"], extra_labels={labels.deploy_label("driver"): "false"}
            ),
            unlabelled,
        ],
    )
    yield names
    fake_nodes.delete_nodes(kube, list(names.values()))


def status(kube: client.ApiClient) -> dict[str, Any]:
    return dict(read_policy(kube).get("status") or {})


def test_never_ready_while_a_gpu_node_has_no_driver_daemonset(
    kube: client.ApiClient,
    nodes: dict[str, str],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    apply_policy()
    start_operator()
    ready = wait_for(
        lambda: (c := condition(read_policy(kube), "Ready")).get("reason") == "GPUNodesWithoutDriver" and c,
        60,
        what="GPUNodesWithoutDriver",
    )
    assert ready["status"] == "False"
    assert nodes["unlabelled"] in ready["message"] and labels.OS_ID in ready["message"]
    assert nodes["optout"] not in ready["message"]
    assert status(kube)["state"] == "notReady"
    # The driver DaemonSet counts the node it selects, not the opted-out one.
    [entry] = status(kube)["driverDaemonSets"]
    assert entry["nodes"] == 1

    # NFD catches up: the node gets its DaemonSet and the policy becomes ready.
    client.CoreV1Api(kube).patch_node(
        nodes["unlabelled"],
        {"metadata": {"labels": {labels.OS_ID: "ubuntu", labels.OS_VERSION_ID: "22.04"}}},
    )
    wait_for(lambda: status(kube).get("state") == "ready", 60, what="ready once NFD labels the node")
    [entry] = status(kube)["driverDaemonSets"]
    assert entry["nodes"] == 2


def test_running_daemonsets_stay_described_while_the_spec_is_invalid(
    kube: client.ApiClient,
    nodes: dict[str, str],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    apply_policy()
    start_operator()
    before = wait_for(lambda: status(kube).get("driverDaemonSets"), 60, what="driver DaemonSets in status")
    client.CustomObjectsApi(kube).patch_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        "cluster-policy",
        {"spec": {"driver": {"upgradePolicy": {"drain": {"podSelector": "app in (a"}}}}},
    )
    wait_for(lambda: condition(read_policy(kube), "Error").get("status") == "True", 30, what="InvalidSpec")
    during = status(kube)["driverDaemonSets"]
    assert [d["name"] for d in during] == [d["name"] for d in before]
    assert during[0]["image"] == before[0]["image"]
