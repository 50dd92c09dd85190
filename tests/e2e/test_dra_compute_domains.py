"""We test these aspects of the DRA driver's ComputeDomains (`draDriver.computeDomains.enabled`) on
the local control plane (the pods' programs do not run: kwok marks them Running):

- turned on, the operator applies NVIDIA's objects through its own RBAC (the API server's
  escalation check passes: it holds every right the ComputeDomain roles grant): the controller
  Deployment `nvidia-dra-driver-controller`, whose pod the scheduler places, the two
  ComputeDomain DeviceClasses, the controller's and the daemon's roles, and the kubelet plugin
  pods with their `compute-domains` container; the policy is `ready`;
- turned off (DRA still on), exactly those go: the Deployment, its roles, the DeviceClasses,
  the second container; the kubelet plugin and NVIDIA's GPU DeviceClasses stay;
- with the node agent SIMULATION of the compute-domain kubelet plugin (ocp_gpu_harness/dra_slices.py):
  the ComputeDomain CRD we ship takes a ComputeDomain as NVIDIA's docs write one, each node
  publishes its compute-domain.nvidia.com slice (IMEX channel 0, the daemon), a pod whose claim
  comes from the channel ResourceClaimTemplate NVIDIA's controller makes for a ComputeDomain is
  allocated channel 0 of its node by the real kube-scheduler; ComputeDomains off, the slices go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, requesting
from ocp_gpu.rendering.operands import dra_driver, operand_catalog
from ocp_gpu_harness import crds, dra_slices
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import CRD_PATH, READY_S, kubectl, patch_policy, ready_for_the_spec, wait_for
from .test_dra import claim_of, claim_pod, make_nodes, node_of  # noqa: F401 (make_nodes: a fixture)

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
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")

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


DOMAIN_CRD = CRD_PATH.with_name("computedomains.resource.nvidia.com.yaml")
DOMAINS = "/apis/resource.nvidia.com/v1beta1"


@pytest.fixture(scope="session")
def compute_domain_crd(control_plane: LocalControlPlane) -> None:
    kubectl(control_plane, "apply", "--server-side", "-f", str(DOMAIN_CRD))
    with control_plane.api_client() as api:
        crds.wait_until_served(api, ["computedomains.resource.nvidia.com"])


def domain_slices(api: clients.ApiClient, node: str) -> list[dict[str, Any]]:
    return requesting.list_items(
        api,
        "/apis/resource.k8s.io/v1/resourceslices",
        [("fieldSelector", f"spec.nodeName={node},spec.driver={dra_slices.COMPUTE_DOMAIN_DRIVER}")],
    )


def channel_template(name: str, domain_uid: str) -> dict[str, Any]:
    """The workload ResourceClaimTemplate NVIDIA's compute-domain controller makes for a
    ComputeDomain (templates/compute-domain-workload-claim-template.tmpl.yaml at the pinned
    commit, less its finalizer): the controller does not run here."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "labels": {
                "resource.nvidia.com/computeDomain": domain_uid,
                "resource.nvidia.com/computeDomainTarget": "Workload",
            },
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "channel",
                            "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"},
                        }
                    ],
                    "config": [
                        {
                            "requests": ["channel"],
                            "opaque": {
                                "driver": dra_slices.COMPUTE_DOMAIN_DRIVER,
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "ComputeDomainChannelConfig",
                                    "domainID": domain_uid,
                                    "allocationMode": "Single",
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


def test_a_compute_domain_channel_claim_is_allocated_by_the_scheduler(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    compute_domain_crd: None,
    make_nodes: Callable[..., list[str]],  # noqa: F811
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    (node,) = make_nodes(1, gpus=2)
    # A ComputeDomain as NVIDIA's documentation writes one: the shipped CRD takes it.
    domain = requesting.request(
        api,
        "POST",
        f"{DOMAINS}/namespaces/{namespace}/computedomains",
        body={
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomain",
            "metadata": {"name": "imex-domain"},
            "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "imex-channel"}}},
        },
    )
    requesting.request(
        api,
        "POST",
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates",
        body=channel_template("imex-channel", domain["metadata"]["uid"]),
    )
    apply_policy(spec={"draDriver": {"enabled": True, "computeDomains": {"enabled": True}}})
    start_operator()
    # Budget READY_S: the kubelet plugin's pod placed and readied (after the toolkit's marker),
    # then a node agent pass publishes the slice.
    (published,) = wait_for(lambda: domain_slices(api, node), READY_S, what="the compute-domain slice")
    assert published["spec"]["pool"]["name"] == node
    assert [d["name"] for d in published["spec"]["devices"]] == ["channel-0", "daemon-0"]

    claim_pod(kube, namespace, "imex-workload", {"resourceClaimTemplateName": "imex-channel"})
    wait_for(
        lambda: node_of(kube, namespace, "imex-workload"), READY_S, what="the workload scheduled and running"
    )
    assert node_of(kube, namespace, "imex-workload") == node
    (result,) = claim_of(api, namespace, "imex-workload")["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (
        dra_slices.COMPUTE_DOMAIN_DRIVER,
        node,
        "channel-0",
    )

    client.CoreV1Api(kube).delete_namespaced_pod("imex-workload", namespace, grace_period_seconds=0)
    patch_policy(kube, {"draDriver": {"computeDomains": {"enabled": False}}})
    wait_for(lambda: not domain_slices(api, node), READY_S, what="the compute-domain slice gone")
