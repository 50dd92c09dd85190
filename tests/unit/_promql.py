"""Prometheus' own PromQL parser (hack/promql-check, built from Go modules once) and the metric
names alerts and dashboards may read: dcgm-exporter's default counters and the operator's metrics."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]
DCGM_COUNTERS = ROOT / "tests" / "unit" / "data" / "dcgm-exporter-default-counters.txt"


@functools.cache
def promql_check() -> Path:
    """The parser binary, built by hack/build-promql-check.sh when missing (about 90 s cold)."""
    script = ROOT / "hack" / "build-promql-check.sh"
    subprocess.run(["bash", str(script)], check=True, timeout=1200)
    path = subprocess.run(["bash", str(script), "--print-path"], check=True, capture_output=True, text=True)
    return Path(path.stdout.strip())


def parse(expressions: dict[str, str]) -> dict[str, dict[str, Any]]:
    """name -> {"error": str (only when invalid), "metrics": [metric names read]}."""
    result = subprocess.run(
        [str(promql_check())],
        input=json.dumps(expressions),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    parsed: dict[str, dict[str, Any]] = json.loads(result.stdout)
    return parsed


def dcgm_metrics() -> set[str]:
    lines = DCGM_COUNTERS.read_text().splitlines()
    return {line.split("\t")[0] for line in lines if line and not line.startswith("#")}


def operator_metrics() -> set[str]:
    module = hack_scripts.load("gen_metric_docs")
    from ocp_gpu import metrics

    return {
        metric.name
        for registry in (metrics.REGISTRY, metrics.NODE_REGISTRY)
        for metric in module.documented(registry)
    }


def published_metrics() -> set[str]:
    return dcgm_metrics() | operator_metrics()
