"""We test these aspects of the PrometheusRule `ocp-gpu-alerts` (state-operator-metrics):

- every expression is valid PromQL to Prometheus' own parser (hack/promql-check), and the parser
  does reject invalid PromQL (so the check can fail);
- every expression reads only metrics that dcgm-exporter (default counters) or the operator publish;
- every alert has a severity, a summary, a description and a runbook section in docs/alerts.md, and
  every runbook section (and table row) there is an alert;
- the item-2 list is covered: XID, fell off the bus, temperature, ECC/row remap, reconciliation,
  driver upgrade failed, driver-toolkit tag missing.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning import platforms
from ocp_gpu.planning.operands import monitoring_planning
from ocp_gpu.rendering import monitoring_rendering

from ._promql import ROOT, parse, published_metrics

OPENSHIFT = platforms.Platform(platforms.PlatformKind.OPENSHIFT, "test")


def rules() -> list[dict[str, Any]]:
    plan = monitoring_planning.plan_operator_monitoring(
        policy_spec.Policy(), OPENSHIFT, {monitoring_planning.MONITORING_GROUP}, {}
    )
    manifests = monitoring_rendering.render_monitoring_state(
        policy_spec.Policy(), monitoring_rendering.MonitoringRenderInputs("gpu-operator", plan)
    )
    (rule,) = [m for m in manifests if m["kind"] == "PrometheusRule"]
    return [item for group in rule["spec"]["groups"] for item in group["rules"]]


ALERTS = {item["alert"]: item for item in rules()}


def test_every_expression_parses_and_reads_only_published_metrics() -> None:
    parsed = parse({name: str(item["expr"]) for name, item in ALERTS.items()})
    assert {name: result["error"] for name, result in parsed.items() if "error" in result} == {}
    published = published_metrics()
    unknown = {name: sorted(set(result["metrics"]) - published) for name, result in parsed.items()}
    assert {name: metrics for name, metrics in unknown.items() if metrics} == {}
    # Each alert reads at least one metric: an expression of constants would never fire usefully.
    assert all(result["metrics"] for result in parsed.values())


def test_the_parser_rejects_invalid_promql_and_names_unknown_metrics() -> None:
    parsed = parse({"broken": "DCGM_FI_DEV_GPU_TEMP > > 1", "typo": "rate(DCGM_FI_DEV_GPU_TMP[5m])"})
    assert "error" in parsed["broken"]
    assert parsed["typo"]["metrics"] == ["DCGM_FI_DEV_GPU_TMP"]
    assert "DCGM_FI_DEV_GPU_TMP" not in published_metrics()


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_alert_has_severity_summary_description_and_runbook(name: str) -> None:
    item = ALERTS[name]
    assert item["labels"]["severity"] in ("warning", "critical")
    assert item["annotations"]["summary"] and item["annotations"]["description"]
    assert item["annotations"]["runbook"] == f"docs/alerts.md#{name.lower()}"


def test_runbook_sections_and_alerts_match_both_ways() -> None:
    text = (ROOT / "docs" / "alerts.md").read_text()
    sections = set(re.findall(r"^## (\w+)$", text, flags=re.MULTILINE))
    rows = set(re.findall(r"^\| (\w+) \|", text, flags=re.MULTILINE)) - {"alert"}
    assert sections == set(ALERTS)
    assert rows == set(ALERTS)
    for name in ALERTS:
        body = text.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert len(body.split()) >= 30, f"{name}: the runbook paragraph is too thin"


def test_the_alerts_admins_act_on_are_all_there() -> None:
    exprs = {name: str(item["expr"]) for name, item in ALERTS.items()}
    assert "DCGM_FI_DEV_XID_ERRORS" in exprs["GPUXidError"]
    assert "== 79" in exprs["GPUFellOffTheBus"]
    assert "DCGM_FI_DEV_GPU_TEMP" in exprs["GPUHighTemperature"]
    assert "REMAPPED_ROWS" in exprs["GPUUncorrectableMemoryError"]
    assert "DCGM_FI_DEV_ROW_REMAP_FAILURE" in exprs["GPURowRemapFailure"]
    assert "gpu_operator_reconciliation_status" in exprs["GPUOperatorReconciliationFailing"]
    assert "gpu_operator_nodes_upgrades_failed" in exprs["GPUDriverUpgradeFailed"]
    assert "ocp_gpu_driver_toolkit_tag_missing" in exprs["GPUDriverToolkitTagMissing"]
    assert 'ocp_gpu_mig_config_nodes{state="failed"}' in exprs["GPUMIGReconfigurationFailed"]
