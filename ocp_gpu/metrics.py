"""Every Prometheus collector the operator exports.  No logic lives here.

Names of the upgrade metrics are NVIDIA's (seed 000), so existing dashboards
and alerts keep working.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

# --- operator health --------------------------------------------------------
is_leader = Gauge("ocp_gpu_is_leader", "1 while this replica holds the leader lease", registry=REGISTRY)
reconciliations = Counter("gpu_operator_reconciliation_total", "Reconcile passes run", registry=REGISTRY)
reconciliation_failures = Counter(
    "gpu_operator_reconciliation_failed_total", "Reconcile passes that raised", registry=REGISTRY
)
reconciliation_status = Gauge(
    "gpu_operator_reconciliation_status",
    "1 when the active ClusterPolicy is ready, 0 when not ready, -1 when it has errors",
    registry=REGISTRY,
)
gpu_nodes = Gauge("gpu_operator_gpu_nodes_total", "GPU nodes seen (NFD pci-10de)", registry=REGISTRY)
api_writes = Counter(
    "ocp_gpu_api_writes_total",
    "Writes the operator made to the API, by verb and resource (0 in steady state)",
    ["verb", "resource"],
    registry=REGISTRY,
)

# --- driver DaemonSets (DESIGN §3) -------------------------------------------
driver_toolkit_tags_missing = Gauge(
    "gpu_operator_openshift_driver_toolkit_imagestream_tags_missing",
    "RHCOS versions in use by GPU nodes that have no driver-toolkit ImageStream tag",
    registry=REGISTRY,
)

# --- driver upgrades (seed 000, names verbatim) -------------------------------
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
