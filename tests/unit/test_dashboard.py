"""We test these aspects of the Grafana dashboard (ocp_gpu/monitoring/ocp-gpu-dashboard.json):

- it loads as JSON and has the structure Grafana's dashboard model requires (title, uid,
  schemaVersion, unique panel ids, a grid position inside 24 columns, targets with refId and expr);
- every query (panel targets and template variables) is valid PromQL to Prometheus' own parser and
  reads only metrics dcgm-exporter (default counters) or the operator publish;
- it shows utilisation, memory, power and temperature per node/GPU and the six upgrade metrics;
- the ConfigMap carries it byte-identical in content, labelled for the Grafana sidecar and the console.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning import platforms
from ocp_gpu.planning.operands import monitoring_planning
from ocp_gpu.rendering import monitoring_rendering

from ._promql import ROOT, parse, published_metrics

DASHBOARD = json.loads((ROOT / "ocp_gpu" / "monitoring" / "ocp-gpu-dashboard.json").read_text())
LABEL_VALUES = re.compile(r"^label_values\((?P<query>.+),\s*(?P<label>\w+)\)$")


def panels() -> list[dict[str, Any]]:
    return [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]


def queries() -> dict[str, str]:
    found = {}
    for panel in panels():
        for target in panel["targets"]:
            found[f"panel {panel['id']} {target['refId']}"] = target["expr"]
    for variable in DASHBOARD["templating"]["list"]:
        if variable["type"] == "query":
            # label_values(<series selector>, label) is Grafana's; the selector inside is PromQL.
            match = LABEL_VALUES.match(variable["definition"])
            assert match, variable["definition"]
            found[f"variable {variable['name']}"] = match["query"]
    return found


def test_dashboard_structure() -> None:
    assert DASHBOARD["title"] and DASHBOARD["uid"] and isinstance(DASHBOARD["schemaVersion"], int)
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert all(isinstance(grid[key], int) for key in ("h", "w", "x", "y")), panel["title"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["type"] in ("row", "timeseries", "stat", "table", "gauge"), panel["type"]
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert all(target["refId"] and target["expr"] for target in panel["targets"])
    names = {variable["name"] for variable in DASHBOARD["templating"]["list"]}
    assert {"datasource", "node", "gpu"} <= names


def test_every_query_parses_and_reads_only_published_metrics() -> None:
    # Grafana replaces $node and $gpu before Prometheus sees a query; inside a regex matcher
    # they are plain strings to the parser too.
    parsed = parse(queries())
    assert {name: result["error"] for name, result in parsed.items() if "error" in result} == {}
    published = published_metrics()
    unknown = {name: sorted(set(result["metrics"]) - published) for name, result in parsed.items()}
    assert {name: metrics for name, metrics in unknown.items() if metrics} == {}


def test_dashboard_shows_what_admins_ask_for() -> None:
    read = " ".join(queries().values())
    for metric in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "gpu_operator_driver_auto_upgrade_enabled",
        "gpu_operator_nodes_upgrades_in_progress",
        "gpu_operator_nodes_upgrades_done",
        "gpu_operator_nodes_upgrades_failed",
        "gpu_operator_nodes_upgrades_available",
        "gpu_operator_nodes_upgrades_pending",
    ):
        assert metric in read, metric
    per_gpu = [p for p in panels() if p["targets"][0]["expr"].startswith("DCGM_FI_DEV_GPU_UTIL")]
    assert per_gpu and "{{Hostname}}" in per_gpu[0]["targets"][0]["legendFormat"]


def test_configmap_carries_the_dashboard_labelled_for_grafana_and_the_console() -> None:
    plan = monitoring_planning.plan_operator_monitoring(
        policy_spec.Policy(), platforms.Platform(platforms.PlatformKind.KUBERNETES, "test"), set(), {}
    )
    manifests = monitoring_rendering.render_monitoring_state(
        policy_spec.Policy(), monitoring_rendering.MonitoringRenderInputs("gpu-operator", plan)
    )
    (configmap,) = [m for m in manifests if m["kind"] == "ConfigMap"]
    assert configmap["metadata"]["labels"][labels.GRAFANA_DASHBOARD] == "1"
    assert configmap["metadata"]["labels"][labels.CONSOLE_DASHBOARD] == "true"
    assert json.loads(configmap["data"][monitoring_rendering.DASHBOARD_FILE]) == DASHBOARD
