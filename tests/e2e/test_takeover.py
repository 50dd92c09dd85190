"""We test these aspects of taking over operands someone else made, on the local control plane:

(a) NVIDIA's objects, as its operator (field manager `gpu-operator`) writes them at v26.7.0: the
    DTK driver DaemonSet of an RHCOS version (its selector app=<name>), the device plugin's
    (NVIDIA's `allowPrivilegeEscalation: false` and `capabilities.drop: [ALL]`, which our
    `privileged: true` cannot sit beside: HTTP 422 without a takeover) and a ServiceAccount:
    ocp-gpu updates each in place (same uid), no driver pod is replaced, and afterwards no
    field of the main resource is owned by another manager and NVIDIA's extra fields are gone;
(b) ocp-gpu's own DTK driver DaemonSet from before its selector became NVIIDA's (app=
    nvidia-driver-daemonset, strategy, key): replaced by one with the new selector that adopts
    the running driver pods (same pod uids, now owned by the new DaemonSet), never two driver
    pods on a node (sampled).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import REACT_S, READY_S, STEP_S, BackgroundSampler, read_policy, wait_for

pytestmark = pytest.mark.e2e

V1 = fake_nodes.DEFAULT_RHCOS
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "1" * 64
NVIDIA_MANAGER = "gpu-operator"
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
DRIVER_DS = f"nvidia-driver-daemonset-{V1}"
# Nothing but the driver and the device plugin: what this test adopts.
SPEC: dict[str, Any] = {
    "driver": {"upgradePolicy": {"autoUpgrade": False}},
    "toolkit": {"enabled": False},
    # ours then runs the plugin privileged, which the API refuses beside NVIDIA's allowPrivilegeEscalation
    "devicePlugin": {"compatWithCPUManager": True},
    "validator": {},
    "gfd": {"enabled": False},
    "dcgm": {"enabled": False},
    "dcgmExporter": {"enabled": False},
    "nodeStatusExporter": {"enabled": False},
    "migManager": {"enabled": False},
}


@pytest.fixture
def gpu_nodes(kube: client.ApiClient) -> Iterator[list[str]]:
    names = [unique_name("gpu") for _ in range(2)]
    # As NVIDIA's operator left them: every operand's deploy label set.
    deploy = {labels.deploy_label(name): "true" for name in ("driver", "device-plugin")}
    fake_nodes.create_nodes(
        kube, [fake_nodes.gpu_node(name, rhcos=V1, extra_labels=deploy) for name in names]
    )
    yield names
    fake_nodes.delete_nodes(kube, names)


@dataclass(frozen=True)
class Takeover:
    """What NVIDIA's operator leaves for ocp-gpu: V1's driver-toolkit tag served, the ClusterPolicy
    (SPEC) applied; `start` starts ocp-gpu (start_operator) once NVIDIA's objects are in place."""

    policy: dict[str, Any]
    start: Callable[..., OperatorProcess]


@pytest.fixture
def takeover(
    openshift: client.ApiClient,
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> Takeover:
    """NB: in the order the tests took them: the operator stops before the policy is deleted.

    NB: a 30 s lease, as test_takeover_nvidia's (conftest's 4 s is for the tests that change
    leaders): at load 35 a renewal took longer than its 3 s deadline mid-takeover and the operator
    stopped."""
    openshift_emulation.set_driver_toolkit_tags(openshift, {V1: DTK})
    return Takeover(
        apply_policy(spec=SPEC),
        functools.partial(start_operator, "--lease-duration", "30", "--lease-renew-deadline", "20"),
    )


def owner_ref(policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "name": policy["metadata"]["name"],
        "uid": policy["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def daemonset(
    name: str,
    selector: dict[str, str],
    pod_labels: dict[str, str],
    container: dict[str, Any],
    node_selector: dict[str, str],
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "labels": dict(pod_labels)},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "nodeSelector": node_selector,
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [container],
                },
            },
        },
    }


def create_as(kube: client.ApiClient, manager: str, namespace: str, body: dict[str, Any]) -> Any:
    """Create as another operator would: a POST with its field manager (operation Update)."""
    body["metadata"]["namespace"] = namespace
    if body["kind"] == "DaemonSet":
        return client.AppsV1Api(kube).create_namespaced_daemon_set(namespace, body, field_manager=manager)
    return client.CoreV1Api(kube).create_namespaced_service_account(namespace, body, field_manager=manager)


