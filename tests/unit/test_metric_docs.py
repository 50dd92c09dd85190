"""We test these aspects of the operator's metrics list (ocp_gpu/metrics.py, docs/metrics.md):

- every name DESIGN §4 and NVIDIA's operator publish is a collector, with NVIDIA's type;
- every collector says where its name comes from (ORIGIN), and nothing in ORIGIN is stale;
- docs/metrics.md is generated from the module and up to date; `--check` fails when stale.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

from ocp_gpu import metrics
from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]

# NVIDIA's names (controllers/operator_metrics.go and the upgrade controller) and the seed's.
NVIDIA_GAUGES = {
    "gpu_operator_gpu_nodes_total",
    "gpu_operator_reconciliation_status",
    "gpu_operator_reconciliation_last_success_ts_seconds",
    "gpu_operator_reconciliation_has_nfd_labels",
    "gpu_operator_openshift_driver_toolkit_enabled",
    "gpu_operator_openshift_driver_toolkit_nfd_too_old",
    "gpu_operator_openshift_driver_toolkit_imagestream_missing",
    "gpu_operator_openshift_driver_toolkit_imagestream_broken",
    "gpu_operator_openshift_driver_toolkit_rhcos_tags_missing",
    "gpu_operator_driver_auto_upgrade_enabled",
    "gpu_operator_auto_upgrade_enabled",
    "gpu_operator_nodes_upgrades_in_progress",
    "gpu_operator_nodes_upgrades_done",
    "gpu_operator_nodes_upgrades_failed",
    "gpu_operator_nodes_upgrades_available",
    "gpu_operator_nodes_upgrades_pending",
}
NVIDIA_COUNTERS = {"gpu_operator_reconciliation_total", "gpu_operator_reconciliation_failed_total"}


def load_generator() -> ModuleType:
    return hack_scripts.load("gen_metric_docs")


generator = load_generator()


def test_every_nvidia_name_is_a_collector_of_nvidias_type() -> None:
    kinds = {metric.name: metric.kind for metric in generator.documented()}
    assert {name for name in NVIDIA_GAUGES if kinds.get(name) != "gauge"} == set()
    assert {name for name in NVIDIA_COUNTERS if kinds.get(name) != "counter"} == set()
    # Renamed to NVIDIA's name: the old one must not come back.
    assert "gpu_operator_openshift_driver_toolkit_imagestream_tags_missing" not in kinds


def test_every_collector_has_an_origin_and_no_origin_is_stale() -> None:
    names = {
        metric.name
        for registry in (metrics.REGISTRY, metrics.NODE_REGISTRY)
        for metric in generator.documented(registry)
    }
    assert names == set(metrics.ORIGIN)


def test_node_status_metrics_are_nvidias_and_labelled_by_node() -> None:
    node = {metric.name: metric for metric in generator.documented(metrics.NODE_REGISTRY)}
    assert {
        "gpu_operator_node_driver_ready",
        "gpu_operator_node_toolkit_ready",
        "gpu_operator_node_cuda_ready",
        "gpu_operator_node_plugin_ready",
        "gpu_operator_node_device_plugin_devices_total",
        "gpu_operator_nvidia_pci_devices_total",
    } <= set(node)
    assert all(metric.labels == ("node",) for metric in node.values())
    # The operator's /metrics does not carry them (another process serves them).
    assert not set(node) & {metric.name for metric in generator.documented()}


def test_metric_docs_are_up_to_date() -> None:
    assert (ROOT / generator.TARGET).read_text() == generator.render(), "run hack/gen_metric_docs.py"


def test_metric_docs_check_fails_when_stale_or_missing(tmp_path: Path, capsys: object) -> None:
    assert generator.main(["--check"], root=tmp_path) == 1  # missing
    (tmp_path / generator.TARGET).parent.mkdir(parents=True)
    (tmp_path / generator.TARGET).write_text(generator.render() + "drift\n")
    assert generator.main(["--check"], root=tmp_path) == 1  # stale
    assert generator.main([], root=tmp_path) == 0
    assert generator.main(["--check"], root=tmp_path) == 0
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_metric_docs.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
