"""We test these aspects of the DCGM, DCGM exporter and node status exporter operands on the local
control plane with the prometheus-operator CRDs installed (harness/monitoring.py) and simulated
GPU nodes (harness/node_agent.py orders the pods by markers, as their init containers would):

(0) dcgmExporter.config.name naming a missing ConfigMap, then one without `dcgm-metrics.csv`
    (the key NVIDIA's operator mounts): an error naming the field and an Event, no exporter
    DaemonSet applied until it fits;
(a) DaemonSets nvidia-dcgm (hostPort dcgm.hostPort), nvidia-dcgm-exporter (Service
    nvidia-dcgm-exporter, port gpu-metrics 9400, dcgmExporter.service.type and
    internalTrafficPolicy, config.name's ConfigMap mounted and named in DCGM_EXPORTER_COLLECTORS,
    the standalone hostengine's address) and nvidia-node-status-exporter (`ocp-gpu node-status`),
    each Ready on every GPU node; ServiceMonitors whose selectors match the Services; the policy
    ready; zero writes in steady state (audit log);
(b) dcgmExporter.serviceMonitor.enabled: false removes that ServiceMonitor only;
(d) dcgm.hostNetwork: true with the policy's network sysctl (daemonsets.podSecurityContext), which
    the API server refuses in a pod on the host's network: an error and an Event naming both
    fields, nvidia-dcgm neither rewritten nor deleted, nothing else changed; hostNetwork off
    again clears the error;
(c) `<section>.enabled: false` removes each operand's objects and touches no other object.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness.cluster import LocalControlPlane

from . import conftest as e2e
from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
)

pytestmark = pytest.mark.e2e

GROUP = "monitoring.coreos.com"
# A network sysctl for every operand's pods: fine until a pod shares the host's network (d).
SYSCTL: Final = "net.ipv4.ip_local_port_range"
SPEC: dict[str, Any] = {
    "daemonsets": {"podSecurityContext": {"sysctls": [{"name": SYSCTL, "value": "32768 60999"}]}},
    "dcgm": {"hostPort": 5555},
    "dcgmExporter": {
        "service": {"type": "NodePort", "internalTrafficPolicy": "Local"},
        "config": {"name": "my-dcgm-metrics"},
        "serviceMonitor": {"enabled": True, "interval": "30s", "additionalLabels": {"release": "prom"}},
    },
    "nodeStatusExporter": {"enabled": True},
}


def monitor(kube: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(kube).get_namespaced_custom_object(
            GROUP, "v1", namespace, "servicemonitors", name
        )
        return found
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return None
        raise


def owned(kube: client.ApiClient, namespace: str) -> dict[tuple[str, str], str]:
    """Our objects: (kind, name) -> uid."""
    selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    found: dict[tuple[str, str], str] = {}
    for kind, items in (
        ("DaemonSet", apps.list_namespaced_daemon_set(namespace, label_selector=selector).items),
        ("Service", core.list_namespaced_service(namespace, label_selector=selector).items),
        ("ServiceAccount", core.list_namespaced_service_account(namespace, label_selector=selector).items),
    ):
        for item in items:
            if not item.metadata.deletion_timestamp:
                found[(kind, item.metadata.name)] = item.metadata.uid
    for item in client.CustomObjectsApi(kube).list_namespaced_custom_object(
        GROUP, "v1", namespace, "servicemonitors"
    )["items"]:
        found[("ServiceMonitor", item["metadata"]["name"])] = item["metadata"]["uid"]
    return found


# The admin's metrics file (NVIDIA's format: DCGM field, Prometheus type, help).
METRICS_CSV = "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"


gpu_nodes = e2e.gpu_nodes_fixture(2, simulated=True, gpus=2)


def test_dcgm_exporter_and_node_status_exporter_deploy_switch_and_stay_quiet(
    monitoring_api: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    gpu_nodes: list[str],
    operated: e2e.Operated,
) -> None:
    kube = monitoring_api
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    operated.run(SPEC)
    # (0) config.name names a ConfigMap that does not exist, then one without dcgm-metrics.csv:
    # an error naming the field and an Event; no exporter DaemonSet is applied meanwhile.
    field = "spec.dcgmExporter.config.name"

    def error_message() -> str:
        found = e2e.condition(e2e.read_policy(kube), "Error")
        return str(found.get("message", "")) if found.get("status") == "True" else ""

    def exporter_applied() -> bool:
        selector = f"metadata.name={operand_catalog.DCGM_EXPORTER.daemonset}"
        return bool(apps.list_namespaced_daemon_set(namespace, field_selector=selector).items)

    e2e.wait_for(
        lambda: "'my-dcgm-metrics' does not exist" in error_message(), STEP_S, what="missing ConfigMap"
    )
    assert field in error_message()
    e2e.wait_for_event(kube, "InvalidClusterPolicy", field)
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "my-dcgm-metrics"}, "data": {"metrics.csv": METRICS_CSV}}
    )
    e2e.wait_for(lambda: "has no key 'dcgm-metrics.csv'" in error_message(), STEP_S, what="missing key error")
    assert not exporter_applied()
    core.patch_namespaced_config_map(
        "my-dcgm-metrics", namespace, {"data": {"dcgm-metrics.csv": METRICS_CSV}}
    )
    # (a)
    for operand in (
        operand_catalog.DCGM,
        operand_catalog.DCGM_EXPORTER,
        operand_catalog.NODE_STATUS_EXPORTER,
    ):
        e2e.wait_for(
            lambda app=operand.app: set(gpu_nodes) <= e2e.ready_nodes(kube, namespace, app),
            READY_S,
            what=f"{operand.daemonset} Ready on every GPU node",
        )
    dcgm = apps.read_namespaced_daemon_set("nvidia-dcgm", namespace).spec.template.spec
    (port,) = dcgm.containers[0].ports
    assert (port.container_port, port.host_port) == (5555, 5555)
    exporter = apps.read_namespaced_daemon_set("nvidia-dcgm-exporter", namespace).spec.template.spec
    env = {e.name: e.value for e in exporter.containers[0].env}
    assert env["DCGM_EXPORTER_COLLECTORS"] == "/etc/dcgm-exporter/custom/dcgm-metrics.csv"
    assert env["DCGM_REMOTE_HOSTENGINE_INFO"] == "$(NODE_IP):5555"
    assert [v.config_map.name for v in exporter.volumes if v.config_map] == ["my-dcgm-metrics"]
    service = core.read_namespaced_service("nvidia-dcgm-exporter", namespace)
    assert (service.spec.type, service.spec.internal_traffic_policy) == ("NodePort", "Local")
    assert [(p.name, p.port) for p in service.spec.ports] == [("gpu-metrics", 9400)]
    for name in ("nvidia-dcgm-exporter", "nvidia-node-status-exporter"):
        found = monitor(kube, namespace, name)
        assert found is not None, name
        svc = core.read_namespaced_service(name, namespace)
        assert found["spec"]["selector"]["matchLabels"].items() <= (svc.metadata.labels or {}).items()
        assert found["spec"]["endpoints"][0]["port"] == svc.spec.ports[0].name
        # The Service selects the operand's pods.
        assert svc.spec.selector == {labels.APP: name}
    exporter_monitor = monitor(kube, namespace, "nvidia-dcgm-exporter") or {}
    assert exporter_monitor["spec"]["endpoints"][0]["interval"] == "30s"
    assert exporter_monitor["metadata"]["labels"]["release"] == "prom"
    e2e.wait_for(lambda: e2e.ready_for_the_spec(kube), READY_S, what="policy ready")
    assert e2e.quiet_writes(control_plane) == []

    # (b) the exporter's ServiceMonitor off: only it goes.
    before = owned(kube, namespace)
    e2e.patch_policy(kube, {"dcgmExporter": {"serviceMonitor": {"enabled": False}}})
    e2e.wait_for(
        lambda: monitor(kube, namespace, "nvidia-dcgm-exporter") is None,
        REACT_S,
        what="ServiceMonitor removed",
    )
    assert owned(kube, namespace) == {
        k: v for k, v in before.items() if k != ("ServiceMonitor", "nvidia-dcgm-exporter")
    }

    # (d) dcgm.hostNetwork with the policy's network sysctl: the API server would refuse the
    # nvidia-dcgm pods (422), so an error and an Event name both fields, and nothing is applied or
    # deleted: nvidia-dcgm keeps its generation, no object comes or goes; off again, it clears.
    before = owned(kube, namespace)
    generation = apps.read_namespaced_daemon_set("nvidia-dcgm", namespace).metadata.generation
    sysctl_field = "spec.daemonsets.podSecurityContext.sysctls[0].name"
    e2e.patch_policy(kube, {"dcgm": {"hostNetwork": True}})
    e2e.wait_for(lambda: sysctl_field in error_message(), STEP_S, what="the sysctl and hostNetwork error")
    assert "spec.dcgm.hostNetwork" in error_message() and SYSCTL in error_message()
    e2e.wait_for_event(kube, "InvalidClusterPolicy", sysctl_field)
    assert owned(kube, namespace) == before
    assert apps.read_namespaced_daemon_set("nvidia-dcgm", namespace).metadata.generation == generation
    e2e.patch_policy(kube, {"dcgm": {"hostNetwork": False}})
    e2e.wait_for(lambda: not error_message(), STEP_S, what="the error cleared")

    # (c) each operand off: its objects go, nothing else changes.
    for section, names in (
        ("dcgmExporter", {"nvidia-dcgm-exporter"}),
        ("nodeStatusExporter", {"nvidia-node-status-exporter"}),
        ("dcgm", {"nvidia-dcgm"}),
    ):
        before = owned(kube, namespace)
        mine = {key for key in before if key[1] in names}
        assert ("DaemonSet", next(iter(names))) in mine
        e2e.patch_policy(kube, {section: {"enabled": False}})
        e2e.wait_for(
            lambda mine=mine: not (mine & set(owned(kube, namespace))), STEP_S, what=f"{section} removed"
        )
        assert owned(kube, namespace) == {k: v for k, v in before.items() if k not in mine}
    assert e2e.quiet_writes(control_plane) == []
