"""We test these aspects of an honest ClusterPolicy status on the local control plane:

- never `ready` while a GPU node has no driver DaemonSet selecting it (NFD's OS labels
  missing): the Ready condition names the node and the labels it lacks, and the policy
  becomes `ready` once NFD labels the node;
- `status.driverDaemonSets[].nodes` counts only the nodes the DaemonSet selects (an admin's
  `nvidia.com/gpu.deploy.driver=false` is not counted), as the DaemonSet controller does;
- while the spec is invalid, `status.driverDaemonSets` keeps describing the DaemonSets that
  keep running, instead of becoming empty;
- a node opted out of the driver loses a stale `upgrade-done` label and is not counted, and
  `gpu_operator_nodes_upgrades_available` agrees with `ocp-gpu status`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name

from .conftest import REACT_S, READY_S, STEP_S, Operated, condition, patch_policy, read_policy, wait_for

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
    operated: Operated,
) -> None:
    operated.run()
    ready = wait_for(
        lambda: (c := condition(read_policy(kube), "Ready")).get("reason") == "GPUNodesWithoutDriver" and c,
        STEP_S,
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
    wait_for(lambda: status(kube).get("state") == "ready", READY_S, what="ready once NFD labels the node")
    [entry] = status(kube)["driverDaemonSets"]
    assert entry["nodes"] == 2


def test_running_daemonsets_stay_described_while_the_spec_is_invalid(
    kube: client.ApiClient,
    nodes: dict[str, str],
    operated: Operated,
) -> None:
    operated.run()
    before = wait_for(
        lambda: status(kube).get("driverDaemonSets"), STEP_S, what="driver DaemonSets in status"
    )
    patch_policy(kube, {"driver": {"upgradePolicy": {"drain": {"podSelector": "app in (a"}}}})
    wait_for(
        lambda: condition(read_policy(kube), "Error").get("status") == "True", REACT_S, what="InvalidSpec"
    )
    during = status(kube)["driverDaemonSets"]
    assert [d["name"] for d in during] == [d["name"] for d in before]
    assert during[0]["image"] == before[0]["image"]


def test_opted_out_node_is_not_upgrade_done_and_metrics_agree_with_status(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    operated: Operated,
) -> None:
    keyed = [unique_name("gpu") for _ in range(2)]
    # Opted out after an earlier upgrade: it still carries upgrade-done, but runs no driver.
    optout = unique_name("optout")
    stale = {labels.deploy_label("driver"): "false", labels.UPGRADE_STATE: "upgrade-done"}
    fake_nodes.create_nodes(
        kube,
        [
            *(fake_nodes.vanilla_gpu_node(n) for n in keyed),
            fake_nodes.vanilla_gpu_node(optout, extra_labels=stale),
        ],
    )
    try:
        operator = operated.run()
        wait_for(lambda: status(kube).get("state") == "ready", READY_S, what="ready")
        wait_for(
            lambda: (
                labels.UPGRADE_STATE not in (client.CoreV1Api(kube).read_node(optout).metadata.labels or {})
            ),
            REACT_S,
            what="the opted-out node's upgrade-done label removed",
        )
        wait_for(
            lambda: operator.metric("gpu_operator_nodes_upgrades_done") == 2, REACT_S, what="done counts 2"
        )
        report = subprocess.run(
            [
                sys.executable,
                "-m",
                "ocp_gpu.cli",
                "status",
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        metrics = json.loads(report.stdout)["metrics"]
        assert metrics["done"] == 2
        wait_for(
            lambda: operator.metric("gpu_operator_nodes_upgrades_available") == metrics["available"],
            REACT_S,  # REACT_S: the metric is set by the pass that follows the change
            what=f"available metric agrees with ocp-gpu status ({metrics['available']})",
        )
    finally:
        fake_nodes.delete_nodes(kube, [*keyed, optout])
