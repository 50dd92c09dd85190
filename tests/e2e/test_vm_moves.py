"""We test these aspects of moving a node back from the VM passthrough stack to containers
(planning/operands/workload_moves.py) on the local control plane, with the real kube-scheduler,
the real eviction API and the node agent SIMULATION of NVIDIA's KubeVirt device plugin
(ocp_gpu_harness/vfio_devices.py) advertising the node's A10s as `nvidia.com/GA102GL_A10`; a pod
requesting that resource stands in for KubeVirt's virt-launcher of a running VM:

- relabelled `container` while the VM runs, without drain: the VM stack stays (its pods, the
  passthrough resource), the node is not cordoned, and the status names the pod and the fix; once
  the pod ends the node gets the container stack (its driver pod, `nvidia.com/gpu`);
- with drain enabled and a drain.podSelector that leaves the VM's pod out: the node is cordoned
  but the pod is never evicted, and the status says the selector leaves it out;
- with a selector that takes it and a PodDisruptionBudget refusing its eviction: the drain
  outlasts drain.timeoutSeconds and fails as the upgrade's drain does (an Error condition naming the
  pod and the ways out; the node stays cordoned on the VM stack);
- the budget gone and the drain timer annotation removed (the documented retry): the pod is evicted,
  the node moves to the container stack and is uncordoned, each step an Event (GPUWorkloadMove).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.reconcilers import cluster
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import REACT_S, READY_S, holds_for, patch_policy, read_policy, wait_for
from .test_virtual_machines import (
    CONTAINER_APPS,
    PASSTHROUGH_RESOURCE,
    PRODUCT,
    VM_APPS,
    WORKLOAD,
    allocatable,
    apps_on,
    node_of,
    pod_gone,
    relabel,
    virt_launcher,
    wait_for_event_on_node,
)

pytestmark = pytest.mark.e2e

# The window a held move is watched for: two of the operator's re-checks of a waiting node, each a
# chance to move it wrongly.
HELD_S = 2 * cluster.MOVE_RECHECK_S + 2


def status_naming(kube: client.ApiClient, text: str, kind: str | None = None) -> dict[str, Any] | None:
    """The first status condition (of type `kind`, with one) whose message contains `text` (None
    while none does)."""
    conditions = (read_policy(kube).get("status") or {}).get("conditions") or []
    return next(
        (c for c in conditions if text in (c.get("message") or "") and kind in (None, c.get("type"))), None
    )


def on_vm_stack(kube: client.ApiClient, namespace: str, node: str) -> bool:
    return (
        apps_on(kube, namespace, node, ready=True) == VM_APPS
        and not CONTAINER_APPS & apps_on(kube, namespace, node)
        and allocatable(kube, node) == {PASSTHROUGH_RESOURCE: "2"}
    )


def on_container_stack(kube: client.ApiClient, namespace: str, node: str) -> bool:
    return (
        apps_on(kube, namespace, node, ready=True) >= CONTAINER_APPS
        and not VM_APPS & apps_on(kube, namespace, node)
        and allocatable(kube, node) == {"nvidia.com/gpu": "2"}
    )


def unschedulable(kube: client.ApiClient, node: str) -> bool:
    return bool(client.CoreV1Api(kube).read_node(node).spec.unschedulable)


def vm_node_with_a_vm(
    kube: client.ApiClient,
    namespace: str,
    simulated_gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
    spec: dict[str, Any],
) -> str:
    """A vm-passthrough node on its VM stack, with a virt-launcher stand-in running there."""
    (node,) = simulated_gpu_nodes(
        1, prefix="vmback", product=PRODUCT, gpus=2, extra_labels={WORKLOAD: "vm-passthrough"}
    )
    apply_policy(spec={"sandboxWorkloads": {"enabled": True}, **spec})
    start_operator()
    wait_for(lambda: on_vm_stack(kube, namespace, node), READY_S, what=f"{node} on the VM stack")
    virt_launcher(kube, namespace, "virt-launcher-vm1")
    wait_for(lambda: node_of(kube, namespace, "virt-launcher-vm1") == node, READY_S, what="the VM running")
    return node


def test_a_move_back_to_containers_waits_for_the_vm(
    kube: client.ApiClient,
    namespace: str,
    simulated_gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    node = vm_node_with_a_vm(kube, namespace, simulated_gpu_nodes, start_operator, apply_policy, {})

    relabel(kube, node, "container")
    held = wait_for(
        lambda: status_naming(kube, f"{namespace}/virt-launcher-vm1"), REACT_S, what="the held move named"
    )
    assert node in held["message"] and "drain.enable=true" in held["message"], held
    holds_for(
        lambda: (
            on_vm_stack(kube, namespace, node)
            and node_of(kube, namespace, "virt-launcher-vm1") == node
            and not unschedulable(kube, node)
        ),
        HELD_S,
        what=f"{node} kept on the VM stack under its VM, not cordoned",
    )

    # The VM ends: the node moves.
    client.CoreV1Api(kube).delete_namespaced_pod("virt-launcher-vm1", namespace)
    wait_for(
        lambda: on_container_stack(kube, namespace, node), READY_S, what=f"{node} on the container stack"
    )
    wait_for(
        lambda: status_naming(kube, "virt-launcher-vm1") is None,
        REACT_S,
        what="the held move no longer named",
    )


def test_a_drained_move_back_honours_the_pod_selector_and_the_timeout(
    kube: client.ApiClient,
    namespace: str,
    simulated_gpu_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    drain = {"enable": True, "force": True, "podSelector": "app=batch", "timeoutSeconds": 5}
    spec = {"driver": {"upgradePolicy": {"drain": drain}}}
    node = vm_node_with_a_vm(kube, namespace, simulated_gpu_nodes, start_operator, apply_policy, spec)

    # The selector leaves the VM's pod out: cordoned, never evicted, named.
    relabel(kube, node, "container")
    held = wait_for(lambda: status_naming(kube, "podSelector leaves out"), REACT_S, what="the selector named")
    assert f"{namespace}/virt-launcher-vm1" in held["message"], held
    wait_for(lambda: unschedulable(kube, node), REACT_S, what=f"{node} cordoned")
    holds_for(
        lambda: node_of(kube, namespace, "virt-launcher-vm1") == node and on_vm_stack(kube, namespace, node),
        HELD_S,
        what="the VM's pod left running, the node on the VM stack",
    )

    # A budget refuses the eviction: the drain outlasts its 5 s and fails, the node stays cordoned.
    budget = {
        "metadata": {"name": "vm1"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"kubevirt.io": "virt-launcher"}}},
    }
    client.PolicyV1Api(kube).create_namespaced_pod_disruption_budget(namespace, budget)
    patch_policy(kube, {"driver": {"upgradePolicy": {"drain": {"podSelector": "kubevirt.io=virt-launcher"}}}})
    # NB: the timeout plus the operator's re-check (MOVE_RECHECK_S) and its reaction.
    failed = wait_for(
        lambda: status_naming(kube, "outlasted drain.timeoutSeconds", "Error"),
        REACT_S,
        what="the failed drain",
    )
    assert node in failed["message"] and f"{namespace}/virt-launcher-vm1" in failed["message"], failed
    assert labels.WORKLOAD_MOVE_DRAIN_START in failed["message"], failed
    assert unschedulable(kube, node) and node_of(kube, namespace, "virt-launcher-vm1") == node
    assert on_vm_stack(kube, namespace, node)

    # The budget gone and the timer removed: drained again, evicted, moved, uncordoned.
    client.PolicyV1Api(kube).delete_namespaced_pod_disruption_budget("vm1", namespace)
    patch_policy(kube, {"driver": {"upgradePolicy": {"drain": {"timeoutSeconds": 0}}}})
    client.CoreV1Api(kube).patch_node(
        node, {"metadata": {"annotations": {labels.WORKLOAD_MOVE_DRAIN_START: None}}}
    )
    wait_for(lambda: pod_gone(kube, namespace, "virt-launcher-vm1"), READY_S, what="the VM's pod evicted")
    wait_for(
        lambda: on_container_stack(kube, namespace, node), READY_S, what=f"{node} on the container stack"
    )
    wait_for(lambda: not unschedulable(kube, node), REACT_S, what=f"{node} uncordoned")
    for said in ("cordoned node", "evicted GPU pod", "uncordoned node"):
        assert wait_for_event_on_node(kube, node, said).reason == cluster.MOVE_EVENT_REASON
    annotations = client.CoreV1Api(kube).read_node(node).metadata.annotations or {}
    assert labels.WORKLOAD_MOVE_DRAIN_START not in annotations
    assert labels.WORKLOAD_MOVE_CORDON not in annotations
