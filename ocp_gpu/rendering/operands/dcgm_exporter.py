"""The dcgm-exporter operand's own context: its Service, ServiceMonitor and metrics config.

The exporter serves DCGM_FI_* metrics on port 9400 (`gpu-metrics` on Service
nvidia-dcgm-exporter, `dcgmExporter.service.{type,internalTrafficPolicy}`), per pod through
the kubelet's pod-resources socket.  With `dcgm.enabled` it reads the standalone hostengine
on its node (`DCGM_REMOTE_HOSTENGINE_INFO`), else it runs DCGM embedded.  `config.name` names
a ConfigMap in the operator namespace whose `dcgm-metrics.csv` replaces the default counters.
The ServiceMonitor is rendered only where monitoring.coreos.com is served
(`inputs.monitoring_api`) and `serviceMonitor.enabled`.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "dcgm-exporter",
    "dcgmExporter",
    "nvidia-dcgm-exporter",
    reads=("dcgm",),
    images=("dcgmExporter", "validator"),
    kinds=(*operand_types.BASE_KINDS, "Service", "ServiceMonitor"),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-dcgm-exporter",
    service_account="nvidia-dcgm-exporter",
    container="nvidia-dcgm-exporter",
    owned_env=frozenset({"DCGM_EXPORTER_LISTEN", "DCGM_EXPORTER_KUBERNETES", "DCGM_EXPORTER_COLLECTORS"}),
    gpu_container="nvidia-dcgm-exporter",
)
# DESIGN §4: Service nvidia-dcgm-exporter, port gpu-metrics 9400.
PORT: Final = 9400
PORT_NAME: Final = "gpu-metrics"
# Where config.name's ConfigMap is mounted, and the key the exporter reads from it (NVIDIA's).
METRICS_CONFIG_DIR: Final = "/etc/dcgm-exporter/custom"
METRICS_CONFIG_KEY: Final = "dcgm-metrics.csv"
# The image's own default counters file.
DEFAULT_COLLECTORS: Final = "/etc/dcgm-exporter/default-counters.csv"


def named_config_maps(policy: policy_spec.Policy) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's metrics ConfigMap (field -> name) and the key the exporter reads from it.

    DCGM_EXPORTER_COLLECTORS points at METRICS_CONFIG_KEY in it (NVIDIA's operator mounts
    the same key, `dcgm-metrics.csv`); without that key the exporter exits at start.
    """
    name = str(policy.dcgm_exporter.metrics_config_map)
    if not name:
        return {}, {}
    field = "spec.dcgmExporter.config.name"
    return {field: name}, {field: METRICS_CONFIG_KEY}


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    exporter = policy.dcgm_exporter
    monitor = exporter.service_monitor
    component = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: IDENTITY.component}
    service_selector = {labels.APP: DAEMONSET}
    config_map = str(exporter.metrics_config_map)
    env = {
        "DCGM_EXPORTER_LISTEN": f":{PORT}",
        "DCGM_EXPORTER_KUBERNETES": "true",
        "DCGM_EXPORTER_COLLECTORS": f"{METRICS_CONFIG_DIR}/{METRICS_CONFIG_KEY}"
        if config_map
        else DEFAULT_COLLECTORS,
    }
    if policy.dcgm.enabled:
        # The standalone hostengine listens on the node's address (hostPort).
        env["DCGM_REMOTE_HOSTENGINE_INFO"] = f"$(NODE_IP):{policy.dcgm.host_port}"
    return {
        "default_env": env,
        # Kubernetes expands $(NODE_IP) in later env values.
        "env_prefix": [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]
        if policy.dcgm.enabled
        else [],
        "wait_for_toolkit": operand_common.marker_wait("toolkit-ready", "the toolkit validation"),
        "port": PORT,
        "port_name": PORT_NAME,
        "service_type": exporter.service_type,
        "internal_traffic_policy": exporter.internal_traffic_policy,
        "service_labels": {**component, **service_selector},
        "service_selector": service_selector,
        "service_monitor": monitor.enabled and inputs.monitoring_api,
        "monitor": monitor,
        # Ours win over additionalLabels.
        "monitor_labels": {**monitor.additional_labels, **component},
        "relabelings": [dict(item) for item in monitor.relabelings],
        "metrics_config_map": config_map,
        "metrics_config_dir": METRICS_CONFIG_DIR,
    }


RENDERING: Final = operand_common.OwnRendering(
    IDENTITY, extra_context, named_config_maps=named_config_maps, service_monitored=True
)
