"""We test MPS sharing as NVIDIA's v26.7.0 operator does it, on the local control plane with the
node-agent SIMULATION (ocp_gpu_harness/node_agent.py) standing in for the device plugin, GFD and
the MPS control daemon:

- an admin's plugin ConfigMap with a config sharing each GPU 4 ways with MPS, chosen by one
  node's `nvidia.com/device-plugin.config` label: GFD labels that node
  `nvidia.com/mps.capable=true`, `nvidia.com/gpu.replicas=4`, `.sharing-strategy=mps` and the
  other `mps.capable=false`, `replicas=1`; one MPS control daemon pod runs, Ready, on the MPS
  node only; that node advertises 8 x 4 = 32 GPUs, the other 8; the policy is ready;
- the plugin checks the MPS daemon at its start only (k8s-device-plugin v0.20.0, simulated):
  the daemon's pod no longer Ready, the running plugin keeps its 32; a new plugin pod then
  advertises nothing; a new daemon pod Ready, 32 again;
- `devicePlugin.mps.root` moves the daemon's and the plugin's host paths and MPS_ROOT;
- bad input: the ConfigMap's MPS config changed to 1 replica: an Error naming
  `spec.devicePlugin.config.name`, the ConfigMap, the key and the fix, and an Event; nothing
  running is deleted (the MPS daemon pod, the plugin's and the daemon's DaemonSets stay as they
  were; the simulated GFD, which as NVIDIA's never reads an edited config while it runs, keeps
  the node's labels); fixed,
  the policy is ready again;
- the node's config switched to one without sharing: `mps.capable=false`, the daemon's pod
  goes, the node advertises its 8 GPUs, the policy is ready.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import stages

from . import test_stack
from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    condition,
    holds_for,
    patch_policy,
    read_policy,
    ready_for_the_spec,
    wait_for,
    wait_for_event,
)
from .test_stack import Stack, container_env, nvidia_resources, operand_pods, read_daemonset, ready

pytestmark = pytest.mark.e2e

# test_stack.py's fixtures, registered in this module too.
make_nodes = test_stack.make_nodes
stack = test_stack.stack


def _config(sharing: dict[str, Any] | None) -> str:
    return yaml.safe_dump({"version": "v1", **({"sharing": sharing} if sharing else {})})


def _mps_by(replicas: int) -> dict[str, Any]:
    return {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}


def test_mps_sharing_runs_one_daemon_on_the_nodes_that_share(
    kube: client.ApiClient, namespace: str, stack: Stack
) -> None:
    core = client.CoreV1Api(kube)
    shared, whole = stack.make_nodes(2, gpus=8)
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {"name": "plugin-configs"},
            "data": {"default": _config(None), "mps": _config(_mps_by(4))},
        },
    )
    core.patch_node(shared, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "mps"}}})
    stack.apply_policy(spec={"devicePlugin": {"config": {"name": "plugin-configs", "default": "default"}}})
    stack.start_operator()

    def node_labels(node: str) -> dict[str, str]:
        return dict(core.read_node(node).metadata.labels or {})

    wait_for(lambda: node_labels(shared).get(labels.MPS_CAPABLE) == "true", READY_S, what="GFD: mps.capable")
    assert node_labels(shared)[labels.GPU_REPLICAS] == "4"
    assert node_labels(shared)[labels.GPU_SHARING_STRATEGY] == "mps"
    wait_for(
        lambda: node_labels(whole).get(labels.MPS_CAPABLE) == "false", STEP_S, what="GFD on the other node"
    )
    assert node_labels(whole)[labels.GPU_REPLICAS] == "1"
    assert node_labels(whole)[labels.GPU_SHARING_STRATEGY] == "none"

    def mps_pods() -> list[Any]:
        app = operand_catalog.MPS_CONTROL_DAEMON.app
        return [pod for pod in operand_pods(kube, namespace) if pod.metadata.labels.get(labels.APP) == app]

    wait_for(
        lambda: [p.spec.node_name for p in mps_pods() if ready(p)] == [shared], READY_S, what="MPS daemon"
    )
    wait_for(lambda: nvidia_resources(kube, shared) == {"nvidia.com/gpu": "32"}, READY_S, what="8 GPUs x 4")
    assert nvidia_resources(kube, whole) == {"nvidia.com/gpu": "8"}
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with MPS")
    assert [p.spec.node_name for p in mps_pods()] == [shared]
    _plugin_waits_for_the_daemon_at_its_start(kube, namespace, shared, mps_pods)
    daemon = operand_catalog.MPS_CONTROL_DAEMON.daemonset
    pod_spec = read_daemonset(kube, namespace, daemon).spec.template.spec
    # NVIDIA's: hostPID, never together with shareProcessNamespace (the API server refuses both).
    assert pod_spec.host_pid is True and not pod_spec.share_process_namespace

    # devicePlugin.mps.root: the daemon's and the plugin's host paths, and the plugin's MPS_ROOT.
    patch_policy(kube, {"devicePlugin": {"mps": {"root": "/var/lib/nvidia-mps"}}})

    def host_paths(name: str) -> dict[str, str]:
        volumes = read_daemonset(kube, namespace, name).spec.template.spec.volumes
        return {v.name: v.host_path.path for v in volumes if v.host_path}

    wait_for(
        lambda: host_paths(daemon).get("mps-root") == "/var/lib/nvidia-mps", STEP_S, what="MPS root moved"
    )
    assert host_paths(daemon)["mps-shm"] == "/var/lib/nvidia-mps/shm"
    plugin = operand_catalog.DEVICE_PLUGIN.daemonset
    wait_for(
        lambda: host_paths(plugin).get("mps-root") == "/var/lib/nvidia-mps", STEP_S, what="plugin's root"
    )
    assert (
        container_env(read_daemonset(kube, namespace, plugin), "nvidia-device-plugin")["MPS_ROOT"]
        == "/var/lib/nvidia-mps"
    )
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with the new MPS root")

    # The daemon's pod rolled onto the new root: `ready` waits for the rollout (as NVIDIA's).
    def rolled() -> list[str]:
        return [
            p.spec.node_name
            for p in mps_pods()
            if ready(p)
            and not p.metadata.deletion_timestamp
            and any(v.host_path and v.host_path.path == "/var/lib/nvidia-mps" for v in p.spec.volumes)
        ]

    assert rolled() == [shared]

    # Bad input: MPS sharing 1 way, which the plugin refuses at start.
    running = {p.metadata.uid for p in mps_pods()}
    assert len(running) == 1

    def generations() -> dict[str, int]:
        return {name: read_daemonset(kube, namespace, name).metadata.generation for name in (plugin, daemon)}

    before = generations()
    core.patch_namespaced_config_map("plugin-configs", namespace, {"data": {"mps": _config(_mps_by(1))}})

    def error_message() -> str:
        found = condition(read_policy(kube), "Error")
        return str(found.get("message", "")) if found.get("status") == "True" else ""

    wait_for(lambda: "replicas >= 2" in error_message(), READY_S, what="the Error naming the bad config")
    message = error_message()
    assert "spec.devicePlugin.config.name" in message and "'plugin-configs' key 'mps'" in message, message
    wait_for_event(kube, "InvalidClusterPolicy", "spec.devicePlugin.config.name")
    # Nothing running is deleted or changed meanwhile (the running GFD never reads the edit: it
    # keeps the node's labels, so the MPS daemon's pod stays where it runs).
    assert {p.metadata.uid for p in mps_pods()} == running
    assert generations() == before

    core.patch_namespaced_config_map("plugin-configs", namespace, {"data": {"mps": _config(_mps_by(4))}})
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready once the config is fixed")
    assert error_message() == ""

    # The node's config switched to one without sharing: GFD says mps.capable=false, the daemon's
    # pod goes, the plugin (restarted by its config-manager) advertises the 8 GPUs.
    core.patch_node(shared, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "default"}}})
    wait_for(lambda: nvidia_resources(kube, shared) == {"nvidia.com/gpu": "8"}, READY_S, what="8 GPUs again")
    wait_for(lambda: not mps_pods(), STEP_S, what="the MPS daemon's pod gone")
    assert node_labels(shared)[labels.MPS_CAPABLE] == "false"
    assert node_labels(shared)[labels.GPU_SHARING_STRATEGY] == "none"
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready without MPS")


def _plugin_waits_for_the_daemon_at_its_start(
    kube: client.ApiClient, namespace: str, node: str, mps_pods: Callable[[], list[Any]]
) -> None:
    """As NVIDIA's device plugin v0.20.0 (the node agent's `mps_started`): it checks the MPS daemon's
    health when it starts (retrying every 30 s), never after."""
    core = client.CoreV1Api(kube)
    (daemon_pod,) = mps_pods()
    # The daemon stops being Ready: the running plugin keeps advertising its replicas.
    fake_nodes.set_pod_fate(kube, namespace, daemon_pod.metadata.name, stages.FATE_CRASH_LOOPING)
    # A 15 s window: the agent acts on the pod's change at its next pass (at most 5 s apart), so a
    # simulation that withdrew the GPUs with the daemon would do so within it.
    holds_for(
        lambda: nvidia_resources(kube, node) == {"nvidia.com/gpu": "32"},
        15,
        what="the running plugin still advertising 32 with the MPS daemon gone",
    )

    # A new plugin pod finds no healthy daemon: Ready (it waits, retrying), advertising nothing.
    app = operand_catalog.DEVICE_PLUGIN.app

    def plugin_pods() -> list[Any]:
        return [
            p
            for p in operand_pods(kube, namespace)
            if p.metadata.labels.get(labels.APP) == app and p.spec.node_name == node
        ]

    (old_plugin,) = plugin_pods()
    core.delete_namespaced_pod(old_plugin.metadata.name, namespace)
    wait_for(
        lambda: [p for p in plugin_pods() if ready(p) and p.metadata.uid != old_plugin.metadata.uid],
        READY_S,
        what="a new device plugin pod Ready",
    )
    wait_for(lambda: nvidia_resources(kube, node) == {}, REACT_S, what="no GPU without a healthy MPS daemon")
    # A 15 s window: the agent passes at least every 5 s, so a plugin run that served without a
    # healthy daemon would advertise within it (the wait above may have seen the old pod's gap).
    holds_for(
        lambda: nvidia_resources(kube, node) == {},
        15,
        what="the new plugin pod advertising nothing while the MPS daemon is down",
    )

    # The daemon's pod replaced (its DaemonSet makes a new one, Ready once toolkit-ready): served again.
    core.delete_namespaced_pod(daemon_pod.metadata.name, namespace)
    wait_for(
        lambda: [p for p in mps_pods() if ready(p) and p.metadata.uid != daemon_pod.metadata.uid],
        READY_S,
        what="a new MPS daemon pod Ready",
    )
    wait_for(lambda: nvidia_resources(kube, node) == {"nvidia.com/gpu": "32"}, REACT_S, what="32 again")