def driver_pods(kube: client.ApiClient, namespace: str) -> dict[str, Any]:
    """Driver pod uid -> pod, of pods not being deleted."""
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=DRIVER_PODS).items
    return {p.metadata.uid: p for p in pods if not p.metadata.deletion_timestamp}


def running_on_every_node(kube: client.ApiClient, namespace: str, nodes: list[str]) -> dict[str, Any]:
    pods = driver_pods(kube, namespace)
    running = {p.spec.node_name for p in pods.values() if p.status.phase == "Running"}
    return pods if running >= set(nodes) and len(pods) == len(nodes) else {}


def most_driver_pods_on_a_node(kube: client.ApiClient, namespace: str) -> int:
    counts = collections.Counter(
        p.spec.node_name for p in driver_pods(kube, namespace).values() if p.spec.node_name
    )
    return max(counts.values(), default=0)


class PodsPerNode(BackgroundSampler):
    """The most driver pods any node had at once, sampled."""

    def __init__(self, kube: client.ApiClient, namespace: str) -> None:
        super().__init__()
        self.kube, self.namespace, self.most = kube, namespace, 0

    def sample(self) -> None:
        self.most = max(self.most, most_driver_pods_on_a_node(self.kube, self.namespace))


def foreign_managers(obj: Any) -> list[str]:
    return sorted(
        f"{m.manager} ({m.operation})"
        for m in obj.metadata.managed_fields or ()
        if not m.subresource and (m.manager != "ocp-gpu" or m.operation != "Apply")
    )


def test_a_nvidias_objects_are_updated_in_place_and_become_ours_alone(
    kube: client.ApiClient,
    namespace: str,
    gpu_nodes: list[str],
    takeover: Takeover,
) -> None:
    # NVIDIA's DTK driver DaemonSet (assets/state-driver + transformOpenShiftDriverToolkitContainer).
    nvidia_driver_labels = {
        labels.APP: DRIVER_DS,
        labels.COMPONENT: labels.DRIVER_COMPONENT,
        labels.PRECOMPILED: "false",
        labels.DTK_DAEMONSET: "true",
    }
    driver = daemonset(
        DRIVER_DS,
        {labels.APP: DRIVER_DS},
        nvidia_driver_labels,
        {"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550.90.07-rhcos4.16"},
        {labels.deploy_label("driver"): "true", labels.OSTREE_VERSION: V1},
    )
    driver["metadata"]["ownerReferences"] = [owner_ref(takeover.policy)]
    driver["metadata"]["labels"][labels.DTK_RHCOS] = V1
    plugin = daemonset(
        "nvidia-device-plugin-daemonset",
        {labels.APP: "nvidia-device-plugin-daemonset"},
        {labels.APP: "nvidia-device-plugin-daemonset"},
        {
            "name": "nvidia-device-plugin",
            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            # NVIDIA's (assets/state-device-plugin): ours runs privileged, which the API refuses beside these
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        },
        {labels.deploy_label("device-plugin"): "true"},
    )
    plugin["metadata"]["ownerReferences"] = [owner_ref(takeover.policy)]
    account: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "nvidia-driver",
            "labels": {"nvidia-only": "yes"},
            "ownerReferences": [owner_ref(takeover.policy)],
        },
    }
    made = {
        obj["metadata"]["name"]: create_as(kube, NVIDIA_MANAGER, namespace, obj)
        for obj in (driver, plugin, account)
    }
    before = wait_for(
        lambda: running_on_every_node(kube, namespace, gpu_nodes), STEP_S, what="NVIDIA's driver pods running"
    )

    with PodsPerNode(kube, namespace) as sampler:
        takeover.start()
        apps, core = client.AppsV1Api(kube), client.CoreV1Api(kube)

        def adopted() -> bool:
            ds = apps.read_namespaced_daemon_set(DRIVER_DS, namespace)
            dp = apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", namespace)
            sa = core.read_namespaced_service_account("nvidia-driver", namespace)
            return all(
                labels.MANAGED_BY in (o.metadata.labels or {}) and not foreign_managers(o)
                for o in (ds, dp, sa)
            )

        wait_for(adopted, STEP_S, what="NVIDIA's objects adopted")
    ds = apps.read_namespaced_daemon_set(DRIVER_DS, namespace)
    dp = apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", namespace)
    sa = core.read_namespaced_service_account("nvidia-driver", namespace)
    # in place: the same objects
    assert ds.metadata.uid == made[DRIVER_DS].metadata.uid
    assert dp.metadata.uid == made["nvidia-device-plugin-daemonset"].metadata.uid
    assert sa.metadata.uid == made["nvidia-driver"].metadata.uid
    # NVIDIA's extra fields are gone: what is left is what ocp-gpu renders
    container = dp.spec.template.spec.containers[0]
    assert container.security_context.privileged is True
    assert container.security_context.allow_privilege_escalation is None
    assert container.security_context.capabilities is None
    assert "nvidia-only" not in (sa.metadata.labels or {})
    # the DTK sidecar is ours now; the driver pods are NVIDIA's still, untouched and adopted
    assert {c.name for c in ds.spec.template.spec.containers} >= {
        "nvidia-driver-ctr",
        "openshift-driver-toolkit-ctr",
    }
    after = driver_pods(kube, namespace)
    assert set(after) == set(before)
    assert all(p.metadata.owner_references[0].uid == ds.metadata.uid for p in after.values())
    assert all(
        max((s.restart_count for s in p.status.container_statuses or ()), default=0) == 0
        for p in after.values()
    )
    assert sampler.most <= 1 and sampler.samples > 0, sampler.most
    # the status says which driver pods run NVIDIA's template (the same driver: not restarted)
    wait_for(
        lambda: (read_policy(kube).get("status") or {}).get("namespace") == namespace,
        REACT_S,
        what="the policy's status written",
    )


