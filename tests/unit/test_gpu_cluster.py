"""We test NVIDIA's GPUCluster mapped onto the ClusterPolicy's draDriver
(ocp_gpu/model/policy/gpu_cluster.py), no API:

- every GPUCluster draDriver field lands on the ClusterPolicy field docs/dra.md's table names;
- the mapped policy renders the very objects the equal ClusterPolicy draDriver renders
  (ComputeDomains on and off);
- fields that do not apply here (a non-default health check, dcgm/dcgmExporter/daemonsets/
  hostPaths) are reported, not silently dropped; a wrong shape names the GPUCluster field;
- the coexistence rule: accepted beside a ClusterPolicy with draDriver off, refused beside one
  that enables it (the message names the field and the fix), refused for a second GPUCluster,
  waiting without a ClusterPolicy;
- a GPUCluster whose image cannot be resolved is refused naming its field, while the
  ClusterPolicy's own problems stay the ClusterPolicy's; the accepted one's DRA driver is the
  policy's the operands are applied from (reconcilers/gpu_clusters.effective_policy);
- its status as NVIDIA's (planning/status/gpu_cluster_status.py): state and Ready/Error with NVIDIA's
  reasons for each standing, ours in Ready's reason when refused; Events once per new problem,
  none for a rollout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ocp_gpu.model.policy import gpu_cluster, policy_parser, policy_spec
from ocp_gpu.model.policy.gpu_cluster import GpuClusterState
from ocp_gpu.planning.status import gpu_cluster_status
from ocp_gpu.reconcilers import gpu_clusters
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


ENV = {"DRA_DRIVER_IMAGE": "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0", "VALIDATOR_IMAGE": "r/ocp-gpu:1"}


def _decide(spec: Mapping[str, Any], policy_spec_: Mapping[str, Any] | None = None) -> Any:
    policy = policy_parser.parse_policy(policy_spec_ or {})
    return gpu_cluster.decide_gpu_cluster(
        "gpu-cluster", spec, ("gpu-cluster",), "cluster-policy", policy, ENV
    )


def test_an_accepted_gpu_cluster_brings_its_dra_driver() -> None:
    decision = _decide({"draDriver": {"version": "v0.5.1"}})
    assert decision.verdict.state is GpuClusterState.ACCEPTED and decision.mapping is not None
    base = policy_parser.parse_policy({})
    effective = gpu_clusters.effective_policy(base, (decision,))
    assert effective.dra_driver.enabled and effective.dra_driver.image.version == "v0.5.1"
    assert not base.dra_driver.enabled
    # refused: the ClusterPolicy's own draDriver, untouched
    refused = _decide({"draDriver": {}}, {"draDriver": {"enabled": True, "version": "v0.4.1"}})
    assert refused.mapping is None and refused.verdict.reason == "ClusterPolicyOwnsDRA"
    policy = policy_parser.parse_policy({"draDriver": {"enabled": True, "version": "v0.4.1"}})
    assert gpu_clusters.effective_policy(policy, (refused,)) == policy


def test_a_gpu_cluster_the_operand_cannot_use_is_refused_naming_its_field() -> None:
    # no DRA_DRIVER_IMAGE default and only a version: nothing to resolve the image from
    decision = gpu_cluster.decide_gpu_cluster(
        "gpu-cluster",
        {"draDriver": {"version": "v1"}},
        ("gpu-cluster",),
        "cp",
        policy_parser.parse_policy({}),
        {},
    )
    assert decision.verdict.state is GpuClusterState.REFUSED and decision.mapping is None
    assert decision.verdict.reason == gpu_cluster.INVALID_REASON
    assert "spec.draDriver" in decision.verdict.message and "left as it is" in decision.verdict.message


def _status(decision: Any, **kwargs: Any) -> gpu_cluster_status.GpuClusterStatus:
    given: dict[str, Any] = {
        "policy_name": "cluster-policy",
        "policy_valid": True,
        "unready_nodes": [],
        "apply_errors": {},
    }
    return gpu_cluster_status.plan_gpu_cluster_status(decision, **(given | kwargs))


def _conditions(status: gpu_cluster_status.GpuClusterStatus) -> dict[str, tuple[bool, str]]:
    return {c.type: (c.status, c.reason) for c in status.conditions}


def test_the_status_as_nvidias() -> None:
    accepted = _decide({"draDriver": {}})
    ready = _status(accepted)
    assert ready.state == "ready"
    assert _conditions(ready) == {"Ready": (True, "Reconciled"), "Error": (False, "Ready")}
    rolling = _status(accepted, unready_nodes=["n2", "n1"])
    assert rolling.state == "notReady"
    assert _conditions(rolling) == {"Ready": (False, "Error"), "Error": (True, "OperandNotReady")}
    assert "n1, n2" in rolling.conditions[1].message
    failing = _status(accepted, apply_errors={"DaemonSet x": "forbidden"})
    assert _conditions(failing)["Error"] == (True, "ReconcileFailed")
    invalid_policy = _status(accepted, policy_valid=False)
    assert _conditions(invalid_policy)["Error"] == (True, "PrerequisiteNotMet")
    refused = _decide({"draDriver": {}}, {"draDriver": {"enabled": True}})
    said = _status(refused, unready_nodes=None)
    assert said.state == "notReady"
    assert _conditions(said) == {
        "Ready": (False, "ClusterPolicyOwnsDRA"),
        "Error": (True, "PrerequisiteNotMet"),
    }
    assert said.conditions[1].message == refused.verdict.message
    unapplied = _status(_decide({"draDriver": {}, "hostPaths": {"kubeletRootDir": "/k"}}))
    assert _conditions(unapplied)["UnsupportedSetting"] == (True, "UnsupportedSetting")


def test_events_once_per_new_problem_and_none_for_a_rollout() -> None:
    refused = _decide({"draDriver": {}}, {"draDriver": {"enabled": True}})
    status = _status(refused, unready_nodes=None)
    (event,) = gpu_cluster_status.plan_gpu_cluster_events(refused, status, frozenset())
    assert (event.reason, event.type) == ("ClusterPolicyOwnsDRA", "Warning")
    stored = frozenset(c.message for c in status.conditions if c.status)
    assert gpu_cluster_status.plan_gpu_cluster_events(refused, status, stored) == []
    accepted = _decide({"draDriver": {}})
    rolling = _status(accepted, unready_nodes=["n1"])
    assert gpu_cluster_status.plan_gpu_cluster_events(accepted, rolling, frozenset()) == []
    (ready,) = gpu_cluster_status.plan_gpu_cluster_events(accepted, _status(accepted), frozenset())
    assert (ready.reason, ready.type) == ("Reconciled", "Normal")
