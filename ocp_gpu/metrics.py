"""Every Prometheus collector the operator exports.  No logic lives here.

Names are NVIDIA's (controllers/operator_metrics.go of NVIDIA's GPU operator, and
the upgrade metrics of seed 000), so existing dashboards and alerts keep working;
ours start with `ocp_gpu_`.  `ORIGIN` says where each name comes from;
docs/metrics.md is generated from this module (hack/gen_metric_docs.py).
The values are decided in planning/status/operator_health.py and set by the reconcilers.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

NVIDIA: Final = "NVIDIA gpu-operator"
NVIDIA_UPGRADE: Final = "NVIDIA gpu-operator (upgrade controller, seed 000)"
SEED: Final = "seed 000 (the documented name; NVIDIA's code says gpu_operator_driver_auto_upgrade_enabled)"
OURS: Final = "ocp-gpu"
NVIDIA_NODE: Final = "NVIDIA gpu-operator (node status exporter)"

# --- operator health (NVIDIA's names) ----------------------------------------
gpu_nodes = Gauge("gpu_operator_gpu_nodes_total", "Number of nodes with GPUs", registry=REGISTRY)
reconciliations = Counter(
    "gpu_operator_reconciliation_total", "Total number of reconciliation", registry=REGISTRY
)
reconciliation_failures = Counter(
    "gpu_operator_reconciliation_failed_total",
    "Number of failed reconciliation (passes that raised)",
    registry=REGISTRY,
)
reconciliation_status = Gauge(
    "gpu_operator_reconciliation_status",
    "1 if the reconciliation is currently successful, 0 if the operands are not ready, "
    "-1 if the cluster policy is unavailable (none, or invalid), -2 if an error occurred within the operator",
    registry=REGISTRY,
)
reconciliation_last_success = Gauge(
    "gpu_operator_reconciliation_last_success_ts_seconds",
    "Timestamp (in seconds) of the last reconciliation loop success (the ClusterPolicy was ready)",
    registry=REGISTRY,
)
has_nfd_labels = Gauge(
    "gpu_operator_reconciliation_has_nfd_labels",
    "1 if NFD mandatory kernel labels have been found, 0 otherwise",
    registry=REGISTRY,
)

# --- the Driver Toolkit on OpenShift (NVIDIA's names) -------------------------
driver_toolkit_enabled = Gauge(
    "gpu_operator_openshift_driver_toolkit_enabled",
    "1 if OCP DriverToolkit is enabled, -1 if requested but could not be enabled, 0 if not requested",
    registry=REGISTRY,
)
driver_toolkit_nfd_too_old = Gauge(
    "gpu_operator_openshift_driver_toolkit_nfd_too_old",
    "1 if OCP DriverToolkit is enabled but NFD doesn't expose OSTREE labels, 0 otherwise",
    registry=REGISTRY,
)
driver_toolkit_imagestream_missing = Gauge(
    "gpu_operator_openshift_driver_toolkit_imagestream_missing",
    "1 if OCP DriverToolkit is enabled but its imagestream is not available, 0 otherwise",
    registry=REGISTRY,
)
driver_toolkit_imagestream_broken = Gauge(
    "gpu_operator_openshift_driver_toolkit_imagestream_broken",
    "1 if OCP DriverToolkit is enabled but its imagestream is broken (rhbz#2015024), 0 otherwise",
    registry=REGISTRY,
)
driver_toolkit_rhcos_tags_missing = Gauge(
    "gpu_operator_openshift_driver_toolkit_rhcos_tags_missing",
    "1 if OCP DriverToolkit is enabled but some of the RHCOS tags are missing, 0 otherwise",
    registry=REGISTRY,
)

# --- driver upgrades (seed 000 and NVIDIA's upgrade controller, names verbatim) --
driver_auto_upgrade_enabled = Gauge(
    "gpu_operator_driver_auto_upgrade_enabled",
    "1 if driver auto upgrade is enabled; 0 if not",
    registry=REGISTRY,
)
auto_upgrade_enabled = Gauge(
    "gpu_operator_auto_upgrade_enabled", "1 if driver auto upgrade is enabled; 0 if not", registry=REGISTRY
)
upgrades_in_progress = Gauge(
    "gpu_operator_nodes_upgrades_in_progress",
    "Total number of nodes in which a driver pod is being upgraded on",
    registry=REGISTRY,
)
upgrades_done = Gauge(
    "gpu_operator_nodes_upgrades_done",
    "Total number of nodes in which a driver pod has been successfully upgraded",
    registry=REGISTRY,
)
upgrades_failed = Gauge(
    "gpu_operator_nodes_upgrades_failed",
    "Total number of nodes in which a driver pod upgrade has failed",
    registry=REGISTRY,
)
upgrades_available = Gauge(
    "gpu_operator_nodes_upgrades_available",
    "Total number of nodes in which a driver pod upgrade can start on",
    registry=REGISTRY,
)
upgrades_pending = Gauge(
    "gpu_operator_nodes_upgrades_pending",
    "Total number of nodes in which driver pod upgrades are pending",
    registry=REGISTRY,
)

# --- ours ----------------------------------------------------------------------
is_leader = Gauge("ocp_gpu_is_leader", "1 while this replica holds the leader lease", registry=REGISTRY)
api_writes = Counter(
    "ocp_gpu_api_writes_total",
    "Writes the operator made to the API, by verb and resource (0 in steady state)",
    ["verb", "resource"],
    registry=REGISTRY,
)
driver_toolkit_tag_missing = Gauge(
    "ocp_gpu_driver_toolkit_tag_missing",
    "1 for each RHCOS version that GPU nodes run and the driver-toolkit ImageStream has no tag for",
    ["rhcos_version"],
    registry=REGISTRY,
)
mig_config_nodes = Gauge(
    "ocp_gpu_mig_config_nodes",
    "Nodes by nvidia.com/mig.config.state (pending, success, failed, rebooting); failed: the last MIG"
    " reconfiguration failed",
    ["state"],
    registry=REGISTRY,
)

# --- the node status exporter (`ocp-gpu node-status`, one per GPU node; NVIDIA's names) ---
# NB: its own registry: it runs in the nvidia-node-status-exporter pods, not in the operator.
NODE_REGISTRY = CollectorRegistry(auto_describe=True)
node_metrics_ready = Gauge(
    "gpu_operator_node_metrics_ready_ts_seconds",
    "timestamp (in seconds) of the launch time of the GPU Operator node metrics Pod",
    ["node"],
    registry=NODE_REGISTRY,
)
node_driver_ready = Gauge(
    "gpu_operator_node_driver_ready",
    "1 if the driver synchronization barrier of the local node is open, 0 otherwise",
    ["node"],
    registry=NODE_REGISTRY,
)
node_toolkit_ready = Gauge(
    "gpu_operator_node_toolkit_ready",
    "1 if the container-toolkit synchronization barrier on the local node is open, 0 otherwise",
    ["node"],
    registry=NODE_REGISTRY,
)
node_cuda_ready = Gauge(
    "gpu_operator_node_cuda_ready",
    "1 if cuda synchronization barrier on the local node is open, 0 otherwise",
    ["node"],
    registry=NODE_REGISTRY,
)
node_plugin_ready = Gauge(
    "gpu_operator_node_plugin_ready",
    "1 if the device plugin synchronization barrier on the local node is open, 0 otherwise",
    ["node"],
    registry=NODE_REGISTRY,
)
node_device_plugin_devices = Gauge(
    "gpu_operator_node_device_plugin_devices_total",
    "number of GPU devices exposed by the DevicePlugin on the local node. "
    "-1 if failing to inspect the node spec.",
    ["node"],
    registry=NODE_REGISTRY,
)
node_device_plugin_last_success = Gauge(
    "gpu_operator_node_device_plugin_validation_last_success_ts_seconds",
    "timestamp (in seconds) of the last time GPU devices were found on the local node spec",
    ["node"],
    registry=NODE_REGISTRY,
)
node_nvidia_pci_devices = Gauge(
    "gpu_operator_nvidia_pci_devices_total",
    "number of NVIDIA devices found in the node. -1 if failing to count",
    ["node"],
    registry=NODE_REGISTRY,
)

# Where each metric's name (and meaning) comes from: docs/metrics.md shows it.
ORIGIN: Final[dict[str, str]] = {
    "gpu_operator_gpu_nodes_total": NVIDIA,
    "gpu_operator_reconciliation_total": NVIDIA,
    "gpu_operator_reconciliation_failed_total": NVIDIA,
    "gpu_operator_reconciliation_status": NVIDIA,
    "gpu_operator_reconciliation_last_success_ts_seconds": NVIDIA,
    "gpu_operator_reconciliation_has_nfd_labels": NVIDIA,
    "gpu_operator_openshift_driver_toolkit_enabled": NVIDIA,
    "gpu_operator_openshift_driver_toolkit_nfd_too_old": NVIDIA,
    "gpu_operator_openshift_driver_toolkit_imagestream_missing": NVIDIA,
    "gpu_operator_openshift_driver_toolkit_imagestream_broken": NVIDIA,
    "gpu_operator_openshift_driver_toolkit_rhcos_tags_missing": NVIDIA,
    "gpu_operator_driver_auto_upgrade_enabled": NVIDIA_UPGRADE,
    "gpu_operator_auto_upgrade_enabled": SEED,
    "gpu_operator_nodes_upgrades_in_progress": NVIDIA_UPGRADE,
    "gpu_operator_nodes_upgrades_done": NVIDIA_UPGRADE,
    "gpu_operator_nodes_upgrades_failed": NVIDIA_UPGRADE,
    "gpu_operator_nodes_upgrades_available": NVIDIA_UPGRADE,
    "gpu_operator_nodes_upgrades_pending": NVIDIA_UPGRADE,
    "ocp_gpu_is_leader": OURS,
    "ocp_gpu_api_writes_total": OURS,
    "ocp_gpu_driver_toolkit_tag_missing": OURS,
    "ocp_gpu_mig_config_nodes": OURS,
    "gpu_operator_node_metrics_ready_ts_seconds": NVIDIA_NODE,
    "gpu_operator_node_driver_ready": NVIDIA_NODE,
    "gpu_operator_node_toolkit_ready": NVIDIA_NODE,
    "gpu_operator_node_cuda_ready": NVIDIA_NODE,
    "gpu_operator_node_plugin_ready": NVIDIA_NODE,
    "gpu_operator_node_device_plugin_devices_total": NVIDIA_NODE,
    "gpu_operator_node_device_plugin_validation_last_success_ts_seconds": NVIDIA_NODE,
    "gpu_operator_nvidia_pci_devices_total": NVIDIA_NODE,
}
