"""We test these aspects of the GPU stack (driver, toolkit, validator, device plugin, GFD) on the
local control plane, with the node-agent SIMULATION (ocp_gpu_harness/node_agent.py) standing in
for kubelets and the NVIDIA stack: operand pods become Ready only once their markers would
exist, GPUs become allocatable from the plugin config the operator rendered, GFD labels appear:

- a pod requesting `nvidia.com/gpu` stays Pending until driver -> toolkit -> device plugin ->
  validator are Ready on a node, then is scheduled there; the CPU node gets no operand pod; a node
  labelled `nvidia.com/gpu.deploy.device-plugin=false` gets no plugin and no GPU capacity; the
  RuntimeClass exists and every operand pod tolerates `nvidia.com/gpu`;
- `resourceConfig: gpu:sharedgpu:4` on an 8-GPU node: `nvidia.com/sharedgpu: 32`, 32 pods run,
  the 33rd stays Pending; back to no sharing: `nvidia.com/gpu: 8`; `devicePlugin.config.name`
  naming a missing ConfigMap, then one without the key `config.default` names: an error naming
  the field and an Event, the plugin keeps our ConfigMap; once it fits it is mounted and its
  config (time-slicing x2) makes `nvidia.com/gpu: 16`;
- each operand's `enabled: false` removes its objects and nothing else, `true` brings them back,
  and with every operand deployed the operator makes zero writes in steady state (audit log);
- a tainted GPU pool (`nvidia.com/gpu=present:NoSchedule`): every operand runs there, a CPU
  workload does not;
- the upgrade's validation step passes on Ready validator pods and waits on a node whose
  validator never becomes Ready.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    condition,
    holds_for,
    patch_policy,
    quiet_writes,
    read_policy,
    ready_for_the_spec,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

APPS = f"{labels.APP} in ({','.join(operand_catalog.POD_APPS)})"
# The operands an empty ClusterPolicy deploys (nodeStatusExporter is off by default, as NVIDIA's).
# NB: the MIG manager runs only on MIG-capable nodes; the simulated GPUs here are L40S (test_mig.py);
# the MPS control daemon only where the plugin config shares with MPS (test_mps.py).
DEFAULT_APPS = {
    o.app
    for o in operand_catalog.OPERANDS
    if o.is_enabled(policy_spec.Policy())
    and o not in (operand_catalog.MIG_MANAGER, operand_catalog.MPS_CONTROL_DAEMON)
}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def operand_pods(kube: client.ApiClient, namespace: str) -> list[Any]:
    return [
        pod
        for pod in client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=APPS).items
        if not pod.metadata.deletion_timestamp
    ]


def read_daemonset(kube: client.ApiClient, namespace: str, name: str) -> Any:
    return client.AppsV1Api(kube).read_namespaced_daemon_set(name, namespace)


def container_env(daemonset: Any, container: str) -> dict[str, str]:
    """The literal env of one container of a DaemonSet's pod template (valueFrom entries left out)."""
    (found,) = [c for c in daemonset.spec.template.spec.containers if c.name == container]
    return {e.name: e.value for e in found.env or () if e.value is not None}


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())


def ready_apps_on(kube: client.ApiClient, namespace: str, node: str) -> set[str]:
    return {
        pod.metadata.labels[labels.APP]
        for pod in operand_pods(kube, namespace)
        if pod.spec.node_name == node and ready(pod)
    }


def nvidia_resources(kube: client.ApiClient, node: str) -> dict[str, str]:
    allocatable = client.CoreV1Api(kube).read_node(node).status.allocatable or {}
    return {key: value for key, value in allocatable.items() if key.startswith("nvidia.com/")}


def make_pod(
    kube: client.ApiClient, namespace: str, resource: str, node: str | None = None, gpu: bool = True
) -> str:
    name = unique_name("work")
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "cuda",
                "image": "cuda:12",
                "resources": {"limits": {resource: "1"}} if gpu else {},
            }
        ]
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    client.CoreV1Api(kube).create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})
    return name


def pod_node(kube: client.ApiClient, namespace: str, name: str) -> str | None:
    node = client.CoreV1Api(kube).read_namespaced_pod(name, namespace).spec.node_name
    return str(node) if node else None


