"""We test these aspects of the MIG manager on the local control plane, with the node-agent
SIMULATION (ocp_gpu_harness/node_agent.py) playing the MIG manager's protocol through labels
(NVIDIA's mig-parted reconfigure) and GFD's and the device plugin's view of the MIG devices:

(a) only MIG-capable GPU nodes (the simulated GFD's nvidia.com/mig.capable) get
    nvidia.com/gpu.deploy.mig-manager=true, nvidia.com/mig.config=all-disabled (the policy's
    migManager.config.default) and a Ready nvidia-mig-manager pod; our default-mig-parted-config
    ConfigMap exists; the state reads success; the policy is ready;
(b) nvidia.com/mig.config=all-1g.10gb on a node: state pending with the device plugin, GFD, DCGM
    exporter and DCGM deploy labels paused-for-mig-change (never reset by the operator while
    pending), then success with the labels back to true, and under mig.strategy single the node
    advertises nvidia.com/gpu = 7 x GPUs and GFD's product reads -MIG-1g.10gb;
(c) mig.strategy mixed: the same node advertises nvidia.com/mig-1g.10gb instead;
(d) a config the ConfigMap lacks fails at once (nothing paused); a reconfiguration that fails
    (the harness knob) ends in failed with the operands restored and the old geometry; the
    policy gets the MIGConfigFailed condition and an Event; `ocp-gpu status` shows both; the
    operator's /metrics reads ocp_gpu_mig_config_nodes{state="failed"} 1;
(e) zero writes in steady state (audit log);
(f) migManager.config.name naming a missing ConfigMap, then one without config.yaml: an Error
    condition and Event naming the field, nothing running changed; once it has the key, the
    DaemonSet mounts it, our default-mig-parted-config (no longer rendered) is deleted, and
    steady state is again zero writes;
(g) migManager.enabled: false removes its objects and nothing else (the admin's ConfigMap stays).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from prometheus_client.parser import text_string_to_metric_families

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import node_agent
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    Operated,
    condition,
    patch_policy,
    quiet_writes,
    read_policy,
    ready_for_the_spec,
    ready_nodes,
    status_json,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

A100 = "NVIDIA-A100-SXM4-80GB"
PAUSED = tuple(o.deploy_label for o in node_agent.MIG_PAUSED_OPERANDS)
STATE = labels.MIG_CONFIG_STATE


def node_labels(kube: client.ApiClient, name: str) -> dict[str, str]:
    return dict(client.CoreV1Api(kube).read_node(name).metadata.labels or {})


def nvidia_resources(kube: client.ApiClient, name: str) -> dict[str, str]:
    allocatable = client.CoreV1Api(kube).read_node(name).status.allocatable or {}
    return {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/")}


def label(
    kube: client.ApiClient,
    name: str,
    values: dict[str, str | None],
    annotations: dict[str, str] | None = None,
) -> None:
    metadata: dict[str, Any] = {"labels": values}
    if annotations:
        metadata["annotations"] = annotations
    client.CoreV1Api(kube).patch_node(name, {"metadata": metadata})


def _success_after_pending(versions: list[dict[str, str]]) -> dict[str, str] | None:
    """The first version of a node's labels with MIG state success after one with pending."""
    pending = next((i for i, v in enumerate(versions) if v.get(STATE) == "pending"), None)
    if pending is None:
        return None
    return next((v for v in versions[pending:] if v.get(STATE) == "success"), None)


class LabelRecorder:
    """Every version of one node's labels, from a watch (a poll could miss a short pending)."""

    def __init__(self, kube: client.ApiClient, name: str) -> None:
        self.versions: list[dict[str, str]] = []
        self._kube, self._name = kube, name
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stopping = False

    def __enter__(self) -> LabelRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping = True
        self._watch.stop()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        core = client.CoreV1Api(self._kube)
        try:
            for event in self._watch.stream(
                core.list_node, field_selector=f"metadata.name={self._name}", timeout_seconds=300
            ):
                self.versions.append(dict(event["object"].metadata.labels or {}))
        except Exception:  # NB: stopping the watch ends its response mid-stream
            if not self._stopping:
                raise