def test_b_ocp_gpus_driver_daemonset_with_the_old_selector_is_replaced_keeping_its_pods(
    kube: client.ApiClient,
    namespace: str,
    gpu_nodes: list[str],
    takeover: Takeover,
) -> None:
    # As ocp-gpu rendered it before: app=nvidia-driver-daemonset plus strategy and key.
    old_selector = {labels.APP: labels.DRIVER_APP, labels.DRIVER_STRATEGY: "dtk", labels.DRIVER_KEY: V1}
    pod_labels = {
        **old_selector,
        labels.COMPONENT: labels.DRIVER_COMPONENT,
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.DTK_DAEMONSET: "true",
        labels.DTK_RHCOS: V1,
    }
    old = daemonset(
        DRIVER_DS,
        old_selector,
        pod_labels,
        {"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550.90.07-rhcos4.16"},
        {labels.deploy_label("driver"): "true", labels.OSTREE_VERSION: V1},
    )
    old["metadata"]["ownerReferences"] = [owner_ref(takeover.policy)]
    made = create_as(kube, "ocp-gpu", namespace, old)
    before = wait_for(
        lambda: running_on_every_node(kube, namespace, gpu_nodes), STEP_S, what="the old driver pods running"
    )

    apps = client.AppsV1Api(kube)
    with PodsPerNode(kube, namespace) as sampler:
        takeover.start()

        def replaced() -> Any:
            try:
                ds = apps.read_namespaced_daemon_set(DRIVER_DS, namespace)
            except client.exceptions.ApiException:
                return None
            pods = driver_pods(kube, namespace)
            owned = all(
                (p.metadata.owner_references or [None])[0]
                and p.metadata.owner_references[0].uid == ds.metadata.uid
                for p in pods.values()
            )
            return ds if ds.metadata.uid != made.metadata.uid and owned and set(pods) == set(before) else None

        ds = wait_for(replaced, READY_S, what="the driver DaemonSet replaced, its pods adopted")
    assert ds.spec.selector.match_labels == {labels.APP: DRIVER_DS}
    after = driver_pods(kube, namespace)
    assert set(after) == set(before)
    assert all(p.metadata.labels[labels.APP] == DRIVER_DS for p in after.values())
    assert sampler.most <= 1 and sampler.samples > 0, sampler.most
