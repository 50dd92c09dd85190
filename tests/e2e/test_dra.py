"""We test these aspects of GPUs through Dynamic Resource Allocation on the local control plane,
with the real kube-scheduler allocating claims and the node agent SIMULATION
(ocp_gpu_harness/node_agent.py, dra_slices.py) standing in for NVIDIA's DRA kubelet plugin:

- a pod with a claim from a ResourceClaimTemplate (`deviceClassName: gpu.nvidia.com`, a CEL
  selector on the product and the memory) stays Pending until the DRA operand (`draDriver.enabled`)
  is Ready, is then scheduled to the matching node, and its claim's allocation names that node's
  pool and one of its devices;
- per node one plugin owns the GPUs: the DRA node has `nvidia.com/gpu.deploy.dra-driver=true`, no
  device plugin pod and no `nvidia.com/gpu`, and a ResourceSlice; the node an admin labelled
  `dra-driver=false` keeps the device plugin (its GPUs advertised, no slice, no DRA pod);
- NVIDIA's DeviceClasses exist; a claim for a product no node has stays Pending with the
  scheduler's reason; two pods sharing one ResourceClaim run on the same node with the same
  device; the policy is `ready` with the DRA operand Ready on its nodes;
- a driver upgrade on the DRA node deletes the claim-holding pod (gpuPodDeletion) and the node
  reaches `upgrade-done`, its slice then naming the new driver version;
- switching DRA off gives the node back to the device plugin: the slice goes, `nvidia.com/gpu`
  comes back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, requesting
from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import dra_slices
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import REACT_S, READY_S, patch_policy, ready_for_the_spec, wait_for
from .test_dra_simulation import claim_template

pytestmark = pytest.mark.e2e

RESOURCE = "/apis/resource.k8s.io/v1"
PRODUCT = "NVIDIA-A100-SXM4-80GB"
DRA = operand_catalog.DRA_DRIVER.deploy_label
PLUGIN = operand_catalog.DEVICE_PLUGIN.deploy_label
A100 = (
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB' && "
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
)


@pytest.fixture
def make_nodes(simulated_gpu_nodes: Callable[..., list[str]]) -> Callable[..., list[str]]:
    return functools.partial(simulated_gpu_nodes, prefix="dra", product=PRODUCT)


def slices_of(api: clients.ApiClient, node: str) -> list[dict[str, Any]]:
    return requesting.list_items(
        api,
        f"{RESOURCE}/resourceslices",
        [("fieldSelector", f"spec.nodeName={node},spec.driver={dra_slices.DRIVER}")],
    )


def template(api: clients.ApiClient, namespace: str, name: str, expression: str) -> None:
    body = claim_template(name, expression)
    requesting.request(
        api, "POST", f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaimtemplates", body=body
    )


def claim_pod(kube: client.ApiClient, namespace: str, name: str, claim: dict[str, str]) -> None:
    body = {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/cuda:12",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", **claim}],
        },
    }
    client.CoreV1Api(kube).create_namespaced_pod(namespace, body)


def node_of(kube: client.ApiClient, namespace: str, pod: str) -> str | None:
    found = client.CoreV1Api(kube).read_namespaced_pod(pod, namespace)
    return found.spec.node_name if found.status.phase == "Running" else None


def claim_of(api: clients.ApiClient, namespace: str, pod: str) -> dict[str, Any]:
    (claim,) = [
        c
        for c in requesting.list_items(api, f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaims")
        if c["metadata"]["name"].startswith(f"{pod}-")
    ]
    return claim


def unschedulable(kube: client.ApiClient, namespace: str, pod: str) -> str | None:
    found = client.CoreV1Api(kube).read_namespaced_pod(pod, namespace)
    refusals = [c for c in found.status.conditions or () if c.type == "PodScheduled" and c.status == "False"]
    return refusals[0].message if refusals else None


def operand_pods_on(kube: client.ApiClient, namespace: str, node: str) -> set[str]:
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    return {str((p.metadata.labels or {}).get(labels.APP)) for p in pods}


def nvidia_gpus(kube: client.ApiClient, node: str) -> str | None:
    return (client.CoreV1Api(kube).read_node(node).status.allocatable or {}).get("nvidia.com/gpu")


def test_claims_are_allocated_on_the_dra_nodes(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    make_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (dra_node,) = make_nodes(1, gpus=2)
    (plugin_node,) = make_nodes(1, gpus=2, extra_labels={DRA: "false"})
    template(api, namespace, "a100", A100)
    template(api, namespace, "b200", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'")
    claim_pod(kube, namespace, "train", {"resourceClaimTemplateName": "a100"})
    # No DeviceClass, no slice yet: Pending, and the scheduler says why.
    wait_for(
        lambda: unschedulable(kube, namespace, "train"), REACT_S, what="the scheduler refusing the claim"
    )
    assert node_of(kube, namespace, "train") is None

    apply_policy(
        spec={
            "draDriver": {"enabled": True},
            "driver": {"upgradePolicy": {"gpuPodDeletion": {"force": True}}},
        }
    )
    start_operator()
    assert (
        wait_for(lambda: node_of(kube, namespace, "train"), READY_S, what="the claim's pod running")
        == dra_node
    )
    (result,) = claim_of(api, namespace, "train")["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == ("gpu.nvidia.com", dra_node)
    assert result["device"] in ("gpu-0", "gpu-1")

    # One plugin per node.
    core = client.CoreV1Api(kube)
    dra_labels = core.read_node(dra_node).metadata.labels
    assert dra_labels.get(DRA) == "true" and PLUGIN not in dra_labels
    assert operand_catalog.DRA_DRIVER.app in operand_pods_on(kube, namespace, dra_node)
    assert operand_catalog.DEVICE_PLUGIN.app not in operand_pods_on(kube, namespace, dra_node)
    assert nvidia_gpus(kube, dra_node) is None
    assert len(slices_of(api, dra_node)) == 1
    wait_for(lambda: nvidia_gpus(kube, plugin_node) == "2", READY_S, what="the device plugin node's GPUs")
    plugin_labels = core.read_node(plugin_node).metadata.labels
    assert (plugin_labels.get(DRA), plugin_labels.get(PLUGIN)) == ("false", "true")
    assert operand_catalog.DRA_DRIVER.app not in operand_pods_on(kube, namespace, plugin_node)
    assert slices_of(api, plugin_node) == []
    # NVIDIA's DeviceClasses.
    classes = {c["metadata"]["name"] for c in requesting.list_items(api, f"{RESOURCE}/deviceclasses")}
    assert {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"} <= classes

    # A product no node has: Pending, with the scheduler's reason.
    claim_pod(kube, namespace, "nowhere", {"resourceClaimTemplateName": "b200"})
    message = wait_for(
        lambda: unschedulable(kube, namespace, "nowhere"), REACT_S, what="the B200 claim refused"
    )
    assert "cannot allocate all claims" in message, message

    # Two pods sharing one claim: the same node, the same device.
    claim = {
        "metadata": {"name": "shared"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
        },
    }
    requesting.request(api, "POST", f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaims", body=claim)
    for name in ("left", "right"):
        claim_pod(kube, namespace, name, {"resourceClaimName": "shared"})
    left = wait_for(lambda: node_of(kube, namespace, "left"), READY_S, what="the first sharing pod")
    right = wait_for(lambda: node_of(kube, namespace, "right"), READY_S, what="the second sharing pod")
    assert left == right == dra_node
    shared = requesting.request(api, "GET", f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaims/shared")
    assert len(shared["status"]["reservedFor"]) == 2
    assert len(shared["status"]["allocation"]["devices"]["results"]) == 1
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")

    # A driver upgrade on the DRA node deletes the claim-holding pods, then the driver restarts.
    patch_policy(kube, {"driver": {"version": "570.86.10"}})

    def upgraded() -> bool:
        state = core.read_node(dra_node).metadata.labels.get(labels.UPGRADE_STATE)
        return state == "upgrade-done"

    def evicted() -> bool:
        names = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
        return not ({"train", "left", "right"} & names)

    wait_for(evicted, READY_S, what="the claim-holding pods deleted by the upgrade")
    wait_for(upgraded, READY_S, what="the DRA node upgraded")

    def driver_version() -> str | None:
        found = slices_of(api, dra_node)
        return found[0]["spec"]["devices"][0]["attributes"]["driverVersion"]["version"] if found else None

    assert wait_for(lambda: driver_version() == "570.86.10", REACT_S, what="the slice's new driver version")

    # DRA off: the node goes back to the device plugin.
    patch_policy(kube, {"draDriver": {"enabled": False}})
    wait_for(lambda: slices_of(api, dra_node) == [], READY_S, what="the DRA node's slice gone")
    wait_for(lambda: nvidia_gpus(kube, dra_node) == "2", READY_S, what="the device plugin back on the node")
    assert DRA not in core.read_node(dra_node).metadata.labels
