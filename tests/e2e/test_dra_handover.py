"""We test these aspects of a node's GPUs changing hands between the device plugin and the DRA
driver (planning/operands/gpu_handover.py) on the local control plane, with the real
kube-scheduler and the node agent SIMULATION (ocp_gpu_harness/node_agent.py, dra_slices.py)
standing in for the device plugin's and NVIDIA's DRA kubelet plugin's advertising:

- device plugin -> DRA (`draDriver.enabled` turned on) while a pod holds one of the node's
  GPUs through `nvidia.com/gpu`: the device plugin leaves and the node stops advertising
  `nvidia.com/gpu`; the running pod is left alone (same uid, Running, never restarted, no
  eviction); no DRA plugin, no ResourceSlice while it runs, so a claim pod stays Pending; once
  the pod has ended the node gets the DRA label, its slice, and the claim pod runs there;
- DRA -> device plugin (`enabled` turned off) while a pod holds an allocated GPU claim there:
  the DRA label, its kubelet plugin pod and the slice stay, the device plugin stays away and
  the claim pod keeps running; once it has ended the DRA label and slice go and the node
  advertises its 2 GPUs through the device plugin again;
- `ocp-gpu status` says who owns the node's GPUs at each step: `plugin`, `-` while the switch to
  DRA waits, `dra` with 1 of its 2 published devices allocated, `plugin` again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.kube import clients
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import READY_S, holds_for, patch_policy, status_json, wait_for
from .test_dra import (
    A100,
    DRA,
    PLUGIN,
    claim_pod,
    make_nodes,  # noqa: F401 (a fixture)
    node_of,
    nvidia_gpus,
    operand_pods_on,
    slices_of,
    template,
)

pytestmark = pytest.mark.e2e

# Long enough for a few of the operator's handover re-checks (reconcilers/cluster.HANDOVER_RECHECK_S).
HELD_S = 15.0


def gpu_pod(kube: client.ApiClient, namespace: str, name: str) -> None:
    body = {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/cuda:12",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }
    client.CoreV1Api(kube).create_namespaced_pod(namespace, body)


def running_as(kube: client.ApiClient, namespace: str, name: str) -> tuple[str, str, int]:
    """(uid, phase, restarts) of a pod."""
    found = client.CoreV1Api(kube).read_namespaced_pod(name, namespace)
    restarts = sum(s.restart_count for s in found.status.container_statuses or ())
    return found.metadata.uid, found.status.phase, restarts


def node_labels_of(kube: client.ApiClient, node: str) -> dict[str, str]:
    return dict(client.CoreV1Api(kube).read_node(node).metadata.labels or {})


def owner_in_status(kubeconfig: Path, node: str) -> tuple[str, int, int]:
    """(gpu_owner, dra_allocated, dra_published) of the node's row in `ocp-gpu status -o json`."""
    (row,) = [row for row in status_json(kubeconfig)["nodes"] if row["node"] == node]
    return row["gpu_owner"], row["dra_allocated"], row["dra_published"]


def delete_pod(kube: client.ApiClient, namespace: str, name: str) -> None:
    core = client.CoreV1Api(kube)
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def gone() -> bool:
        return name not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items}

    wait_for(gone, READY_S, what=f"pod {name} gone")


def test_gpus_change_hands_once_their_pods_are_done(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    make_nodes: Callable[..., list[str]],  # noqa: F811
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (node,) = make_nodes(1, gpus=2)
    kubeconfig = control_plane.make_kubeconfig("dra-status", ["system:masters"])
    apply_policy(spec={"draDriver": {"enabled": False}})
    start_operator()
    wait_for(lambda: nvidia_gpus(kube, node) == "2", READY_S, what="the device plugin's GPUs")
    gpu_pod(kube, namespace, "legacy")
    wait_for(lambda: node_of(kube, namespace, "legacy"), READY_S, what="the device-plugin GPU pod running")
    before = running_as(kube, namespace, "legacy")
    assert owner_in_status(kubeconfig, node) == ("plugin", 0, 0)

    # Device plugin -> DRA while "legacy" holds a GPU.
    patch_policy(kube, {"draDriver": {"enabled": True}})
    wait_for(lambda: PLUGIN not in node_labels_of(kube, node), READY_S, what="the device plugin's label gone")
    wait_for(lambda: nvidia_gpus(kube, node) is None, READY_S, what="nvidia.com/gpu no longer advertised")
    template(api, namespace, "a100", A100)
    claim_pod(kube, namespace, "train", {"resourceClaimTemplateName": "a100"})

    def still_the_device_plugins() -> bool:
        return (
            DRA not in node_labels_of(kube, node)
            and slices_of(api, node) == []
            and operand_catalog.DRA_DRIVER.app not in operand_pods_on(kube, namespace, node)
            and running_as(kube, namespace, "legacy") == before
            and node_of(kube, namespace, "train") is None
        )

    holds_for(still_the_device_plugins, HELD_S, what="no DRA while the device-plugin pod runs, it untouched")

    assert owner_in_status(kubeconfig, node) == ("-", 0, 0)

    # "legacy" ends: DRA takes the node, the claim is allocated there.
    delete_pod(kube, namespace, "legacy")
    wait_for(lambda: node_labels_of(kube, node).get(DRA) == "true", READY_S, what="the DRA label")
    wait_for(lambda: slices_of(api, node), READY_S, what="the node's ResourceSlice")
    assert wait_for(lambda: node_of(kube, namespace, "train"), READY_S, what="the claim pod running") == node
    assert PLUGIN not in node_labels_of(kube, node) and nvidia_gpus(kube, node) is None
    train = running_as(kube, namespace, "train")
    assert owner_in_status(kubeconfig, node) == ("dra", 1, 2)

    # DRA -> device plugin while "train" holds an allocated claim.
    patch_policy(kube, {"draDriver": {"enabled": False}})

    def still_dras() -> bool:
        node_labels = node_labels_of(kube, node)
        return (
            node_labels.get(DRA) == "true"
            and PLUGIN not in node_labels
            and len(slices_of(api, node)) == 1
            and operand_catalog.DRA_DRIVER.app in operand_pods_on(kube, namespace, node)
            and nvidia_gpus(kube, node) is None
            and running_as(kube, namespace, "train") == train
        )

    holds_for(still_dras, HELD_S, what="DRA kept while the claim pod runs, it untouched")

    # "train" ends: the node goes back to the device plugin.
    delete_pod(kube, namespace, "train")
    wait_for(lambda: DRA not in node_labels_of(kube, node), READY_S, what="the DRA label gone")
    wait_for(lambda: slices_of(api, node) == [], READY_S, what="the slice gone")
    wait_for(lambda: nvidia_gpus(kube, node) == "2", READY_S, what="the device plugin's GPUs back")
    assert owner_in_status(kubeconfig, node) == ("plugin", 0, 0)