def unschedulable(kube: client.ApiClient, namespace: str, name: str) -> str | None:
    """The scheduler's message if its last attempt found no node for the pod (None if it has not
    tried yet, or placed it). NB: what a test of "not scheduled" waits for: a fixed sleep says
    nothing when a loaded scheduler has not tried yet."""
    pod = client.CoreV1Api(kube).read_namespaced_pod(name, namespace)
    for found in pod.status.conditions or ():
        if found.type == "PodScheduled" and found.status == "False" and found.reason == "Unschedulable":
            return str(found.message or found.reason)
    return None


@pytest.fixture
def make_nodes(kube: client.ApiClient) -> Iterator[Callable[..., list[str]]]:
    made: list[str] = []

    def make(
        count: int, prefix: str = "gpu", cpu: bool = False, taint: bool = False, **kwargs: Any
    ) -> list[str]:
        names = [unique_name(prefix) for _ in range(count)]
        bodies = [
            fake_nodes.cpu_node(n, rhcos=None, os_id="ubuntu", os_version="22.04")
            if cpu
            else fake_nodes.vanilla_gpu_node(n, simulated=True, **kwargs)
            for n in names
        ]
        if taint:
            for body in bodies:
                body["spec"]["taints"] = [GPU_TAINT]
        fake_nodes.create_nodes(kube, bodies)
        made.extend(names)
        return names

    yield make
    fake_nodes.delete_nodes(kube, made)


@dataclass(frozen=True)
class Stack:
    """The fixtures a test of the whole stack drives, in the order they are set up (and torn
    down in reverse: the operator stops before the policy and the nodes go)."""

    make_nodes: Callable[..., list[str]]
    start_operator: Callable[..., OperatorProcess]
    apply_policy: Callable[..., dict[str, Any]]


