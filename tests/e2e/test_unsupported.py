"""We test these aspects of settings ocp-gpu accepts but does not implement, with the operator
running against the local control plane:

- NVIDIA's OperatorHub-shaped ClusterPolicy (tests/unit/data/nvidia-operatorhub-clusterpolicy.yaml)
  and a policy setting every field of NVIDIA's v1 schema are applied with kubectl as they are;
- NVIDIA's OperatorHub example gets no `Warning` condition for its podDeletion (NVIDIA's name for
  gpuPodDeletion); patched so that gpuPodDeletion says otherwise, it gets one naming both values;
- the operator then reports an `UnsupportedSetting` condition and a Warning Event naming each
  field it does not act on (and what it does instead; past the 2 KiB status bound, the rest by
  section), while what it does implement is deployed
  as usual: the driver and toolkit DaemonSets appear with the policy's images, and no
  DaemonSet exists for a refused feature;
- the every-field policy's network sysctl with its dcgm.hostNetwork (which the API server would
  refuse in nvidia-dcgm's pods) is an InvalidSpec error naming both fields, and nvidia-dcgm is
  not applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.desired import driver_manifests
from ocp_gpu.model.policy import fields, policy_parser
from ocp_gpu.model.policy.policy_spec import Policy
from ocp_gpu.rendering.operands import operand_catalog, operand_rendering
from ocp_gpu.rendering.operands import toolkit as toolkit_rendering
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess
from tests.unit._nvidia_fields import every_field_spec

from .conftest import REACT_S, STEP_S, condition, kubectl, patch_policy, read_policy, wait_for, wait_for_event

pytestmark = pytest.mark.e2e

OPERATORHUB = Path(__file__).resolve().parents[1] / "unit" / "data" / "nvidia-operatorhub-clusterpolicy.yaml"


@pytest.fixture
def kubectl_policy(
    control_plane: LocalControlPlane, kube: client.ApiClient
) -> Iterator[Callable[[dict[str, Any]], None]]:
    def apply(spec: dict[str, Any]) -> None:
        manifest = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": spec,
        }
        result = kubectl(control_plane, "apply", "-f", "-", stdin=json.dumps(manifest))
        assert "Warning" not in result.stderr, result.stderr

    yield apply
    api = client.CustomObjectsApi(kube)
    api.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    wait_for(
        lambda: not api.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")["items"],
        REACT_S,
        what="ClusterPolicy deleted",
    )


# What each key read from an admin's ConfigMap holds here (the rule checks that the key exists).
KEY_CONTENT = {
    "config.yaml": "version: v1\nmig-configs:\n  all-disabled:\n    - {devices: all, mig-enabled: false}\n",
    "clients.yaml": "version: v1\nclients: []\n",
    "dcgm-metrics.csv": "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n",
}


def create_named_config_maps(kube: client.ApiClient, namespace: str, policy: Policy) -> None:
    """Every ConfigMap the policy names, with the keys the operands read (a device-plugin config for
    any other key, e.g. the one config.default names)."""
    wanted: dict[str, set[str]] = {}
    for operand in operand_catalog.OPERANDS:
        named, keys = operand_rendering.named_config_maps(operand, policy)
        for field, name in named.items():
            wanted.setdefault(name, set()).update({keys[field]} if field in keys else set())
    for name in driver_manifests.named_config_maps(policy).values():
        wanted.setdefault(name, set()).add("example.conf")
    for name, keys in wanted.items():
        data = {key: KEY_CONTENT.get(key, "version: v1\nflags:\n  migStrategy: none\n") for key in keys}
        client.CoreV1Api(kube).create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": data}
        )


def daemonset_names(kube: client.ApiClient, namespace: str) -> set[str]:
    return {ds.metadata.name for ds in client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items}


@pytest.mark.usefixtures("gpu_node")
def test_operatorhub_example_names_what_is_not_implemented(
    kube: client.ApiClient,
    namespace: str,
    start_operator: Callable[..., OperatorProcess],
    kubectl_policy: Callable[[dict[str, Any]], None],
) -> None:
    kubectl_policy(yaml.safe_load(OPERATORHUB.read_text())["spec"])
    start_operator()
    # NVIDIA's example asks for the DCGM exporter's ServiceMonitor; this cluster serves no
    # monitoring.coreos.com, so that is what is reported (the exporter and its Service deploy).
    found = wait_for(
        lambda: condition(read_policy(kube), "ServiceMonitorUnavailable"),
        STEP_S,
        what="ServiceMonitorUnavailable",
    )
    assert found["status"] == "True"
    assert "spec.dcgmExporter.serviceMonitor" in found["message"]
    event = wait_for_event(kube, "ServiceMonitorUnavailable", "spec.dcgmExporter.serviceMonitor")
    assert event.type == "Warning"
    # every other setting of the example is implemented: nothing is named unsupported
    assert condition(read_policy(kube), "UnsupportedSetting").get("status") != "True"
    # NVIDIA's podDeletion (beside the gpuPodDeletion the server defaulted) is no warning
    stored = read_policy(kube)
    assert stored["spec"]["driver"]["upgradePolicy"]["gpuPodDeletion"]
    warning = condition(stored, "Warning")
    assert warning.get("status") != "True", warning
    # and the rest is deployed as usual
    wait_for(
        lambda: (
            {"nvidia-driver-daemonset-ubuntu22.04", toolkit_rendering.DAEMONSET}
            <= daemonset_names(kube, namespace)
        ),
        STEP_S,
        what="driver and toolkit DaemonSets",
    )
    # Both names written with different values: a warning naming both (podDeletion's is used).
    patch_policy(kube, {"driver": {"upgradePolicy": {"gpuPodDeletion": {"timeoutSeconds": 120}}}})
    warning = wait_for(
        lambda: (found := condition(read_policy(kube), "Warning")).get("status") == "True" and found,
        STEP_S,
        what="a Warning condition for podDeletion against gpuPodDeletion",
    )
    assert warning["reason"] == "SpecWarning"
    assert "spec.driver.upgradePolicy.podDeletion.timeoutSeconds: 300 is used" in warning["message"]
    assert "spec.driver.upgradePolicy.gpuPodDeletion.timeoutSeconds says 120" in warning["message"]


@pytest.mark.usefixtures("gpu_node")
def test_every_nvidia_field_is_reported_or_honoured(
    kube: client.ApiClient,
    namespace: str,
    start_operator: Callable[..., OperatorProcess],
    kubectl_policy: Callable[[dict[str, Any]], None],
) -> None:
    spec = every_field_spec()
    # As an admin would, create the ConfigMaps the policy names, each with the keys read from it
    # (a named ConfigMap that is missing holds back its operand: planning/config_maps.py).
    create_named_config_maps(kube, namespace, policy_parser.parse_policy(spec))
    kubectl_policy(spec)
    start_operator()
    found = wait_for(
        lambda: condition(read_policy(kube), "UnsupportedSetting"),
        STEP_S,
        what="UnsupportedSetting condition",
    )
    stored = read_policy(kube)["spec"]
    expected = fields.unsupported_settings(stored)
    # NB: fewer as operands get implemented (the GPU stack took devicePlugin, gfd, validator, mig, psa;
    # monitoring took dcgm, dcgmExporter, nodeStatusExporter, operator.metrics; MIG took migManager;
    # the VM passthrough stack took sandboxWorkloads, vfioManager, sandboxDevicePlugin, validator.vfioPCI;
    # vGPU took vgpuManager, vgpuDeviceManager, validator.vgpu*, vfioManager.driverManager: Kata, CC remain).
    assert len(expected) > 40
    message = found["message"]
    # the status is bounded (2 KiB): what fits is named path by path, the rest by section
    assert message == fields.describe(expected, 2048)
    assert len(message) <= 2048 and "more unimplemented settings under" in message
    for section in {".".join(setting.path.split(".")[:2]) for setting in expected}:
        assert section in message, section
    assert message.startswith("spec.ccManager.{args,defaultMode,env,")
    # honoured fields are not reported
    assert "spec.driver.version" not in message and "spec.driver.rdma" not in message
    event = wait_for_event(kube, "UnsupportedSetting", "spec.ccManager.{args")
    assert event.type == "Warning"
    # This policy sets every operand's hostNetwork (all honoured) and a network sysctl
    # (daemonsets.podSecurityContext), which the API server refuses together: each such operand is
    # held back and the status names both fields before anything is applied (no 422 from an apply).
    held_back = ("toolkit", "validator", "devicePlugin", "dcgm", "dcgmExporter")
    error = wait_for(
        lambda: (
            (found := condition(read_policy(kube), "Error"))
            and all(f"spec.{section}.hostNetwork" in found.get("message", "") for section in held_back)
            and found
        ),
        REACT_S,
        what="an Error naming each operand's hostNetwork",
    )
    assert error["reason"] == "InvalidSpec", error
    assert "spec.daemonsets.podSecurityContext.sysctls[0].name" in error["message"]
    names = daemonset_names(kube, namespace)
    assert operand_catalog.DCGM.daemonset not in names, names
    assert operand_catalog.DEVICE_PLUGIN.daemonset not in names, names
    # The admin takes the fix the message names: the honoured operands deploy, DCGM among them.
    patch_policy(kube, {"daemonsets": {"podSecurityContext": {"sysctls": None}}})
    honoured = {"nvidia-dcgm", "nvidia-dcgm-exporter", "nvidia-device-plugin-daemonset"}
    wait_for(
        lambda: honoured <= daemonset_names(kube, namespace), STEP_S, what=f"DaemonSets {sorted(honoured)}"
    )
    names = daemonset_names(kube, namespace)
    # peermem, GDS and GDRCopy are containers of the driver pods, never DaemonSets of their own
    assert not any(word in name for name in names for word in ("peermem", "gds", "gdrcopy")), names
    # (The vGPU operands are honoured since issue 26 and may deploy here: tests/e2e/test_virtual_machines.)
