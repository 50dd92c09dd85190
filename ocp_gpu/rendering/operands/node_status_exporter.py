"""The node-status-exporter operand's own context: `ocp-gpu node-status`, its Service and ServiceMonitor.

Runs our operator image's `ocp-gpu node-status` (commands/node_status.py) on each node
labelled for it, serving NVIDIA's gpu_operator_node_* gauges on port 8000; Service
nvidia-node-status-exporter selects the pods and, where monitoring.coreos.com is served,
a ServiceMonitor selects the Service.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "node-status-exporter",
    "nodeStatusExporter",
    "nvidia-node-status-exporter",
    images=("nodeStatusExporter",),
    kinds=(*operand_types.BASE_KINDS, "Service", "ServiceMonitor", *operand_types.CLUSTER_RBAC),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-node-status-exporter",
    service_account="nvidia-node-status-exporter",
    container="nvidia-node-status-exporter",
    owned_env=frozenset({"NODE_NAME"}),
)
PORT: Final = 8000
PORT_NAME: Final = "node-status"


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    component = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.COMPONENT: IDENTITY.component}
    service_selector = {labels.APP: DAEMONSET}
    return {
        "exporter_args": [
            "--bind",
            f"0.0.0.0:{PORT}",
            "--validations-dir",
            operand_common.VALIDATIONS_DIR,
            "--sys-root",
            "/host-sys",
        ],
        # The downward API gives the exporter its node's name.
        "node_name_env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "port": PORT,
        "port_name": PORT_NAME,
        "service_labels": {**component, **service_selector},
        "service_selector": service_selector,
        "service_monitor": inputs.monitoring_api,
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context, service_monitored=True)
