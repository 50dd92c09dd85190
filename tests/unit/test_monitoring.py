"""We test these aspects of the operator's monitoring objects (planning/monitoring, rendering/monitoring):

- the metrics Service always; ServiceMonitor and PrometheusRule only where monitoring.coreos.com is
  served; `operator.metrics.serviceMonitor.enabled: false` removes ours; `true` where the API is not
  served is a problem naming the field and the fix (and nothing crashes);
- OpenShift: the prometheus-k8s Role and RoleBinding, and the namespace label only when missing;
- the ServiceMonitor selects the Service (labels, port name, namespace), the Service selects the
  operator Deployment's pods, and the policy's fields reach the ServiceMonitor; additionalLabels
  never replace ours; hostile strings stay strings.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_checks, policy_parser, policy_spec
from ocp_gpu.planning import platforms
from ocp_gpu.planning.operands import monitoring_planning
from ocp_gpu.rendering import monitoring_rendering

OPENSHIFT = platforms.Platform(platforms.PlatformKind.OPENSHIFT, "test")
VANILLA = platforms.Platform(platforms.PlatformKind.KUBERNETES, "test")
SERVED = {monitoring_planning.MONITORING_GROUP}


def policy(monitor: dict[str, Any] | None = None) -> policy_spec.Policy:
    spec = {"operator": {"metrics": {"serviceMonitor": monitor}}} if monitor is not None else {}
    return policy_parser.parse_policy(spec)


def render(pol: policy_spec.Policy, plan: monitoring_planning.MonitoringPlan) -> dict[str, dict[str, Any]]:
    found = monitoring_rendering.render_monitoring_state(
        pol, monitoring_rendering.MonitoringRenderInputs("gpu-ns", plan)
    )
    return {m["kind"]: m for m in found}


def test_vanilla_without_the_api_gets_service_and_dashboard_only() -> None:
    plan = monitoring_planning.plan_operator_monitoring(policy(), VANILLA, set(), {})
    assert plan.problems == () and plan.remove == () and not plan.namespace_labels
    assert set(render(policy(), plan)) == {"Service", "ConfigMap"}


def test_openshift_with_the_api_gets_everything_and_the_namespace_label() -> None:
    plan = monitoring_planning.plan_operator_monitoring(policy(), OPENSHIFT, SERVED, {"other": "x"})
    assert plan.namespace_labels == {labels.CLUSTER_MONITORING: "true"}
    assert set(render(policy(), plan)) == {
        "Service",
        "Role",
        "RoleBinding",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
    }
    labelled = monitoring_planning.plan_operator_monitoring(
        policy(), OPENSHIFT, SERVED, {labels.CLUSTER_MONITORING: "true"}
    )
    assert labelled.namespace_labels == {}


def test_disabled_removes_our_service_monitor_but_keeps_the_rest() -> None:
    plan = monitoring_planning.plan_operator_monitoring(policy({"enabled": False}), OPENSHIFT, SERVED, {})
    assert plan.remove == ("ServiceMonitor",) and not plan.service_monitor
    assert "ServiceMonitor" not in render(policy({"enabled": False}), plan)
    assert "PrometheusRule" in render(policy({"enabled": False}), plan)


def test_enabled_without_the_api_is_a_problem_naming_the_field_and_the_fix() -> None:
    plan = monitoring_planning.plan_operator_monitoring(policy({"enabled": True}), VANILLA, set(), {})
    (problem,) = plan.problems
    assert plan.remove == ()
    assert "spec.operator.metrics.serviceMonitor" in problem.message
    assert "monitoring.coreos.com" in problem.message and "Fix:" in problem.message
    exporter = policy_parser.parse_policy({"dcgmExporter": {"serviceMonitor": {"enabled": True}}})
    (problem,) = monitoring_planning.plan_operator_monitoring(exporter, VANILLA, set(), {}).problems
    assert "spec.dcgmExporter.serviceMonitor" in problem.message
    assert monitoring_planning.plan_operator_monitoring(exporter, VANILLA, SERVED, {}).problems == ()


def test_service_monitor_selects_the_service_which_selects_the_operator() -> None:
    spec = {
        "enabled": True,
        "interval": "15s",
        "scrapeTimeout": "10s",
        "honorLabels": True,
        "additionalLabels": {"release": "kube-prometheus", labels.MANAGED_BY: "someone-else"},
        "relabelings": [
            {"action": "replace", "sourceLabels": ["__meta_x"], "targetLabel": "x", "modulus": 3}
        ],
    }
    pol = policy(spec)
    found = render(pol, monitoring_planning.plan_operator_monitoring(pol, VANILLA, SERVED, {}))
    service, monitor = found["Service"], found["ServiceMonitor"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] == "gpu-operator-metrics"
    assert service["spec"]["ports"][0]["port"] == install_manifests.METRICS_PORT
    pod_labels = install_manifests.deployment_spec()["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (endpoint["interval"], endpoint["scrapeTimeout"], endpoint["honorLabels"]) == ("15s", "10s", True)
    assert endpoint["relabelings"] == spec["relabelings"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    assert monitor["metadata"]["labels"][labels.MANAGED_BY] == labels.MANAGED_BY_VALUE


def test_hostile_strings_stay_strings() -> None:
    hostile = "x\n  selector: {}\n---\nkind: Secret"
    pol = policy({"enabled": True, "interval": hostile, "additionalLabels": {"a": hostile}})
    found = render(pol, monitoring_planning.plan_operator_monitoring(pol, VANILLA, SERVED, {}))
    assert found["ServiceMonitor"]["spec"]["endpoints"][0]["interval"] == hostile
    assert found["ServiceMonitor"]["metadata"]["labels"]["a"] == hostile
    assert "Secret" not in found


def test_dcgm_and_exporter_service_fields_parse_with_nvidias_defaults() -> None:
    default = policy_parser.parse_policy({})
    assert default.dcgm.host_port == 5555 and default.dcgm.host_network is False
    assert (default.dcgm_exporter.service_type, default.dcgm_exporter.internal_traffic_policy) == (
        "ClusterIP",
        "Cluster",
    )
    spec = {
        "dcgm": {"hostPort": 6555, "hostNetwork": True},
        "dcgmExporter": {
            "service": {"type": "NodePort", "internalTrafficPolicy": "Local"},
            "config": {"name": "m"},
        },
    }
    parsed = policy_parser.parse_policy(spec)
    assert (parsed.dcgm.host_port, parsed.dcgm.host_network) == (6555, True)
    assert (parsed.dcgm_exporter.service_type, parsed.dcgm_exporter.internal_traffic_policy) == (
        "NodePort",
        "Local",
    )
    assert parsed.dcgm_exporter.metrics_config_map == "m"
    assert policy_checks.validate_policy(parsed, {}) == policy_checks.validate_policy(default, {})


def test_bad_service_type_traffic_policy_and_port_name_the_field_and_the_fix() -> None:
    spec = {
        "dcgm": {"hostPort": 70000},
        "dcgmExporter": {"service": {"type": "ExternalName", "internalTrafficPolicy": "Nearby"}},
    }
    found = {p.field: p for p in policy_checks.validate_policy(policy_parser.parse_policy(spec), {})}
    assert "ClusterIP" in found["spec.dcgmExporter.service.type"].fix
    assert "Local" in found["spec.dcgmExporter.service.internalTrafficPolicy"].fix
    assert "65535" in found["spec.dcgm.hostPort"].fix
    # Switched off: its settings do not matter.
    off = {
        "dcgm": {"enabled": False, "hostPort": 0},
        "dcgmExporter": {"enabled": False, "service": {"type": "x"}},
    }
    fields = {p.field for p in policy_checks.validate_policy(policy_parser.parse_policy(off), {})}
    assert not fields & {"spec.dcgm.hostPort", "spec.dcgmExporter.service.type"}
