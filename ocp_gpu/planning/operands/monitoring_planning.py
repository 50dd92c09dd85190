"""Which monitoring objects the operator keeps for its own metrics, alerts and dashboard.

Decides, from the policy (`operator.metrics.serviceMonitor`), the platform and the API
groups the server serves: the operator's metrics Service (always, so any Prometheus can
scrape it), the ServiceMonitor and PrometheusRule (only when `monitoring.coreos.com` is
served: without the prometheus-operator CRDs applying them would fail every pass), the
platform Prometheus' read access and the namespace's cluster-monitoring label (OpenShift),
and whether an explicit request cannot be met (a condition and an Event, never a retry
loop).  Never renders (rendering/monitoring_rendering.py) and never reads the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import ClassVar, Final

from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning import platforms

# ServiceMonitor and PrometheusRule live here (the prometheus-operator's CRDs).
MONITORING_GROUP: Final = "monitoring.coreos.com"


@dataclasses.dataclass(frozen=True)
class MonitoringUnavailable:
    """A serviceMonitor.enabled is true but the cluster serves no ServiceMonitor API."""

    reason: ClassVar[str] = "ServiceMonitorUnavailable"
    field: str

    @property
    def message(self) -> str:
        return (
            f"{self.field}.enabled is true but the API group {MONITORING_GROUP} is not served "
            "(no prometheus-operator CRDs): no ServiceMonitor is created; the metrics Service "
            "is. Fix: install the prometheus-operator (on OpenShift it is part of "
            f"the platform), or set {self.field}.enabled to false. The operator reads API groups "
            "when it becomes leader: restart it after installing the CRDs."
        )


@dataclasses.dataclass(frozen=True)
class MonitoringPlan:
    """The operator-metrics objects to keep, and those to remove, this pass."""

    service_monitor: bool
    prometheus_rule: bool
    # OpenShift: a Role and RoleBinding letting openshift-monitoring/prometheus-k8s discover targets.
    prometheus_access: bool
    # OpenShift: `openshift.io/cluster-monitoring=true` on the operator's namespace.
    namespace_labels: Mapping[str, str]
    # Kinds of ours that must go (the admin switched them off).
    remove: tuple[str, ...]
    # One per serviceMonitor asked for in so many words where the API is not served.
    problems: tuple[MonitoringUnavailable, ...] = ()


def plan_operator_monitoring(
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    api_groups: Collection[str],
    namespace_labels: Mapping[str, str],
) -> MonitoringPlan:
    """What to keep for the operator's /metrics; `namespace_labels` are the namespace's current labels."""
    served = MONITORING_GROUP in api_groups
    requested = policy.operator.metrics_service_monitor_enabled
    # explicitly off: no ServiceMonitor (ours is removed); the alerts stay, they cost nothing
    wanted = requested is not False and served
    problems = []
    if requested is True and not served:
        # asked for in so many words, and impossible here: say so, once, and keep going
        problems.append(MonitoringUnavailable("spec.operator.metrics.serviceMonitor"))
    exporter = policy.dcgm_exporter
    if exporter.enabled and exporter.service_monitor.enabled and not served:
        # the same for the DCGM exporter's (its Service is made; Prometheus can still scrape it)
        problems.append(MonitoringUnavailable("spec.dcgmExporter.serviceMonitor"))
    label_patch: dict[str, str] = {}
    if platform.is_openshift and namespace_labels.get(labels.CLUSTER_MONITORING) != "true":
        # OpenShift's platform Prometheus only scrapes namespaces carrying this label
        label_patch[labels.CLUSTER_MONITORING] = "true"
    return MonitoringPlan(
        service_monitor=wanted,
        prometheus_rule=served,
        prometheus_access=platform.is_openshift,
        namespace_labels=label_patch,
        remove=() if wanted or not served else ("ServiceMonitor",),
        problems=tuple(problems),
    )