@pytest.fixture
def stack(
    make_nodes: Callable[..., list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> Stack:
    return Stack(make_nodes, start_operator, apply_policy)


def test_gpu_pod_waits_for_the_chain_then_runs(
    kube: client.ApiClient,
    namespace: str,
    stack: Stack,
) -> None:
    (gpu,) = stack.make_nodes(1, gpus=8)
    (no_plugin,) = stack.make_nodes(1, gpus=8, extra_labels={labels.deploy_label("device-plugin"): "false"})
    (cpu,) = stack.make_nodes(1, prefix="cpu", cpu=True)
    work = make_pod(kube, namespace, "nvidia.com/gpu")
    # Budget 60 s: the scheduler tries a new pod within milliseconds on a quiet machine.
    wait_for(lambda: unschedulable(kube, namespace, work), 60, what="the scheduler refusing the GPU pod")
    assert pod_node(kube, namespace, work) is None, "scheduled before any GPU was advertised"

    stack.apply_policy()
    stack.start_operator()
    scheduled = wait_for(lambda: pod_node(kube, namespace, work), READY_S, what="the GPU pod scheduled")
    assert scheduled == gpu
    # By then the chain up to the device plugin is Ready on that node; the validator follows it.
    assert {
        operand_catalog.DRIVER.app,
        operand_catalog.CONTAINER_TOOLKIT.app,
        operand_catalog.DEVICE_PLUGIN.app,
    } <= ready_apps_on(kube, namespace, gpu)
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")
    pods = {(p.spec.node_name, p.metadata.labels[labels.APP]): p for p in operand_pods(kube, namespace)}
    assert {app for node, app in pods if node == gpu} == DEFAULT_APPS
    # The markers order them on the node: each became Ready no earlier than what it waits for.
    became_ready = {
        app: next(c.last_transition_time for c in pods[(gpu, app)].status.conditions if c.type == "Ready")
        for app in DEFAULT_APPS
    }
    order = [
        operand_catalog.DRIVER,
        operand_catalog.CONTAINER_TOOLKIT,
        operand_catalog.DEVICE_PLUGIN,
        operand_catalog.OPERATOR_VALIDATOR,
    ]
    times = [became_ready[o.app] for o in order]
    assert times == sorted(times), f"readiness out of marker order: {became_ready}"

    assert nvidia_resources(kube, gpu) == {"nvidia.com/gpu": "8"}
    # Opted out of the device plugin: every other operand, but no plugin and no GPU capacity.
    assert (no_plugin, operand_catalog.DEVICE_PLUGIN.app) not in pods
    assert (no_plugin, operand_catalog.CONTAINER_TOOLKIT.app) in pods
    assert nvidia_resources(kube, no_plugin) == {}
    # The CPU node never gets an operand pod.
    assert not [key for key in pods if key[0] == cpu]
    # Every operand pod tolerates the GPU taint; the RuntimeClass exists.
    for pod in pods.values():
        assert any(
            t.key == "nvidia.com/gpu" and t.operator == "Exists" and t.effect == "NoSchedule"
            for t in pod.spec.tolerations
        ), pod.metadata.name
    runtime_class = client.NodeV1Api(kube).read_runtime_class("nvidia")
    assert runtime_class.handler == "nvidia"
    # GFD's labels (simulated) on the node it runs on; NB: the agent writes them just after it makes
    # the GFD pod Ready, so they may trail the policy's `ready` by a moment.
    node_labels = wait_for(
        lambda: (lambda found: found if found.get("nvidia.com/gpu.count") == "8" else None)(
            client.CoreV1Api(kube).read_node(gpu).metadata.labels
        ),
        REACT_S,
        what="GFD labels on the GPU node",
    )
    assert "nvidia.com/gpu.product" in node_labels


def test_shared_gpus_follow_the_rendered_config(
    kube: client.ApiClient,
    namespace: str,
    stack: Stack,
) -> None:
    (gpu,) = stack.make_nodes(1, gpus=8)
    stack.apply_policy(spec={"devicePlugin": {"resourceConfig": "gpu:sharedgpu:4"}})
    stack.start_operator()
    wait_for(
        lambda: nvidia_resources(kube, gpu) == {"nvidia.com/sharedgpu": "32"}, READY_S, what="32 shared GPUs"
    )

    work = [make_pod(kube, namespace, "nvidia.com/sharedgpu", node=gpu) for _ in range(33)]
    wait_for(
        lambda: sum(pod_node(kube, namespace, name) == gpu for name in work) == 32,
        STEP_S,
        what="32 pods scheduled",
    )
    wait_for(
        lambda: any(unschedulable(kube, namespace, name) for name in work),
        STEP_S,
        what="the scheduler refusing the 33rd pod",
    )
    pending = [name for name in work if pod_node(kube, namespace, name) is None]
    assert len(pending) == 1, "the 33rd pod found a shared GPU that does not exist"
    for name in work:
        client.CoreV1Api(kube).delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    patch_policy(kube, {"devicePlugin": {"resourceConfig": None}})
    wait_for(lambda: nvidia_resources(kube, gpu) == {"nvidia.com/gpu": "8"}, READY_S, what="back to 8 GPUs")

    # devicePlugin.config.name names the admin's ConfigMap: the named-ConfigMap rule. Missing,
    # then without the key config.default names: an error naming the field and an Event, and
    # the running plugin keeps our ConfigMap; once it fits, the plugin mounts it (its config
    # shares each GPU twice).
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)

    def mounted() -> str:
        daemonset = apps.read_namespaced_daemon_set(operand_catalog.DEVICE_PLUGIN.daemonset, namespace)
        volumes = {v.name: v.config_map.name for v in daemonset.spec.template.spec.volumes if v.config_map}
        return str(volumes["available-configs"])

    def error_message() -> str:
        found = condition(read_policy(kube), "Error")
        return str(found.get("message", "")) if found.get("status") == "True" else ""

    ours = mounted()
    patch_policy(kube, {"devicePlugin": {"config": {"name": "plugin-configs", "default": "a100"}}})
    wait_for(
        lambda: "'plugin-configs' does not exist" in error_message(), STEP_S, what="missing ConfigMap error"
    )
    assert "spec.devicePlugin.config.name" in error_message()
    wait_for_event(kube, "InvalidClusterPolicy", "spec.devicePlugin.config.name")
    assert mounted() == ours
    shared = yaml.safe_dump(
        {
            "version": "v1",
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}},
        }
    )
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "plugin-configs"}, "data": {"h100": shared}}
    )
    wait_for(lambda: "has no key 'a100'" in error_message(), STEP_S, what="missing key error")
    assert "spec.devicePlugin.config.default" in error_message()
    assert mounted() == ours
    core.patch_namespaced_config_map("plugin-configs", namespace, {"data": {"a100": shared}})
    wait_for(lambda: mounted() == "plugin-configs", STEP_S, what="the admin's ConfigMap mounted")
    wait_for(lambda: error_message() == "", STEP_S, what="error cleared")
    wait_for(lambda: nvidia_resources(kube, gpu) == {"nvidia.com/gpu": "16"}, READY_S, what="16 shared GPUs")


