"""We test these aspects of must-gather's decisions (planning/must_gather_plan.py), without a server:

- Secrets are refused whatever asks for them;
- GPU nodes are those NFD or the operator marks; their record keeps labels, annotations
  (the upgrade state), cordon, taints and readiness, and drops the rest of the Node;
- operand pods are those owned by a managed DaemonSet (by uid, not by name);
- the operator's pods are those matching its Deployment's selector, never "every pod";
- file paths built from API names stay inside the gather directory;
- the README names what could not be collected.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.model import labels
from ocp_gpu.planning import must_gather_plan


def obj(name: str, **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **metadata}}


def test_secrets_are_refused() -> None:
    with pytest.raises(must_gather_plan.ForbiddenResourceError, match="never collects secrets"):
        must_gather_plan.check_gatherable(must_gather_plan.Resource("v1", "secrets", "Secret", True))
    assert must_gather_plan.check_gatherable(must_gather_plan.PODS) is must_gather_plan.PODS


@pytest.mark.parametrize(
    ("node_labels", "gpu"),
    [
        ({labels.GPU_PRESENT: "true"}, True),
        ({labels.NFD_NVIDIA_PCI: "true"}, True),
        ({labels.NFD_NVIDIA_PCI: "false"}, False),
        ({}, False),
    ],
)
def test_gpu_nodes(node_labels: dict[str, str], gpu: bool) -> None:
    assert must_gather_plan.is_gpu_node(obj("n", labels=node_labels)) is gpu


def test_node_record_keeps_upgrade_state_and_drops_the_rest() -> None:
    node = {
        "metadata": {
            "name": "gpu-1",
            "labels": {labels.UPGRADE_STATE: "cordon-required", labels.GPU_PRESENT: "true"},
            "annotations": {labels.UPGRADE_ENABLED_ANNOTATION: "true"},
            "managedFields": [{"manager": "x"}],
        },
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
            "nodeInfo": {"osImage": "Red Hat Enterprise Linux CoreOS 416.94 (Plow)", "kernelVersion": "5.14"},
            "images": [{"names": ["big"]}],
        },
    }
    record = must_gather_plan.node_record(node)
    assert record["upgradeState"] == "cordon-required"
    assert record["annotations"] == {labels.UPGRADE_ENABLED_ANNOTATION: "true"}
    assert record["unschedulable"] is True
    assert record["ready"]["status"] == "True"
    assert record["osImage"].startswith("Red Hat Enterprise Linux CoreOS")
    assert "images" not in record and "managedFields" not in str(record)


def test_operand_pods_are_owned_by_managed_daemonsets_by_uid() -> None:
    managed = obj("nvidia-driver-daemonset-x", uid="u1", labels={labels.MANAGED_BY: labels.MANAGED_BY_VALUE})
    foreign = obj("someone-elses", uid="u2")
    pods = [
        obj("b", ownerReferences=[{"kind": "DaemonSet", "name": "nvidia-driver-daemonset-x", "uid": "u1"}]),
        obj("a", ownerReferences=[{"kind": "DaemonSet", "name": "nvidia-driver-daemonset-x", "uid": "u1"}]),
        # Same owner name, another uid: a DaemonSet that was deleted and re-created by someone else.
        obj("c", ownerReferences=[{"kind": "DaemonSet", "name": "nvidia-driver-daemonset-x", "uid": "old"}]),
        obj("d", ownerReferences=[{"kind": "DaemonSet", "name": "someone-elses", "uid": "u2"}]),
        obj("e"),
    ]
    chosen = must_gather_plan.select_operand_pods(pods, [managed, foreign])
    assert [p["metadata"]["name"] for p in chosen] == ["a", "b"]


def test_operator_pods_follow_the_deployment_selector() -> None:
    deployment = {"spec": {"selector": {"matchLabels": {"app": "gpu-operator"}}}}
    pods = [obj("op-1", labels={"app": "gpu-operator"}), obj("other", labels={"app": "x"}), obj("bare")]
    assert [p["metadata"]["name"] for p in must_gather_plan.select_operator_pods(pods, deployment)] == [
        "op-1"
    ]
    # No Deployment, or one with an empty selector: no pod is "the operator".
    assert must_gather_plan.select_operator_pods(pods, None) == []
    assert must_gather_plan.select_operator_pods(pods, {"spec": {"selector": {}}}) == []


def test_metrics_port() -> None:
    named = {"spec": {"containers": [{"name": "c", "ports": [{"name": "metrics", "containerPort": 9090}]}]}}
    assert must_gather_plan.metrics_port(named) == 9090
    assert (
        must_gather_plan.metrics_port({"spec": {"containers": [{"name": "c"}]}})
        == must_gather_plan.DEFAULT_METRICS_PORT
    )


def test_container_names_include_init_containers_first() -> None:
    pod = {"spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "main"}, {"name": "dtk"}]}}
    assert must_gather_plan.container_names(pod) == ["init", "main", "dtk"]


def test_events_about_gpu_nodes_and_policies_oldest_first() -> None:
    events = [
        {"involvedObject": {"name": "gpu-1"}, "lastTimestamp": "2026-01-02T00:00:00Z", "reason": "late"},
        {"involvedObject": {"name": "cpu-1"}, "lastTimestamp": "2026-01-01T00:00:00Z", "reason": "other"},
        {
            "involvedObject": {"name": "cluster-policy"},
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "reason": "early",
        },
    ]
    chosen = must_gather_plan.select_events(events, ["gpu-1", "cluster-policy"])
    assert [e["reason"] for e in chosen] == ["early", "late"]


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("namespaces", "ns", "pods", "p.yaml"), "namespaces/ns/pods/p.yaml"),
        (("cluster", "nodes", "../../etc/passwd"), "cluster/nodes/_.._etc_passwd"),
        (("operator", "a:b/c"), "operator/a_b_c"),
        (("x", ""), "x/_"),
    ],
)
def test_paths_stay_inside(parts: tuple[str, ...], expected: str) -> None:
    path = must_gather_plan.relative_path(*parts)
    assert path == expected
    assert ".." not in path.split("/")


def test_resource_paths() -> None:
    assert must_gather_plan.resource_path(must_gather_plan.NODES, "gpu-1") == "cluster/nodes/gpu-1.yaml"
    assert (
        must_gather_plan.resource_path(must_gather_plan.PODS, "p", "ns", ".describe.txt")
        == "namespaces/ns/pods/p.describe.txt"
    )


def test_scrub_drops_managed_fields_without_touching_the_input() -> None:
    original = {"metadata": {"name": "x", "managedFields": [{}]}, "spec": {}}
    assert must_gather_plan.scrub(original) == {"metadata": {"name": "x"}, "spec": {}}
    assert "managedFields" in original["metadata"]


def test_summary_names_failures() -> None:
    text = must_gather_plan.summarize(["b.yaml", "a.yaml"], ["ImageStream driver-toolkit: not served"])
    assert "Secrets are never collected." in text
    assert text.index("a.yaml") < text.index("b.yaml")
    assert "1 item(s) could not be collected" in text and "ImageStream driver-toolkit" in text
