"""We test CDI as NVIDIA's v26.7.0 operator does it, on the local control plane
with the node-agent SIMULATION (ocp_gpu_harness/node_agent.py) standing in for the NVIDIA stack:

- CDI on (the default): the toolkit DaemonSet carries CDI_ENABLED, NVIDIA_CONTAINER_RUNTIME_MODE=cdi,
  the device plugin the strategies cdi-annotations,cdi-cri, the CDI annotation prefix and
  nvidia-cdi-hook's path, its pods run under the RuntimeClass `nvidia`; the RuntimeClasses
  `nvidia`, `nvidia-cdi` and `nvidia-legacy` exist; the node advertises its 8 GPUs and the
  policy is ready.  `cdi.enabled: false` (containerd): the CDI env goes, `nvidia-cdi` and
  `nvidia-legacy` are deleted, `nvidia` stays (containerd names it), the plugin is back on
  envvar, the node still advertises 8 GPUs and the policy is ready again.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog

from . import test_stack
from .conftest import READY_S, STEP_S, patch_policy, policy_state, wait_for
from .test_stack import Stack, container_env, nvidia_resources, read_daemonset

pytestmark = pytest.mark.e2e

# test_stack.py's fixtures, registered in this module too.
make_nodes = test_stack.make_nodes
stack = test_stack.stack


def _runtime_classes(kube: client.ApiClient) -> set[str]:
    selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
    items = client.NodeV1Api(kube).list_runtime_class(label_selector=selector).items
    return {item.metadata.name for item in items if not item.metadata.deletion_timestamp}


def test_cdi_on_by_default_and_off_goes_back_to_the_runtime(
    kube: client.ApiClient, namespace: str, stack: Stack
) -> None:
    (gpu,) = stack.make_nodes(1, gpus=8)
    stack.apply_policy(spec={})
    stack.start_operator()
    wait_for(lambda: policy_state(kube) == "ready", READY_S, what="policy ready with CDI")
    toolkit = read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset)
    toolkit_env = container_env(toolkit, "nvidia-container-toolkit-ctr")
    assert toolkit_env["CDI_ENABLED"] == "true"
    assert toolkit_env["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"
    plugin = read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset)
    plugin_env = container_env(plugin, "nvidia-device-plugin")
    assert plugin_env["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"
    assert plugin_env["CDI_ANNOTATION_PREFIX"] == "cdi.k8s.io/"
    assert plugin_env["NVIDIA_CDI_HOOK_PATH"] == "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    assert plugin.spec.template.spec.runtime_class_name == "nvidia"
    assert _runtime_classes(kube) == {"nvidia", "nvidia-cdi", "nvidia-legacy"}
    assert nvidia_resources(kube, gpu) == {"nvidia.com/gpu": "8"}

    patch_policy(kube, {"cdi": {"enabled": False}})
    wait_for(
        lambda: (
            "CDI_ENABLED"
            not in container_env(
                read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset),
                "nvidia-container-toolkit-ctr",
            )
        ),
        STEP_S,
        what="the toolkit without CDI",
    )
    wait_for(
        lambda: _runtime_classes(kube) == {"nvidia"}, STEP_S, what="nvidia-cdi and nvidia-legacy deleted"
    )
    # NB: the RuntimeClasses go first (pre-requisites), the DaemonSets in the same pass after them.
    wait_for(
        lambda: (
            container_env(
                read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset),
                "nvidia-device-plugin",
            )["DEVICE_LIST_STRATEGY"]
            == "envvar"
        ),
        STEP_S,
        what="the plugin back on envvar",
    )
    plugin = read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset)
    assert "CDI_ANNOTATION_PREFIX" not in container_env(plugin, "nvidia-device-plugin")
    # containerd: the toolkit registers the `nvidia` runtime, the operands keep naming it.
    assert plugin.spec.template.spec.runtime_class_name == "nvidia"
    toolkit_env = container_env(
        read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset),
        "nvidia-container-toolkit-ctr",
    )
    assert toolkit_env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"
    wait_for(lambda: policy_state(kube) == "ready", READY_S, what="policy ready without CDI")
    assert nvidia_resources(kube, gpu) == {"nvidia.com/gpu": "8"}