SWITCHABLE = [
    (operand_catalog.CONTAINER_TOOLKIT, "toolkit"),
    (operand_catalog.DEVICE_PLUGIN, "devicePlugin"),
    (operand_catalog.GPU_FEATURE_DISCOVERY, "gfd"),
]


def owned(kube: client.ApiClient, namespace: str) -> dict[tuple[str, str], str]:
    """Our objects in the namespace (and cluster-scoped RBAC), (kind, name) -> uid."""
    selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
    core, apps, rbac = client.CoreV1Api(kube), client.AppsV1Api(kube), client.RbacAuthorizationV1Api(kube)
    found: dict[tuple[str, str], str] = {}
    for kind, items in (
        ("DaemonSet", apps.list_namespaced_daemon_set(namespace, label_selector=selector).items),
        ("ServiceAccount", core.list_namespaced_service_account(namespace, label_selector=selector).items),
        ("ConfigMap", core.list_namespaced_config_map(namespace, label_selector=selector).items),
        ("ClusterRole", rbac.list_cluster_role(label_selector=selector).items),
    ):
        for item in items:
            if not item.metadata.deletion_timestamp:
                found[(kind, item.metadata.name)] = item.metadata.uid
    return found


def test_each_operand_switches_alone_and_steady_state_is_quiet(
    kube: client.ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    stack: Stack,
) -> None:
    stack.make_nodes(2, gpus=2)
    stack.apply_policy()
    stack.start_operator()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")
    everything = owned(kube, namespace)
    for operand, section in SWITCHABLE:
        # NB: every operand of the section goes with it (the device plugin's MPS control daemon too).
        names = set().union(*(_names_of(o) for o in operand_catalog.GENERIC if o.section == section))
        mine = {key for key in everything if key[1] in names}
        assert ("DaemonSet", operand.daemonset) in mine
        patch_policy(kube, {section: {"enabled": False}})
        wait_for(
            lambda mine=mine: not (mine & set(owned(kube, namespace))), STEP_S, what=f"{operand.name} removed"
        )
        # Nothing else was touched: every other object is the same object (same uid).
        rest = owned(kube, namespace)
        assert {k: v for k, v in everything.items() if k not in mine} == rest
        patch_policy(kube, {section: {"enabled": True}})
        wait_for(lambda mine=mine: mine <= set(owned(kube, namespace)), STEP_S, what=f"{operand.name} back")
        everything = owned(kube, namespace)

    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready again")
    assert quiet_writes(control_plane) == []


def _names_of(operand: operand_types.Operand) -> set[str]:
    """The names of the objects the operand renders (what enabled: false must remove)."""
    inputs = operand_common.OperandRenderInputs("x", False, ImageRef("x:1"))
    return {
        m["metadata"]["name"]
        for m in operand_rendering.render_operand(operand, policy_parser.parse_policy({}), inputs)
    }


def test_tainted_gpu_pool_runs_every_operand_but_no_cpu_work(
    kube: client.ApiClient,
    namespace: str,
    stack: Stack,
) -> None:
    pool = stack.make_nodes(2, gpus=4, taint=True)
    stack.apply_policy()
    stack.start_operator()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready on the tainted pool")
    for node in pool:
        assert ready_apps_on(kube, namespace, node) == DEFAULT_APPS, node
        assert nvidia_resources(kube, node) == {"nvidia.com/gpu": "4"}
    cpu_work = make_pod(kube, namespace, "cpu", node=pool[0], gpu=False)
    wait_for(
        lambda: unschedulable(kube, namespace, cpu_work), STEP_S, what="the scheduler refusing the CPU pod"
    )
    assert pod_node(kube, namespace, cpu_work) is None, "a CPU workload landed on the tainted GPU pool"


