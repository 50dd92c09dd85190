"""We test these aspects of the DRA driver's ComputeDomains (`draDriver.computeDomains.enabled`) on
the local control plane (the pods' programs do not run: kwok marks them Running):

- turned on, the operator applies NVIDIA's objects through its own RBAC (the API server's
  escalation check passes: it holds every right the ComputeDomain roles grant): the controller
  Deployment `nvidia-dra-driver-controller`, whose pod the scheduler places, the two
  ComputeDomain DeviceClasses, the controller's and the daemon's roles, and the kubelet plugin
  pods with their `compute-domains` container; the policy is `ready`;
- turned off (DRA still on), exactly those go: the Deployment, its roles, the DeviceClasses,
  the second container; the kubelet plugin and NVIDIA's GPU DeviceClasses stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, requesting
from ocp_gpu.rendering.operands import dra_driver, operand_catalog
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import READY_S, patch_policy, policy_state, wait_for
from .test_dra import make_nodes  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
DOMAIN_CLASSES = {"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"}


def device_classes(api: clients.ApiClient) -> set[str]:
    return {c["metadata"]["name"] for c in requesting.list_items(api, CLASSES)}


def controller_pods(kube: client.ApiClient, namespace: str) -> list[Any]:
    return (
        client.CoreV1Api(kube)
        .list_namespaced_pod(namespace, label_selector=f"app={dra_driver.CONTROLLER}")
        .items
    )


def plugin_containers(kube: client.ApiClient, namespace: str) -> list[str] | None:
    found = (
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, label_selector=f"app={operand_catalog.DRA_DRIVER.app}")
        .items
    )
    return [c.name for c in found[0].spec.template.spec.containers] if found else None


def deployments(kube: client.ApiClient, namespace: str) -> set[str]:
    return {d.metadata.name for d in client.AppsV1Api(kube).list_namespaced_deployment(namespace).items}


def test_compute_domains_come_and_go_with_their_switch(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    make_nodes: Callable[..., list[str]],  # noqa: F811
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    make_nodes(1, gpus=2)
    apply_policy(spec={"draDriver": {"enabled": True, "computeDomains": {"enabled": True}}})
    start_operator()
    wait_for(lambda: dra_driver.CONTROLLER in deployments(kube, namespace), READY_S, what="the controller")

    def controller_running() -> bool:
        return any(p.status.phase == "Running" and p.spec.node_name for p in controller_pods(kube, namespace))

    wait_for(controller_running, READY_S, what="the controller's pod scheduled and running")
    assert DOMAIN_CLASSES | {"gpu.nvidia.com"} <= device_classes(api)
    assert plugin_containers(kube, namespace) == ["gpus", "compute-domains"]
    rbac = client.RbacAuthorizationV1Api(kube)
    assert rbac.read_cluster_role(dra_driver.DAEMON_ROLE).rules
    assert rbac.read_namespaced_role(dra_driver.CONTROLLER, namespace).rules
    wait_for(lambda: policy_state(kube) == "ready", READY_S, what="policy ready")

    patch_policy(kube, {"draDriver": {"computeDomains": {"enabled": False}}})
    wait_for(
        lambda: dra_driver.CONTROLLER not in deployments(kube, namespace), READY_S, what="the controller gone"
    )
    wait_for(
        lambda: not (DOMAIN_CLASSES & device_classes(api)), READY_S, what="the ComputeDomain classes gone"
    )
    wait_for(
        lambda: plugin_containers(kube, namespace) == ["gpus"],
        READY_S,
        what="the plugin's second container gone",
    )
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert dra_driver.DAEMON_ROLE not in names and dra_driver.CONTROLLER not in names
    assert "gpu.nvidia.com" in device_classes(api)
