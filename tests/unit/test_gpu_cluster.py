"""We test NVIDIA's GPUCluster mapped onto the ClusterPolicy's draDriver
(ocp_gpu/model/policy/gpu_cluster.py), no API:

- every GPUCluster draDriver field lands on the ClusterPolicy field docs/dra.md's table names;
- the mapped policy renders the very objects the equal ClusterPolicy draDriver renders
  (ComputeDomains on and off);
- fields that do not apply here (a non-default health check, dcgm/dcgmExporter/daemonsets/
  hostPaths) are reported, not silently dropped; a wrong shape names the GPUCluster field;
- the coexistence rule: accepted beside a ClusterPolicy with draDriver off, refused beside one
  that enables it (the message names the field and the fix), refused for a second GPUCluster,
  waiting without a ClusterPolicy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ocp_gpu.model.policy import gpu_cluster, policy_parser, policy_spec
from ocp_gpu.model.policy.gpu_cluster import GpuClusterState
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering

FULL: dict[str, Any] = {
    "draDriver": {
        "repository": "nvcr.io/nvidia",
        "image": "k8s-dra-driver-gpu",
        "version": "v25.8.0",
        "imagePullPolicy": "Always",
        "imagePullSecrets": ["pull-secret"],
        "featureGates": {"MPSSupport": True, "TimeSlicingSettings": False},
        "gpus": {
            "kubeletPlugin": {
                "env": [{"name": "LOG_LEVEL", "value": "6"}],
                "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m"}},
            }
        },
        "computeDomains": {
            "enabled": True,
            "controller": {"env": [{"name": "C", "value": "1"}], "resources": {"limits": {"cpu": "1"}}},
            "kubeletPlugin": {
                "env": [{"name": "K", "value": "2"}],
                "resources": {"requests": {"memory": "1Gi"}},
            },
        },
    }
}
# The same settings written as a ClusterPolicy's draDriver (docs/dra.md's table).
POLICY_DRA: dict[str, Any] = {
    "enabled": True,
    "repository": "nvcr.io/nvidia",
    "image": "k8s-dra-driver-gpu",
    "version": "v25.8.0",
    "imagePullPolicy": "Always",
    "imagePullSecrets": ["pull-secret"],
    "featureGates": {"MPSSupport": True, "TimeSlicingSettings": False},
    "env": [{"name": "LOG_LEVEL", "value": "6"}],
    "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m"}},
    "computeDomains": {
        "enabled": True,
        "controller": {"env": [{"name": "C", "value": "1"}], "resources": {"limits": {"cpu": "1"}}},
        "kubeletPlugin": {"env": [{"name": "K", "value": "2"}], "resources": {"requests": {"memory": "1Gi"}}},
    },
}


def render(policy: policy_spec.Policy) -> list[dict[str, Any]]:
    inputs = operand_common.OperandRenderInputs(
        namespace="nvidia-gpu-operator",
        openshift=True,
        image="nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0",  # type: ignore[arg-type]
        wait_image="quay.io/ocp-gpu/ocp-gpu:v0.1.0",  # type: ignore[arg-type]
    )
    return operand_rendering.render_operand(operand_catalog.DRA_DRIVER, policy, inputs)


def test_the_section_is_the_policys() -> None:
    assert gpu_cluster.dra_driver_section(FULL) == POLICY_DRA
    assert gpu_cluster.dra_driver_section({"draDriver": {}}) == {"enabled": True}


@pytest.mark.parametrize("domains", [True, False])
def test_the_same_operand_renders(domains: bool) -> None:
    spec: dict[str, Any] = {"draDriver": {**FULL["draDriver"]}}
    spec["draDriver"]["computeDomains"] = {**FULL["draDriver"]["computeDomains"], "enabled": domains}
    wire: dict[str, Any] = {
        **POLICY_DRA,
        "computeDomains": {**POLICY_DRA["computeDomains"], "enabled": domains},
    }
    mapping = gpu_cluster.gpu_cluster_dra_driver(spec)
    assert mapping.dra_driver == policy_parser.parse_policy({"draDriver": wire}).dra_driver
    assert mapping.dra_driver.enabled and mapping.dra_driver.compute_domains.enabled is domains
    base = policy_parser.parse_policy({"driver": {"enabled": True}})  # the ClusterPolicy's draDriver off
    assert base.dra_driver.enabled is False
    from_cluster = render(gpu_cluster.with_gpu_cluster(base, mapping))
    from_policy = render(policy_parser.parse_policy({"driver": {"enabled": True}, "draDriver": wire}))
    assert from_cluster == from_policy
    kinds = {obj["kind"] for obj in from_cluster}
    assert "DaemonSet" in kinds and ("Deployment" in kinds) is domains


def test_what_does_not_apply_is_said() -> None:
    assert gpu_cluster.gpu_cluster_dra_driver(FULL).not_applied == ()
    spec: dict[str, Any] = {
        "draDriver": {
            "gpus": {"kubeletPlugin": {"healthcheck": {"enabled": True, "port": 6000}}},
            "computeDomains": {"kubeletPlugin": {"healthcheck": {"enabled": True}}},
        },
        "dcgm": {"enabled": True},
        "hostPaths": {"driverInstallDir": "/opt"},
    }
    notes = gpu_cluster.gpu_cluster_dra_driver(spec).not_applied
    assert [note.split(":")[0] for note in notes] == [
        "spec.draDriver.gpus.kubeletPlugin.healthcheck",
        "spec.draDriver.computeDomains.kubeletPlugin.healthcheck",
        "spec.dcgm",
        "spec.hostPaths",
    ]
    default_port = {"draDriver": {"gpus": {"kubeletPlugin": {"healthcheck": {"port": 51516}}}}}
    assert gpu_cluster.gpu_cluster_dra_driver(default_port).not_applied == ()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"draDriver": "on"}, "spec.draDriver"),
        ({"draDriver": {"gpus": {"kubeletPlugin": {"env": "X=1"}}}}, "spec.draDriver.gpus.kubeletPlugin.env"),
        ({"draDriver": {"featureGates": {"MPSSupport": "yes"}}}, "spec.draDriver.featureGates.MPSSupport"),
    ],
)
def test_a_wrong_shape_names_the_gpucluster_field(spec: Mapping[str, Any], field: str) -> None:
    with pytest.raises(gpu_cluster.GpuClusterError) as raised:
        gpu_cluster.gpu_cluster_dra_driver(spec)
    assert raised.value.field == field


def test_the_coexistence_rule() -> None:
    verdict = gpu_cluster.gpu_cluster_verdict
    assert verdict("gc", ("gc",), "cluster-policy", False).state is GpuClusterState.ACCEPTED
    refused = verdict("gc", ("gc",), "cluster-policy", True)
    assert refused.state is GpuClusterState.REFUSED and refused.reason == "ClusterPolicyOwnsDRA"
    assert "spec.draDriver.enabled" in refused.message and "to false" in refused.message
    second = verdict("late", ("early", "late"), "cluster-policy", False)
    assert second.state is GpuClusterState.REFUSED and "'early'" in second.message
    assert verdict("early", ("early", "late"), "cluster-policy", False).state is GpuClusterState.ACCEPTED
    waiting = verdict("gc", ("gc",), None, False)
    assert waiting.state is GpuClusterState.WAITING and "ClusterPolicy" in waiting.message