def validator_pod_on(kube: client.ApiClient, namespace: str, node: str) -> str:
    (name,) = [
        p.metadata.name
        for p in operand_pods(kube, namespace)
        if p.spec.node_name == node
        and p.metadata.labels[labels.APP] == operand_catalog.OPERATOR_VALIDATOR.app
    ]
    return str(name)


def upgrade_state(kube: client.ApiClient, node: str) -> str:
    return str(client.CoreV1Api(kube).read_node(node).metadata.labels.get(labels.UPGRADE_STATE, ""))


def test_upgrade_validation_waits_for_validator_pods(
    kube: client.ApiClient,
    namespace: str,
    stack: Stack,
) -> None:
    good, bad = stack.make_nodes(2)
    # Both nodes may upgrade at once: `good` must not wait behind `bad`.
    stack.apply_policy(
        spec={
            "driver": {
                "version": "550.90.07",
                "upgradePolicy": {"maxParallelUpgrades": 0, "maxUnavailable": "100%"},
            }
        }
    )
    stack.start_operator()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")
    validator = validator_pod_on(kube, namespace, bad)
    # The validator on `bad` fails from now on (its pod restarts after the driver's, too).
    fake_nodes.set_pod_fate(kube, namespace, validator, "crash-looping")
    patch_policy(kube, {"driver": {"version": "550.127.05"}})

    def new_driver_on(node: str) -> bool:
        return any(
            p.spec.node_name == node
            and ready(p)
            and p.spec.containers[0].image.endswith(":550.127.05-ubuntu22.04")
            for p in operand_pods(kube, namespace)
            if p.metadata.labels[labels.APP] == labels.DRIVER_APP
        )

    wait_for(
        lambda: (
            new_driver_on(good)
            and upgrade_state(kube, good) == "upgrade-done"
            and upgrade_state(kube, bad) == "validation-required"
        ),
        READY_S,
        what="good upgraded, bad waiting in validation",
    )
    # A window: the operator acts on a change within a pass (0.2 s quiet), so 3 s would show a move.
    holds_for(
        lambda: upgrade_state(kube, bad) == "validation-required", 3, what="bad held in validation-required"
    )
    fake_nodes.set_pod_fate(kube, namespace, validator, "ready")
    wait_for(
        lambda: upgrade_state(kube, bad) == "upgrade-done",
        STEP_S,
        what="bad upgraded once its validator is Ready",
    )


def test_upgrade_validation_times_out_then_recovers_when_the_validator_is_ready(
    kube: client.ApiClient,
    namespace: str,
    stack: Stack,
) -> None:
    (node,) = stack.make_nodes(1)
    stack.apply_policy(spec={"driver": {"version": "550.90.07"}})
    # NVIDIA's validation timeout is 600 s; the operator's env shortens it for the test.
    stack.start_operator(env={"OCP_GPU_VALIDATION_TIMEOUT_SECONDS": "8"})
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")
    validator = validator_pod_on(kube, namespace, node)
    fake_nodes.set_pod_fate(kube, namespace, validator, "crash-looping")
    patch_policy(kube, {"driver": {"version": "550.127.05"}})

    wait_for(
        lambda: upgrade_state(kube, node) == "validation-required", READY_S, what="node waiting in validation"
    )
    wait_for(
        lambda: upgrade_state(kube, node) == "upgrade-failed",
        STEP_S,
        what="validation timed out into upgrade-failed",
    )
    # The validator becomes Ready: the operator recovers the node by itself (NVIDIA's rule).
    fake_nodes.set_pod_fate(kube, namespace, validator, "ready")
    wait_for(
        lambda: upgrade_state(kube, node) == "upgrade-done",
        READY_S,
        what="node recovered once its validator is Ready",
    )
    assert not client.CoreV1Api(kube).read_node(node).spec.unschedulable, "the upgrade's cordon stayed"
