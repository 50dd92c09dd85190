"""The operator-metrics state: the operator's metrics Service, ServiceMonitor, alerts and dashboard.

Input: the policy (`operator.metrics.serviceMonitor`), the plan of planning/operands/monitoring_planning.py
and
the namespace.  Output: manifest dicts in apply order (templates/state-operator-metrics).
Policy strings reach the YAML through `templating.yaml_value` only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from typing import Any, Final

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.operands import monitoring_planning
from ocp_gpu.rendering import templating

COMPONENT: Final = "state-operator-metrics"
# NVIDIA's names: Service and ServiceMonitor `gpu-operator`, port `gpu-operator-metrics`.
SERVICE: Final = "gpu-operator"
PORT_NAME: Final = "gpu-operator-metrics"
PROMETHEUS_ROLE: Final = "ocp-gpu-prometheus-k8s"
PROMETHEUS_RULE: Final = "ocp-gpu-alerts"
DASHBOARD_CONFIGMAP: Final = "ocp-gpu-dashboard"
DASHBOARD_FILE: Final = "ocp-gpu-dashboard.json"
METRICS_COMPONENT: Final = "gpu-operator-metrics"


@functools.cache
def dashboard_json() -> str:
    """The Grafana dashboard shipped in the package (ocp_gpu/monitoring/)."""
    return resources.files("ocp_gpu").joinpath("monitoring", DASHBOARD_FILE).read_text()


@functools.cache
def minified_dashboard() -> str:
    """The dashboard as the ConfigMap carries it (minified, keys sorted); once per process: every
    pass renders this state, and re-encoding the dashboard was most of its cost (issue 13)."""
    return json.dumps(json.loads(dashboard_json()), separators=(",", ":"), sort_keys=True)


@dataclasses.dataclass(frozen=True)
class MonitoringRenderInputs:
    namespace: str
    plan: monitoring_planning.MonitoringPlan


def render_monitoring_state(
    policy: policy_spec.Policy, inputs: MonitoringRenderInputs
) -> list[dict[str, Any]]:
    """Every state-operator-metrics manifest the plan keeps, in apply order."""
    return templating.render_state(COMPONENT, monitoring_state_context(policy, inputs))


def monitoring_state_context(policy: policy_spec.Policy, inputs: MonitoringRenderInputs) -> dict[str, Any]:
    monitor = policy.operator.metrics_service_monitor
    common_labels = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: METRICS_COMPONENT}
    service_selector = {labels.APP: SERVICE, labels.COMPONENT: METRICS_COMPONENT}
    # Ours win over additionalLabels: the prometheus-operator's selection must not be renamed away.
    monitor_labels = {**monitor.additional_labels, **common_labels}
    # Minified: the ConfigMap carries the dashboard byte for byte as Grafana reads it.
    dashboard = minified_dashboard()
    return {
        "namespace": inputs.namespace,
        "common_labels": common_labels,
        "service": SERVICE,
        "service_labels": {**common_labels, **service_selector},
        "service_selector": service_selector,
        # The operator Deployment's pods (install/install_manifests.py).
        "operator_selector": {labels.APP: install_manifests.NAME},
        "port_name": PORT_NAME,
        "port": install_manifests.METRICS_PORT,
        "prometheus_access": inputs.plan.prometheus_access,
        "prometheus_role": PROMETHEUS_ROLE,
        "service_monitor": inputs.plan.service_monitor,
        "monitor": monitor,
        "monitor_labels": monitor_labels,
        "relabelings": [dict(item) for item in monitor.relabelings],
        "prometheus_rule": inputs.plan.prometheus_rule,
        "prometheus_rule_name": PROMETHEUS_RULE,
        "dashboard_configmap": DASHBOARD_CONFIGMAP,
        "dashboard_labels": {
            **common_labels,
            labels.GRAFANA_DASHBOARD: "1",
            labels.CONSOLE_DASHBOARD: "true",
        },
        "dashboard_data": {DASHBOARD_FILE: dashboard},
    }
