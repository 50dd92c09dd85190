"""We test these aspects of the operator's own monitoring objects on the local control plane:

(a) OpenShift with the prometheus-operator CRDs (harness/monitoring.py): the metrics Service, the
    ServiceMonitor selecting it (labels, port name, namespace), the PrometheusRule, the dashboard
    ConfigMap, prometheus-k8s' Role and RoleBinding, and `openshift.io/cluster-monitoring=true` on
    the namespace; then zero writes in steady state (audit log);
(b) `operator.metrics.serviceMonitor` fields reach the ServiceMonitor; `enabled: false` removes it
    and nothing else;
(c) vanilla Kubernetes without the CRDs and `enabled: true`: the Service is made, no crash loop
    (the operator stays up and leading), the condition ServiceMonitorUnavailable and an Event name
    the field and the fix, and zero writes in steady state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    condition,
    patch_policy,
    quiet_writes,
    read_policy,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

GROUP = "monitoring.coreos.com"


def _found(read: Callable[..., Any], *args: str) -> Any:
    """`read(*args)`, or None while the object does not exist yet."""
    try:
        return read(*args)
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return None
        raise


def custom_object(kube: client.ApiClient, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(kube).get_namespaced_custom_object(
            GROUP, "v1", namespace, plural, name
        )
        return found
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return None
        raise


def test_openshift_with_the_monitoring_api_gets_service_monitor_rules_dashboard_and_label(
    openshift: client.ApiClient,
    monitoring_api: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    kube = openshift
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    apply_policy()
    start_operator()
    # (a) everything appears
    monitor = wait_for(
        lambda: custom_object(kube, namespace, "servicemonitors", "gpu-operator"),
        STEP_S,
        what="ServiceMonitor",
    )
    service = wait_for(
        lambda: _found(core.read_namespaced_service, "gpu-operator", namespace), REACT_S, what="Service"
    )
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (service.metadata.labels or {}).items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [namespace]
    assert monitor["spec"]["endpoints"][0]["port"] == service.spec.ports[0].name == "gpu-operator-metrics"
    assert service.spec.ports[0].port == install_manifests.METRICS_PORT
    pod_labels = install_manifests.deployment_spec()["template"]["metadata"]["labels"]
    assert service.spec.selector.items() <= pod_labels.items()
    rule = wait_for(
        lambda: custom_object(kube, namespace, "prometheusrules", "ocp-gpu-alerts"),
        REACT_S,
        what="PrometheusRule",
    )
    alerts = {item["alert"] for group in rule["spec"]["groups"] for item in group["rules"]}
    assert {
        "GPUXidError",
        "GPUFellOffTheBus",
        "GPUDriverUpgradeFailed",
        "GPUDriverToolkitTagMissing",
    } <= alerts
    # NB: each object is waited for: they are applied one after another, in no promised order.
    dashboard = wait_for(
        lambda: _found(core.read_namespaced_config_map, "ocp-gpu-dashboard", namespace),
        REACT_S,
        what="dashboard",
    )
    assert dashboard.metadata.labels[labels.GRAFANA_DASHBOARD] == "1"
    assert json.loads(dashboard.data["ocp-gpu-dashboard.json"])["uid"] == "ocp-gpu-gpus"
    binding = wait_for(
        lambda: _found(rbac.read_namespaced_role_binding, "ocp-gpu-prometheus-k8s", namespace),
        REACT_S,
        what="RoleBinding for prometheus-k8s",
    )
    assert (
        binding.subjects[0].name == "prometheus-k8s"
        and binding.subjects[0].namespace == "openshift-monitoring"
    )
    role = wait_for(
        lambda: _found(rbac.read_namespaced_role, "ocp-gpu-prometheus-k8s", namespace), REACT_S, what="Role"
    )
    assert role.rules[0].verbs == [
        "get",
        "list",
        "watch",
    ]
    wait_for(
        lambda: (
            (core.read_namespace(namespace).metadata.labels or {}).get(labels.CLUSTER_MONITORING) == "true"
        ),
        REACT_S,
        what="namespace labelled for cluster monitoring",
    )
    wait_for(
        lambda: read_policy(kube).get("status", {}).get("state") == "ready", READY_S, what="policy ready"
    )
    assert quiet_writes(control_plane, 8) == []  # a window of 8 s: nothing changes, nothing written

    # (b) the policy's fields reach the ServiceMonitor ...
    patch_policy(
        kube,
        {
            "operator": {
                "metrics": {
                    "serviceMonitor": {
                        "enabled": True,
                        "interval": "15s",
                        "honorLabels": True,
                        "additionalLabels": {"release": "kube-prometheus"},
                    }
                }
            }
        },
    )
    monitor = wait_for(
        lambda: (
            (m := custom_object(kube, namespace, "servicemonitors", "gpu-operator"))
            and m["spec"]["endpoints"][0].get("interval") == "15s"
            and m
        ),
        REACT_S,
        what="ServiceMonitor with interval 15s",
    )
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    # ... and enabled: false removes it, nothing else.
    patch_policy(kube, {"operator": {"metrics": {"serviceMonitor": {"enabled": False}}}})
    wait_for(
        lambda: custom_object(kube, namespace, "servicemonitors", "gpu-operator") is None,
        REACT_S,
        what="ServiceMonitor removed",
    )
    assert core.read_namespaced_service("gpu-operator", namespace).metadata.name == "gpu-operator"
    assert custom_object(kube, namespace, "prometheusrules", "ocp-gpu-alerts") is not None
    assert quiet_writes(control_plane, 8) == []  # a window of 8 s: nothing changes, nothing written


def test_without_the_monitoring_api_a_requested_service_monitor_is_reported_not_retried(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    apply_policy(spec={"operator": {"metrics": {"serviceMonitor": {"enabled": True}}}})
    proc = start_operator()
    found = wait_for(
        lambda: condition(read_policy(kube), "ServiceMonitorUnavailable"),
        STEP_S,
        what="ServiceMonitorUnavailable",
    )
    assert found["status"] == "True"
    assert "spec.operator.metrics.serviceMonitor" in found["message"] and "Fix:" in found["message"]
    wait_for_event(kube, "ServiceMonitorUnavailable", "spec.operator.metrics.serviceMonitor")
    # The metrics Service exists regardless: any Prometheus can scrape it.
    assert (
        client.CoreV1Api(kube).read_namespaced_service("gpu-operator", namespace).spec.ports[0].port == 8080
    )
    assert quiet_writes(control_plane, 8) == []  # a window of 8 s: nothing changes, nothing written
    assert proc.running() and proc.role() == "leader"
    assert proc.metric("gpu_operator_reconciliation_failed_total") == 0
