"""We test these aspects of the SIMULATION of NVIDIA's DRA kubelet plugin (node agent,
ocp_gpu_harness/dra_slices.py) on the local control plane, with the real kube-scheduler allocating:

- no slice while no plugin pod is Ready on a node with simulated GPUs; the plugin pod waits
  for nothing else here (no driver DaemonSet in its namespace: the host has a driver);
- once it is Ready, the node's one ResourceSlice of driver gpu.nvidia.com: pool named after
  the node, a device per GPU with NVIDIA's attributes;
- the real scheduler allocates a claim made from a ResourceClaimTemplate with a CEL selector
  on the product (DeviceClass gpu.nvidia.com as NVIDIA ships it): the pod lands on the node,
  the allocation names the node's pool and one of its devices; a selector no device matches
  leaves its pod Pending with the scheduler's reason;
- MIG devices made on the node replace the whole GPUs in the slice;
- the slice is deleted when the plugin pod goes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, requesting
from ocp_gpu_harness import dra_slices, node_agent, polling

from .conftest import Run

pytestmark = pytest.mark.e2e

T = TypeVar("T")
RESOURCE = "/apis/resource.k8s.io/v1"
PRODUCT = "NVIDIA-A100-SXM4-80GB"
# NVIDIA's DeviceClass gpu.nvidia.com (manifests/state-dra-driver/0400_deviceclass-gpu.yaml at v26.7.0).
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ]
    },
}


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0) -> T:
    return polling.wait_for(check, timeout, what=what, interval=0.2)


def node_slices(api: clients.ApiClient, node: str) -> list[dict[str, Any]]:
    return requesting.list_items(
        api,
        f"{RESOURCE}/resourceslices",
        [("fieldSelector", f"spec.nodeName={node},spec.driver={dra_slices.DRIVER}")],
    )


def ensure_device_class(api: clients.ApiClient) -> None:
    try:
        requesting.request(api, "POST", f"{RESOURCE}/deviceclasses", body=GPU_CLASS)
    except requesting.ApiException as error:
        if error.status != 409:
            raise


def plugin_pod(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"plugin-{node}", "labels": {"app": node_agent.DRA_PLUGIN_APP}},
        "spec": {"nodeName": node, "containers": [{"name": "gpus", "image": "registry.example/dra:0.5.0"}]},
    }


def claim_pod(name: str, template: str, run: Run) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": run.labels,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/cuda:12",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        },
    }


def claim_template(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": expression}}],
                            },
                        }
                    ]
                }
            }
        },
    }


def test_slices_follow_the_plugin_and_the_scheduler_allocates_from_them(
    kube: client.ApiClient, api: clients.ApiClient, namespace: str, run: Run
) -> None:
    (node,) = run.gpu_nodes(gpus=2, simulated=True, product=PRODUCT)
    core = client.CoreV1Api(kube)
    ensure_device_class(api)
    assert node_slices(api, node) == []

    core.create_namespaced_pod(namespace, plugin_pod(node))
    (published,) = wait_for("the node's slice", lambda: node_slices(api, node) or None)
    spec = published["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == ("gpu.nvidia.com", node, node)
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
    attributes = spec["devices"][0]["attributes"]
    assert attributes["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert attributes["architecture"] == {"string": "Ampere"}
    assert attributes["driverVersion"] == {"version": dra_slices.DEFAULT_DRIVER_VERSION}
    assert spec["devices"][0]["capacity"]["memory"]["value"] in ("80Gi", "81920Mi")

    # The real scheduler allocates a claim that asks for this product with at least 40 GiB.
    templates = f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaimtemplates"
    wanted = (
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    )
    requesting.request(api, "POST", templates, body=claim_template("a100", wanted))
    requesting.request(
        api,
        "POST",
        templates,
        body=claim_template("b200", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"),
    )
    core.create_namespaced_pod(namespace, claim_pod("train", "a100", run))
    core.create_namespaced_pod(namespace, claim_pod("nowhere", "b200", run))

    def scheduled() -> str | None:
        return core.read_namespaced_pod("train", namespace).spec.node_name

    assert wait_for("the claim's pod scheduled", scheduled) == node
    (claim,) = [
        c
        for c in requesting.list_items(api, f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaims")
        if c["metadata"]["name"].startswith("train-")
    ]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == ("gpu.nvidia.com", node)
    assert result["device"] in ("gpu-0", "gpu-1")

    # No device is a B200: Pending, and the scheduler says why.
    def unschedulable() -> str | None:
        pod = core.read_namespaced_pod("nowhere", namespace)
        reasons = [c for c in pod.status.conditions or () if c.type == "PodScheduled" and c.status == "False"]
        return reasons[0].message if reasons else None

    message = wait_for("the scheduler's reason", unschedulable)
    assert "cannot allocate all claims" in message, message
    assert core.read_namespaced_pod("nowhere", namespace).spec.node_name is None

    # MIG devices made on the node replace the whole GPUs (the free GPU's, and the claimed one's).
    core.patch_node(node, {"metadata": {"annotations": {node_agent.MIG_DEVICES: json.dumps({"3g.40gb": 4})}}})

    def mig_names() -> list[str] | None:
        found = node_slices(api, node)
        names = sorted(d["name"] for s in found for d in s["spec"]["devices"])
        return names if names and all("-mig-" in n for n in names) else None

    assert wait_for("MIG devices in the slice", mig_names) == [
        "gpu-0-mig-3g40gb-2-0",
        "gpu-0-mig-3g40gb-2-4",
        "gpu-1-mig-3g40gb-2-0",
        "gpu-1-mig-3g40gb-2-4",
    ]
    (after,) = node_slices(api, node)
    assert after["spec"]["pool"]["generation"] > published["spec"]["pool"]["generation"]

    # The plugin goes: so does the slice.
    core.delete_namespaced_pod(f"plugin-{node}", namespace, grace_period_seconds=0)
    wait_for("the slice removed", lambda: node_slices(api, node) == [])
