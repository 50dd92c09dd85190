"""We test these aspects of the container-toolkit operand on the local control plane, with the
real DaemonSet controller and kwok's fake kubelets:

- one `nvidia-container-toolkit-daemonset`, pods on every GPU node and on no CPU node, and the
  policy is `ready` only once those pods are Ready too;
- `daemonsets.updateStrategy` is honoured for it (RollingUpdate by default: a new toolkit
  version replaces every pod; OnDelete: the template changes, the pods stay, and the policy says
  `notReady` and why until they are deleted), while the driver DaemonSet stays `OnDelete`
  whatever the policy says;
- a toolkit image the operator cannot build is an error naming the field, and the running
  DaemonSet is neither changed nor deleted;
- `toolkit.enabled: false` removes the DaemonSet; the driver is untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import toolkit as toolkit_rendering
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess

from . import conftest as e2e

pytestmark = pytest.mark.e2e

TOOLKIT = toolkit_rendering.DAEMONSET
TOOLKIT_PODS = f"{labels.APP}={toolkit_rendering.APP}"


@pytest.fixture
def nodes(kube: client.ApiClient) -> Iterator[tuple[list[str], str]]:
    gpu = [unique_name("gpu") for _ in range(3)]
    cpu = unique_name("cpu")
    fake_nodes.create_nodes(kube, [*(fake_nodes.vanilla_gpu_node(n) for n in gpu), fake_nodes.cpu_node(cpu)])
    yield gpu, cpu
    fake_nodes.delete_nodes(kube, [*gpu, cpu])


def toolkit_pods(kube: client.ApiClient, namespace: str) -> list[Any]:
    return list(client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=TOOLKIT_PODS).items)


def images_by_node(kube: client.ApiClient, namespace: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for pod in toolkit_pods(kube, namespace):
        if pod.spec.node_name and not pod.metadata.deletion_timestamp:
            found.setdefault(pod.spec.node_name, set()).add(pod.spec.containers[0].image)
    return found


def daemonset(kube: client.ApiClient, namespace: str, name: str) -> Any:
    return client.AppsV1Api(kube).read_namespaced_daemon_set(name, namespace)


def test_toolkit_daemonset_and_update_strategy(
    kube: client.ApiClient,
    namespace: str,
    nodes: tuple[list[str], str],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    gpu, cpu = nodes
    apply_policy(spec={"toolkit": {"version": "v1.16.2-ubuntu20.04"}})
    start_operator()

    e2e.wait_for(
        lambda: set(images_by_node(kube, namespace)) == set(gpu),
        e2e.STEP_S,
        what="a toolkit pod per GPU node",
    )
    assert cpu not in images_by_node(kube, namespace)
    ds = daemonset(kube, namespace, TOOLKIT)
    assert ds.spec.update_strategy.type == "RollingUpdate"
    assert ds.spec.template.spec.node_selector == {labels.deploy_label("container-toolkit"): "true"}
    e2e.wait_for(lambda: e2e.ready_for_the_spec(kube), e2e.READY_S, what="policy ready")

    # RollingUpdate: the DaemonSet controller replaces every pod with the new version.
    e2e.patch_policy(kube, {"toolkit": {"version": "v1.17.0-ubuntu20.04"}})
    e2e.wait_for(
        lambda: (
            all(
                images == {"nvcr.io/nvidia/k8s/container-toolkit:v1.17.0-ubuntu20.04"}
                for images in images_by_node(kube, namespace).values()
            )
            and len(images_by_node(kube, namespace)) == len(gpu)
        ),
        e2e.READY_S,
        what="toolkit pods rolled to v1.17.0",
    )

    # OnDelete: the template changes, the running pods stay as they are.
    e2e.patch_policy(
        kube, {"daemonsets": {"updateStrategy": "OnDelete"}, "toolkit": {"version": "v1.17.1-ubuntu20.04"}}
    )
    e2e.wait_for(
        lambda: (
            daemonset(kube, namespace, TOOLKIT).spec.update_strategy.type == "OnDelete"
            and daemonset(kube, namespace, TOOLKIT)
            .spec.template.spec.containers[0]
            .image.endswith("v1.17.1-ubuntu20.04")
        ),
        e2e.REACT_S,
        what="toolkit DaemonSet OnDelete with v1.17.1",
    )
    # A window of 8 s: with RollingUpdate the DaemonSet controller replaces a pod within a
    # second or two here; with OnDelete none may be replaced.
    e2e.holds_for(
        lambda: all(
            images == {"nvcr.io/nvidia/k8s/container-toolkit:v1.17.0-ubuntu20.04"}
            for images in images_by_node(kube, namespace).values()
        ),
        8,
        interval=0.5,
        what="OnDelete: no running toolkit pod replaced",
    )

    # ...so the policy is not ready (as NVIDIA's isDaemonSetReady: pods on a previous template),
    # and says what rolls them; deleting them (the admin's part with OnDelete) makes it ready.
    def ready_condition() -> dict[str, Any]:
        return e2e.condition(e2e.read_policy(kube), "Ready")

    e2e.wait_for(
        lambda: "updateStrategy is OnDelete" in ready_condition().get("message", ""), e2e.REACT_S, what="why"
    )
    assert ready_condition()["reason"] == "OperandNotReady"
    assert "container-toolkit not ready on " in ready_condition()["message"]
    assert e2e.policy_state(kube) == "notReady"
    for pod in toolkit_pods(kube, namespace):
        client.CoreV1Api(kube).delete_namespaced_pod(pod.metadata.name, namespace)
    e2e.wait_for(lambda: e2e.ready_for_the_spec(kube), e2e.READY_S, what="ready once the old pods went")
    assert all(
        images == {"nvcr.io/nvidia/k8s/container-toolkit:v1.17.1-ubuntu20.04"}
        for images in images_by_node(kube, namespace).values()
    )
    # The driver's DaemonSets are OnDelete whatever daemonsets.updateStrategy says.
    drivers = (
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}")
        .items
    )
    assert drivers and all(d.spec.update_strategy.type == "OnDelete" for d in drivers)

    # An image the operator cannot build: error naming the field, nothing changed or deleted.
    generation = daemonset(kube, namespace, TOOLKIT).metadata.generation
    e2e.patch_policy(kube, {"toolkit": {"repository": "Bad_Repo!", "image": "container-toolkit"}})
    e2e.wait_for(
        lambda: "spec.toolkit.repository" in e2e.condition(e2e.read_policy(kube), "Error").get("message", ""),
        e2e.REACT_S,
        what="Error e2e.condition naming spec.toolkit.repository",
    )
    e2e.wait_for_event(kube, "InvalidClusterPolicy", "spec.toolkit.repository")
    assert daemonset(kube, namespace, TOOLKIT).metadata.generation == generation
    e2e.patch_policy(kube, {"toolkit": {"repository": None, "image": None}})

    # toolkit.enabled: false removes the toolkit; the driver DaemonSets stay.
    e2e.patch_policy(kube, {"toolkit": {"enabled": False}})
    e2e.wait_for(lambda: not toolkit_pods(kube, namespace), e2e.STEP_S, what="toolkit pods gone")
    with pytest.raises(client.exceptions.ApiException) as gone:
        daemonset(kube, namespace, TOOLKIT)
    assert gone.value.status == 404
    assert [
        d.metadata.name
        for d in client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}")
        .items
    ] == [d.metadata.name for d in drivers]
