"""We test these aspects of GPUs for virtual machines (sandboxWorkloads, NVIDIA's
nvidia.com/gpu.workload.config) on the local control plane, with the real kube-scheduler and the
node agent SIMULATION (ocp_gpu_harness/node_agent.py, vfio_devices.py) standing in for the VFIO
manager binding GPUs to vfio-pci and NVIDIA's KubeVirt device plugin advertising them:

- one ClusterPolicy, a container node and a vm-passthrough node: each runs exactly its stack (the
  passthrough node the VFIO manager, sandbox validator and sandbox device plugin, and none of the
  container stack; the container node none of the VM stack); the passthrough node advertises
  `nvidia.com/GA102GL_A10` (its A10s, by kubevirt-gpu-device-plugin's name) and no `nvidia.com/gpu`;
  the policy is `ready`;
- a pod standing in for KubeVirt's virt-launcher, requesting the passthrough resource, is
  scheduled by the real scheduler to the passthrough node only;
- relabelling the container node vm-passthrough (no GPU pod there) takes its container stack away
  (its driver pod goes) and brings the VM stack up, the other node untouched;
- a workload label no one knows is named in the status (Error condition) and an Event with the
  fix, and the node's VM stack keeps running;
- one ClusterPolicy, a container, a vm-passthrough and a vm-vgpu node: the vGPU manager's image unset
  (NVIDIA does not publish it) is an Error naming spec.vgpuManager and how to build it, in the
  status and an Event, and the vGPU node gets no vGPU manager; once set, the vm-vgpu node runs
  exactly the vGPU stack (vGPU manager, sandbox validator, vGPU device manager, sandbox device
  plugin), the SIMULATION of the vGPU device manager creates the vGPU devices of the node's
  nvidia.com/vgpu.config (A10-4Q: 6 per A10) and reports success in nvidia.com/vgpu.config.state,
  the node advertises `nvidia.com/NVIDIA_A10-4Q` (kubevirt-gpu-device-plugin's name), the other
  nodes keep theirs; a virt-launcher stand-in requesting it is scheduled to the vGPU node only;
  `ocp-gpu status` shows the node's workload vm-vgpu; the policy is `ready`;
- a new vGPU manager version rolls by its DaemonSet's update strategy (its pod replaced), while the
  driver upgrade of the same change moves the container node only: the vGPU node never gets an
  upgrade state or a cordon;
- a driver upgrade upgrades the container node and leaves the VM node alone (no upgrade state, no
  cordon); relabelled while a container GPU pod runs there, a node keeps its container stack and the
  status names the pod and the fix; `ocp-gpu status` shows each node's workload; once the upgrade
  policy's drain settings allow it, the node is cordoned, the GPU pod evicted, the node moves and is
  uncordoned, each step an Event (GPUWorkloadMove) on the node.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels, operand_types
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import polling, vfio_devices, vgpu_devices
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    READY_S,
    UPGRADE_S,
    condition,
    patch_policy,
    read_policy,
    ready_for_the_spec,
    status_json,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

PRODUCT = "NVIDIA-A10"
PASSTHROUGH_RESOURCE = vfio_devices.resource_name(PRODUCT)
WORKLOAD = labels.GPU_WORKLOAD_CONFIG
VM_APPS = {
    operand_catalog.VFIO_MANAGER.app,
    operand_catalog.SANDBOX_VALIDATOR.app,
    operand_catalog.SANDBOX_DEVICE_PLUGIN.app,
}
CONTAINER_APPS = {
    labels.DRIVER_APP,
    operand_catalog.CONTAINER_TOOLKIT.app,
    operand_catalog.OPERATOR_VALIDATOR.app,
    operand_catalog.DEVICE_PLUGIN.app,
    operand_catalog.DCGM.app,
    operand_catalog.DCGM_EXPORTER.app,
    operand_catalog.GPU_FEATURE_DISCOVERY.app,
}


@pytest.fixture
def make_nodes(simulated_gpu_nodes: Callable[..., list[str]]) -> Callable[..., list[str]]:
    return functools.partial(simulated_gpu_nodes, prefix="vm", product=PRODUCT)


def apps_on(kube: client.ApiClient, namespace: str, node: str, ready: bool = False) -> set[str]:
    """The operand apps with a pod (a Ready one, with `ready`) on the node, terminating ones left out
    (and pods that are no operand's, such as the virt-launcher stand-in)."""
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    found = set()
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue
        is_ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
        # NB: by the operator's own reading (a DTK vGPU manager pod's app is its DaemonSet's name).
        app = operand_types.pod_app(pod.metadata.labels or {})
        if (is_ready or not ready) and app in operand_catalog.POD_APPS:
            found.add(app)
    return found


def allocatable(kube: client.ApiClient, node: str) -> dict[str, str]:
    found = client.CoreV1Api(kube).read_node(node).status.allocatable or {}
    return {key: value for key, value in found.items() if key.startswith("nvidia.com/")}


def virt_launcher(
    kube: client.ApiClient, namespace: str, name: str, resource: str = PASSTHROUGH_RESOURCE
) -> None:
    """A pod standing in for KubeVirt's virt-launcher of a VM with one passed-through GPU (or vGPU)."""
    body = {
        "metadata": {"name": name, "labels": {"kubevirt.io": "virt-launcher"}},
        "spec": {
            "containers": [
                {
                    "name": "compute",
                    "image": "registry.example/virt-launcher:v1",
                    "resources": {"limits": {resource: "1"}},
                }
            ],
        },
    }
    client.CoreV1Api(kube).create_namespaced_pod(namespace, body)


def node_of(kube: client.ApiClient, namespace: str, pod: str) -> str | None:
    found = client.CoreV1Api(kube).read_namespaced_pod(pod, namespace)
    return found.spec.node_name if found.status.phase == "Running" else None


def wait_ready(kube: client.ApiClient, what: str) -> None:
    """Wait for `state: ready`; on a timeout, fail with the status (what keeps it not ready)."""
    try:
        wait_for(lambda: ready_for_the_spec(kube), READY_S, what=what)
    except polling.WaitTimeout as timeout:
        raise AssertionError(f"{what}: {read_policy(kube).get('status')}") from timeout


def relabel(kube: client.ApiClient, node: str, value: str | None) -> None:
    client.CoreV1Api(kube).patch_node(node, {"metadata": {"labels": {WORKLOAD: value}}})


def test_each_node_runs_its_stack_and_vms_land_on_passthrough_nodes(
    kube: client.ApiClient,
    namespace: str,
    make_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (container_node,) = make_nodes(1, gpus=2)
    (vm_node,) = make_nodes(1, gpus=2, extra_labels={WORKLOAD: "vm-passthrough"})
    apply_policy(spec={"sandboxWorkloads": {"enabled": True}})
    start_operator()

    # Each node exactly its stack.
    wait_for(
        lambda: allocatable(kube, vm_node) == {PASSTHROUGH_RESOURCE: "2"},
        READY_S,
        what=f"{vm_node} advertising {PASSTHROUGH_RESOURCE}",
    )
    assert apps_on(kube, namespace, vm_node, ready=True) == VM_APPS
    wait_for(
        lambda: allocatable(kube, container_node) == {"nvidia.com/gpu": "2"},
        READY_S,
        what=f"{container_node} advertising nvidia.com/gpu",
    )
    assert apps_on(kube, namespace, container_node) >= CONTAINER_APPS
    assert not VM_APPS & apps_on(kube, namespace, container_node)
    vm_labels = client.CoreV1Api(kube).read_node(vm_node).metadata.labels
    assert not any(vm_labels.get(o.deploy_label) == "true" for o in operand_catalog.EVERY_GPU_NODE)
    wait_ready(kube, "the policy ready")

    # A VM's pod goes to the passthrough node only.
    virt_launcher(kube, namespace, "virt-launcher-vm1")
    assert (
        wait_for(lambda: node_of(kube, namespace, "virt-launcher-vm1"), READY_S, what="the VM's pod")
        == vm_node
    )

    # The container node becomes a passthrough node: its container stack goes, the VM stack comes.
    relabel(kube, container_node, "vm-passthrough")
    wait_for(
        lambda: (
            apps_on(kube, namespace, container_node, ready=True) == VM_APPS
            and not CONTAINER_APPS & apps_on(kube, namespace, container_node)
        ),
        READY_S,
        what=f"{container_node} moved to the VM stack",
    )
    wait_for(
        lambda: allocatable(kube, container_node) == {PASSTHROUGH_RESOURCE: "2"},
        READY_S,
        what=f"{container_node} advertising {PASSTHROUGH_RESOURCE}",
    )
    assert node_of(kube, namespace, "virt-launcher-vm1") == vm_node

    # A label no one knows: named with the fix; the node's VM stack keeps running.
    relabel(kube, vm_node, "vm-passthru")
    message = wait_for(
        lambda: (condition(read_policy(kube), "Error") or {}).get("message"), REACT_S, what="the Error"
    )
    assert vm_node in message and WORKLOAD in message and "vm-passthru" in message, message
    assert "remove it" in message, message
    wait_for_event(kube, "InvalidClusterPolicy", vm_node)
    assert apps_on(kube, namespace, vm_node, ready=True) == VM_APPS
    assert allocatable(kube, vm_node) == {PASSTHROUGH_RESOURCE: "2"}
    relabel(kube, vm_node, "vm-passthrough")
    wait_ready(kube, "the policy ready again")


VGPU_TYPE = "A10-4Q"
VGPU_RESOURCE = vgpu_devices.resource_name(VGPU_TYPE)
VGPU_APPS = {
    operand_catalog.VGPU_MANAGER.app,
    operand_catalog.SANDBOX_VALIDATOR.app,
    operand_catalog.VGPU_DEVICE_MANAGER.app,
    operand_catalog.SANDBOX_DEVICE_PLUGIN.app,
}
VGPU_IMAGE = {"repository": "registry.example.com/nvidia", "image": "vgpu-manager", "version": "570.124.03"}


def test_vgpu_nodes_run_the_vgpu_stack_beside_container_and_passthrough_nodes(
    kube: client.ApiClient,
    namespace: str,
    control_plane: Any,
    make_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (container_node,) = make_nodes(1, gpus=2)
    (passthrough_node,) = make_nodes(1, gpus=2, extra_labels={WORKLOAD: "vm-passthrough"})
    (vgpu_node,) = make_nodes(1, gpus=2, extra_labels={WORKLOAD: "vm-vgpu", labels.VGPU_CONFIG: VGPU_TYPE})
    spec = {
        "sandboxWorkloads": {"enabled": True},
        "vgpuManager": {"enabled": True},
        "vgpuDeviceManager": {"enabled": True},
    }
    apply_policy(spec=spec)
    start_operator()

    # The vGPU manager image is the admin's to build: unset, an Error naming the field and the fix.
    message = wait_for(
        lambda: (condition(read_policy(kube), "Error") or {}).get("message"), READY_S, what="the Error"
    )
    assert "spec.vgpuManager" in message and "NVIDIA does not publish it" in message, message
    wait_for_event(kube, "InvalidClusterPolicy", "spec.vgpuManager")
    # The other nodes get their stacks meanwhile; the vGPU node no vGPU manager.
    wait_for(
        lambda: allocatable(kube, passthrough_node) == {PASSTHROUGH_RESOURCE: "2"},
        READY_S,
        what=f"{passthrough_node} advertising {PASSTHROUGH_RESOURCE}",
    )
    assert operand_catalog.VGPU_MANAGER.app not in apps_on(kube, namespace, vgpu_node)

    patch_policy(kube, {"vgpuManager": VGPU_IMAGE})
    # 6 A10-4Q per A10 (the default ConfigMap, NVIDIA's counts), 2 A10s.
    wait_for(
        lambda: allocatable(kube, vgpu_node) == {VGPU_RESOURCE: "12"},
        READY_S,
        what=f"{vgpu_node} advertising {VGPU_RESOURCE}",
    )
    # Each node exactly its stack.
    assert apps_on(kube, namespace, vgpu_node, ready=True) == VGPU_APPS
    assert apps_on(kube, namespace, passthrough_node, ready=True) == VM_APPS
    assert not (VM_APPS | VGPU_APPS) & apps_on(kube, namespace, container_node)
    assert apps_on(kube, namespace, container_node) >= CONTAINER_APPS
    assert allocatable(kube, container_node) == {"nvidia.com/gpu": "2"}
    vgpu_labels = client.CoreV1Api(kube).read_node(vgpu_node).metadata.labels
    assert vgpu_labels[labels.VGPU_CONFIG_STATE] == "success"
    assert not any(vgpu_labels.get(o.deploy_label) == "true" for o in operand_catalog.EVERY_GPU_NODE)
    assert vgpu_labels.get(operand_catalog.VFIO_MANAGER.deploy_label) != "true"
    # One vGPU manager DaemonSet, for the node's OS (vanilla: no Driver Toolkit), with the admin's image.
    (manager,) = [
        d
        for d in client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items
        if (d.metadata.labels or {}).get(labels.COMPONENT) == labels.VGPU_MANAGER_COMPONENT
    ]
    assert manager.metadata.name == "nvidia-vgpu-manager-daemonset-ubuntu22.04"
    assert (
        manager.spec.template.spec.containers[0].image
        == "registry.example.com/nvidia/vgpu-manager:570.124.03-ubuntu22.04"
    )
    wait_ready(kube, "the policy ready with the vGPU node")

    # A VM with a vGPU goes to the vGPU node only.
    virt_launcher(kube, namespace, "virt-launcher-vgpu", VGPU_RESOURCE)
    assert (
        wait_for(lambda: node_of(kube, namespace, "virt-launcher-vgpu"), READY_S, what="the vGPU VM's pod")
        == vgpu_node
    )

    # `ocp-gpu status` shows the node's workload.
    report = status_json(control_plane.make_kubeconfig("status-reader", ["system:masters"]))
    shown = {row["node"]: row["workload"] for row in report["nodes"]}
    assert shown[vgpu_node] == "vm-vgpu", shown
    assert shown[passthrough_node] == "vm-passthrough", shown
    assert shown[container_node] == "container", shown

    # A new vGPU manager rolls by its DaemonSet's own update strategy (RollingUpdate, as NVIDIA's):
    # the DaemonSet controller replaces its pod. The driver upgrade of the same change moves the
    # container node only: the vGPU node never gets an upgrade state or a cordon.
    before = vgpu_manager_pod(kube, namespace, vgpu_node, manager.metadata.name)
    assert before is not None
    patch_policy(kube, {"driver": {"version": "550.90.07"}, "vgpuManager": {"version": "570.124.06"}})
    seen_on_vgpu_node: set[tuple[str | None, bool]] = set()

    def rolled() -> bool:
        node = client.CoreV1Api(kube).read_node(vgpu_node)
        seen_on_vgpu_node.add(
            ((node.metadata.labels or {}).get(labels.UPGRADE_STATE), bool(node.spec.unschedulable))
        )
        pod = vgpu_manager_pod(kube, namespace, vgpu_node, manager.metadata.name)
        container = client.CoreV1Api(kube).read_node(container_node).metadata.labels or {}
        return bool(
            pod is not None
            and pod.metadata.uid != before.metadata.uid
            and pod.spec.containers[0].image.endswith(":570.124.06-ubuntu22.04")
            and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
            and container.get(labels.UPGRADE_STATE) == "upgrade-done"
            and driver_version_on(kube, namespace, container_node) == "550.90.07"
        )

    wait_for(rolled, UPGRADE_S, what="the vGPU manager rolled and the container node's driver upgraded")
    assert seen_on_vgpu_node == {(None, False)}, seen_on_vgpu_node
    wait_ready(kube, "the policy ready after both rolled")


def vgpu_manager_pod(
    kube: client.ApiClient, namespace: str, node: str, daemonset: str
) -> client.V1Pod | None:
    """The pod of the vGPU manager DaemonSet `daemonset` on `node` (not one being deleted)."""
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    return next(
        (
            p
            for p in pods
            if p.metadata.deletion_timestamp is None
            and any(r.name == daemonset for r in p.metadata.owner_references or ())
        ),
        None,
    )


def driver_version_on(kube: client.ApiClient, namespace: str, node: str) -> str | None:
    """The driver version of the (not deleted) driver pod on `node`, from its image tag."""
    pods = client.CoreV1Api(kube).list_namespaced_pod(
        namespace,
        label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}",
        field_selector=f"spec.nodeName={node}",
    )
    for pod in pods.items:
        if pod.metadata.deletion_timestamp is None:
            return str(pod.spec.containers[0].image).rpartition(":")[2].split("-")[0]
    return None


def gpu_pod(kube: client.ApiClient, namespace: str, node: str, name: str) -> None:
    """A running container GPU pod (nvidia.com/gpu: 1) on the node, with no controller."""
    body = {
        "metadata": {"name": name, "annotations": fake_nodes.pod_fate_annotations("ready")},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "cuda",
                    "image": "registry.example/cuda:12",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }
    client.CoreV1Api(kube).create_namespaced_pod(namespace, body)


def pod_gone(kube: client.ApiClient, namespace: str, name: str) -> bool:
    return not any(
        p.metadata.name == name for p in client.CoreV1Api(kube).list_namespaced_pod(namespace).items
    )


def test_a_move_waits_for_gpu_pods_or_drains_and_upgrades_skip_vm_nodes(
    kube: client.ApiClient,
    namespace: str,
    control_plane: Any,
    make_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (busy,) = make_nodes(1, gpus=2)
    (vm_node,) = make_nodes(1, gpus=2, extra_labels={WORKLOAD: "vm-passthrough"})
    apply_policy(spec={"sandboxWorkloads": {"enabled": True}})
    start_operator()
    wait_for(lambda: allocatable(kube, busy) == {"nvidia.com/gpu": "2"}, READY_S, what=f"{busy}'s GPUs")
    # A driver upgrade skips the VM node: no upgrade state, never cordoned.
    patch_policy(kube, {"driver": {"version": "550.90.07"}})
    wait_for(
        lambda: (
            client.CoreV1Api(kube).read_node(busy).metadata.labels.get(labels.UPGRADE_STATE) == "upgrade-done"
            and client.CoreV1Api(kube).read_node(busy).metadata.labels.get(labels.deploy_label("driver"))
            == "true"
            and any(
                p.spec.containers[0].image.endswith("550.90.07-ubuntu22.04")
                for p in client.CoreV1Api(kube)
                .list_namespaced_pod(
                    namespace,
                    label_selector=f"{labels.APP}={labels.DRIVER_APP}",
                    field_selector=f"spec.nodeName={busy}",
                )
                .items
            )
        ),
        UPGRADE_S,
        what=f"{busy} upgraded",
    )
    vm = client.CoreV1Api(kube).read_node(vm_node)
    assert labels.UPGRADE_STATE not in (vm.metadata.labels or {}) and not vm.spec.unschedulable

    gpu_pod(kube, namespace, busy, "train")
    wait_for(lambda: node_of(kube, namespace, "train") == busy, READY_S, what="the GPU pod running")

    # Relabelled while a GPU pod runs there, no drain: the node keeps its container stack.
    relabel(kube, busy, "vm-passthrough")
    message = wait_for(
        lambda: next(
            (
                c["message"]
                for c in read_policy(kube)["status"].get("conditions", [])
                if f"{namespace}/train" in c.get("message", "")
            ),
            None,
        ),
        REACT_S,
        what="the held move named in the status",
    )
    assert busy in message and "drain.enable=true" in message, message
    assert labels.DRIVER_APP in apps_on(kube, namespace, busy)
    assert not VM_APPS & apps_on(kube, namespace, busy)
    assert node_of(kube, namespace, "train") == busy
    assert not client.CoreV1Api(kube).read_node(busy).spec.unschedulable

    # `ocp-gpu status` shows each node's workload.
    report = status_json(control_plane.make_kubeconfig("status-reader", ["system:masters"]))
    shown = {row["node"]: row["workload"] for row in report["nodes"]}
    assert shown[busy] == "container (label vm-passthrough)", shown
    assert shown[vm_node] == "vm-passthrough", shown

    # The drain settings let the operator drain it: cordon, evict (Events), move, uncordon.
    patch_policy(kube, {"driver": {"upgradePolicy": {"drain": {"enable": True, "force": True}}}})
    wait_for(lambda: pod_gone(kube, namespace, "train"), READY_S, what="the GPU pod evicted")
    wait_for(
        lambda: (
            apps_on(kube, namespace, busy, ready=True) == VM_APPS
            and not CONTAINER_APPS & apps_on(kube, namespace, busy)
        ),
        READY_S,
        what=f"{busy} moved to the VM stack",
    )
    wait_for(
        lambda: not client.CoreV1Api(kube).read_node(busy).spec.unschedulable, REACT_S, what="uncordoned"
    )
    for said in ("cordoned node", "evicted GPU pod", "uncordoned node"):
        event = wait_for_event_on_node(kube, busy, said)
        assert event.reason == "GPUWorkloadMove"
    wait_for(
        lambda: allocatable(kube, busy) == {PASSTHROUGH_RESOURCE: "2"},
        READY_S,
        what=f"{busy}'s passthrough GPUs",
    )
    # No driver there any more: its upgrade state goes.
    wait_for(
        lambda: labels.UPGRADE_STATE not in client.CoreV1Api(kube).read_node(busy).metadata.labels,
        REACT_S,
        what=f"{busy}'s upgrade state removed",
    )


def wait_for_event_on_node(kube: client.ApiClient, node: str, contains: str) -> Any:
    """The first Event about the node whose message contains `contains`."""
    events = wait_for(
        lambda: [
            e
            for e in client.CoreV1Api(kube)
            .list_event_for_all_namespaces(field_selector=f"involvedObject.name={node}")
            .items
            if contains in (e.message or "")
        ],
        REACT_S,
        what=f"an Event about {node}: {contains}",
    )
    return events[0]