def mig_gauge(operator: OperatorProcess) -> dict[str, float]:
    """ocp_gpu_mig_config_nodes by state, scraped and parsed with prometheus_client's parser."""
    code, text = operator.http_get("/metrics")
    assert code == 200
    return {
        sample.labels["state"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "ocp_gpu_mig_config_nodes"
    }


@pytest.fixture
def mig_nodes(kube: client.ApiClient) -> Iterator[list[str]]:
    """Two A100 80GB nodes with two GPUs each, and one L40S (not MIG-capable)."""
    a100 = [unique_name("a100") for _ in range(2)]
    l40s = unique_name("l40s")
    fake_nodes.create_nodes(
        kube,
        [
            *(fake_nodes.vanilla_gpu_node(n, simulated=True, gpus=2, product=A100) for n in a100),
            fake_nodes.vanilla_gpu_node(l40s, simulated=True, gpus=2),
        ],
    )
    yield [*a100, l40s]
    fake_nodes.delete_nodes(kube, [*a100, l40s])


def test_mig_reconfiguration_through_labels(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    mig_nodes: list[str],
    operated: Operated,
) -> None:
    first, second, l40s = mig_nodes
    core = client.CoreV1Api(kube)
    operator = operated.run({"mig": {"strategy": "single"}})

    # (a)
    manager_label = operand_catalog.MIG_MANAGER.deploy_label
    for name in (first, second):
        wait_for(
            lambda name=name: node_labels(kube, name).get(STATE) == "success",
            READY_S,
            what=f"{name}: mig.config.state success",
        )
        found = node_labels(kube, name)
        assert (found[manager_label], found[labels.MIG_CONFIG]) == ("true", "all-disabled")
        assert found[labels.MIG_CAPABLE] == "true"
    wait_for(
        lambda: {first, second} <= ready_nodes(kube, namespace, operand_catalog.MIG_MANAGER.app),
        STEP_S,
        what="MIG manager",
    )
    assert l40s not in ready_nodes(kube, namespace, operand_catalog.MIG_MANAGER.app)
    plain = node_labels(kube, l40s)
    assert manager_label not in plain and labels.MIG_CONFIG not in plain
    assert plain.get(labels.MIG_CAPABLE) == "false"
    config = core.read_namespaced_config_map("default-mig-parted-config", namespace).data["config.yaml"]
    assert "all-1g.10gb" in config
    wait_for(lambda: nvidia_resources(kube, first) == {"nvidia.com/gpu": "2"}, STEP_S, what="2 whole GPUs")
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")

    # (b) single: 7 x 1g.10gb per A100 80GB, advertised as nvidia.com/gpu.
    with LabelRecorder(kube, first) as recorder:
        label(kube, first, {labels.MIG_CONFIG: "all-1g.10gb"})
        # NB: from the watch's versions alone, not a GET: the GET can be ahead of the watch.
        wait_for(lambda: _success_after_pending(recorder.versions), READY_S, what="pending, then success")
    pending = [v for v in recorder.versions if v.get(STATE) == "pending"]
    # Paused in the same write as pending, and never un-paused (by the operator) while pending.
    assert pending and all(v.get(key) == labels.PAUSED_FOR_MIG_CHANGE for v in pending for key in PAUSED)
    # Restored in the same write as success.
    after = _success_after_pending(recorder.versions)
    assert after is not None
    assert {key: after.get(key) for key in PAUSED} == dict.fromkeys(PAUSED, "true")
    wait_for(
        lambda: nvidia_resources(kube, first) == {"nvidia.com/gpu": "14"},
        STEP_S,
        what="14 MIG devices as gpu",
    )
    wait_for(
        lambda: node_labels(kube, first).get(labels.GPU_PRODUCT) == f"{A100}-MIG-1g.10gb",
        STEP_S,
        what="GFD's single-strategy product",
    )
    assert node_labels(kube, first)[labels.MIG_STRATEGY] == "single"

    # (c) mixed: the same devices, by profile.
    patch_policy(kube, {"mig": {"strategy": "mixed"}})
    wait_for(
        lambda: nvidia_resources(kube, first) == {"nvidia.com/mig-1g.10gb": "14"},
        READY_S,
        what="mig-1g.10gb: 14",
    )
    wait_for(lambda: node_labels(kube, first).get(labels.MIG_STRATEGY) == "mixed", READY_S, what="GFD mixed")
    assert node_labels(kube, first).get("nvidia.com/mig-1g.10gb.count") == "14"

    # (d) a config the ConfigMap lacks: failed at once, nothing paused.
    label(kube, second, {labels.MIG_CONFIG: "all-9g.1tb"})
    wait_for(lambda: node_labels(kube, second).get(STATE) == "failed", STEP_S, what="unknown config failed")
    assert {key: node_labels(kube, second).get(key) for key in PAUSED} == dict.fromkeys(PAUSED, "true")
    # A reconfiguration that fails while applied: pending, then failed with the operands restored.
    with LabelRecorder(kube, second) as recorder:
        label(kube, second, {labels.MIG_CONFIG: "all-3g.40gb"}, {node_agent.MIG_FAIL: "true"})
        wait_for(
            lambda: (
                any(v.get(STATE) == "pending" for v in recorder.versions)
                and node_labels(kube, second).get(STATE) == "failed"
            ),
            READY_S,
            what="pending, then failed",
        )
    after = node_labels(kube, second)
    assert {key: after.get(key) for key in PAUSED} == dict.fromkeys(PAUSED, "true")
    wait_for(lambda: nvidia_resources(kube, second) == {"nvidia.com/gpu": "2"}, STEP_S, what="old geometry")
    failed = wait_for(
        lambda: (
            condition(read_policy(kube), "MIGConfigFailed").get("status") == "True"
            and condition(read_policy(kube), "MIGConfigFailed")
        ),
        REACT_S,
        what="MIGConfigFailed",
    )
    assert second in failed["message"] and first not in failed["message"]
    wait_for_event(kube, "MIGConfigFailed", second)
    # The gauge behind GPUMIGReconfigurationFailed, from the operator's real /metrics.
    wait_for(
        lambda: mig_gauge(operator) == {"failed": 1.0, "success": 1.0, "pending": 0.0, "rebooting": 0.0},
        REACT_S,
        what="ocp_gpu_mig_config_nodes",
    )
    report = status_json(control_plane.kubeconfig)
    rows = {row["node"]: row for row in report["nodes"]}
    assert (rows[first]["mig_config"], rows[first]["mig_state"]) == ("all-1g.10gb", "success")
    assert (rows[second]["mig_config"], rows[second]["mig_state"]) == ("all-3g.40gb", "failed")
    assert rows[first]["operands"]["mig-manager"] == "yes"
    assert rows[l40s]["operands"]["mig-manager"] == "-"

    # (e)
    assert quiet_writes(control_plane) == []

    # (f) migManager.config.name names a ConfigMap that does not exist: an error naming the field,
    # an Event, and nothing running changes (the DaemonSet keeps mounting ours, ours stays).
    apps = client.AppsV1Api(kube)

    def mounted() -> str:
        daemonset = apps.read_namespaced_daemon_set(operand_catalog.MIG_MANAGER.daemonset, namespace)
        volumes = {v.name: v.config_map.name for v in daemonset.spec.template.spec.volumes if v.config_map}
        return str(volumes["mig-parted-config"])

    def error_message() -> str:
        found = condition(read_policy(kube), "Error")
        return str(found.get("message", "")) if found.get("status") == "True" else ""

    field = "spec.migManager.config.name"
    patch_policy(kube, {"migManager": {"config": {"name": "admin-mig"}}})
    wait_for(lambda: "'admin-mig' does not exist" in error_message(), STEP_S, what="missing ConfigMap error")
    assert field in error_message()
    wait_for_event(kube, "InvalidClusterPolicy", field)
    assert mounted() == "default-mig-parted-config"
    assert core.read_namespaced_config_map("default-mig-parted-config", namespace).data
    # It exists without the key the MIG manager reads: the same error, naming the key.
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "admin-mig"}, "data": {"mig.yaml": config}}
    )
    wait_for(lambda: "has no key 'config.yaml'" in error_message(), STEP_S, what="missing key error")
    assert mounted() == "default-mig-parted-config"
    # Fixed: the DaemonSet mounts the admin's, and ours (no longer rendered) is deleted.
    core.patch_namespaced_config_map("admin-mig", namespace, {"data": {"config.yaml": config}})
    wait_for(lambda: mounted() == "admin-mig", STEP_S, what="admin's ConfigMap mounted")
    wait_for(
        lambda: (
            not core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=default-mig-parted-config"
            ).items
        ),
        STEP_S,
        what="default-mig-parted-config deleted",
    )
    wait_for(lambda: error_message() == "", STEP_S, what="error cleared")
    assert core.read_namespaced_config_map("admin-mig", namespace).data["config.yaml"] == config
    assert quiet_writes(control_plane) == []

    # (g) migManager off: its objects go, nothing else.
    selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"

    def owned() -> set[tuple[str, str]]:
        rbac = client.RbacAuthorizationV1Api(kube)
        found = {
            ("DaemonSet", d.metadata.name)
            for d in client.AppsV1Api(kube)
            .list_namespaced_daemon_set(namespace, label_selector=selector)
            .items
            if not d.metadata.deletion_timestamp
        }
        found |= {
            ("ConfigMap", c.metadata.name)
            for c in core.list_namespaced_config_map(namespace, label_selector=selector).items
        }
        found |= {
            ("ServiceAccount", s.metadata.name)
            for s in core.list_namespaced_service_account(namespace, label_selector=selector).items
        }
        found |= {
            ("Role", r.metadata.name)
            for r in rbac.list_namespaced_role(namespace, label_selector=selector).items
        }
        found |= {
            ("ClusterRole", r.metadata.name) for r in rbac.list_cluster_role(label_selector=selector).items
        }
        return found

    before = owned()
    mine = {
        ("DaemonSet", "nvidia-mig-manager"),
        ("ConfigMap", "default-gpu-clients"),
        ("ServiceAccount", "nvidia-mig-manager"),
        ("Role", "nvidia-mig-manager"),
        ("ClusterRole", "ocp-gpu-nvidia-mig-manager"),
    }
    assert mine <= before
    patch_policy(kube, {"migManager": {"enabled": False}})
    wait_for(lambda: not (mine & owned()), STEP_S, what="MIG manager objects removed")
    assert owned() == before - mine
    # The admin's ConfigMap is not ours: it stays.
    assert core.read_namespaced_config_map("admin-mig", namespace).data
