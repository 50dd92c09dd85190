"""We test these aspects of `ocp-gpu node-status` (the node status exporter) as a process against
the local control plane, its /metrics scraped and parsed with prometheus_client's text parser:

(a) a node advertising 4 GPUs, driver and toolkit markers present, a sysfs with two NVIDIA PCI
    devices and one other: NVIDIA's gauges say so, labelled with the node, and every documented
    node metric (docs/metrics.md) is served with its labels;
(b) the plugin marker appears -> plugin_ready 1 at the next look; a marker removed -> 0;
(c) a node that cannot be read -> devices -1 (NVIDIA's sentinel), the process keeps serving;
(d) no node name -> exit 2 with a message naming --node and NODE_NAME.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from ocp_gpu import metrics
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import free_port
from tests import hack_scripts

from .conftest import REACT_S, wait_for

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    return hack_scripts.load("gen_metric_docs")


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


@pytest.fixture
def node_dirs(tmp_path: Path) -> tuple[Path, Path]:
    validations = tmp_path / "validations"
    validations.mkdir()
    for marker in ("driver-ready", "toolkit-ready"):
        (validations / marker).write_text("")
    sys_root = tmp_path / "sys"
    for device, vendor in (
        ("0000:3b:00.0", "0x10de"),
        ("0000:af:00.0", "0x10de"),
        ("0000:00:1f.0", "0x8086"),
    ):
        (sys_root / "bus/pci/devices" / device).mkdir(parents=True)
        (sys_root / "bus/pci/devices" / device / "vendor").write_text(vendor + "\n")
    return validations, sys_root


@pytest.fixture
def gpu_node(kube: client.ApiClient) -> Iterator[str]:
    name = unique_name("gpu")
    fake_nodes.create_nodes(kube, [fake_nodes.gpu_node(name, gpus=4)])
    yield name
    fake_nodes.delete_nodes(kube, [name])


def exporter(control_plane: LocalControlPlane, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ocp_gpu.cli",
        "node-status",
        "--kubeconfig",
        str(control_plane.kubeconfig),
        *args,
    ]


def test_node_status_exporter_reports_markers_devices_and_pci(
    control_plane: LocalControlPlane, gpu_node: str, node_dirs: tuple[Path, Path]
) -> None:
    validations, sys_root = node_dirs
    port = free_port()
    args = ["--node", gpu_node, "--validations-dir", str(validations), "--sys-root", str(sys_root)]
    proc = subprocess.Popen(
        exporter(control_plane, *args, "--bind", f"127.0.0.1:{port}", "--interval", "0.5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def scrape() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    return samples(response.read().decode())
            except OSError:
                return None

        def value(name: str) -> float | None:
            found = scrape() or {}
            values = [v for labels, v in found.get(name, []) if labels == {"node": gpu_node}]
            return values[0] if values else None

        # (a)
        wait_for(
            lambda: value("gpu_operator_node_device_plugin_devices_total") == 4, REACT_S, what="4 devices"
        )
        found = scrape()
        assert found is not None
        for metric in load_generator().documented(metrics.NODE_REGISTRY):
            assert [labels for labels, _ in found[metric.name]] == [{"node": gpu_node}], metric.name
        assert value("gpu_operator_node_driver_ready") == 1 and value("gpu_operator_node_toolkit_ready") == 1
        assert value("gpu_operator_node_plugin_ready") == 0 and value("gpu_operator_node_cuda_ready") == 0
        assert value("gpu_operator_nvidia_pci_devices_total") == 2
        assert (value("gpu_operator_node_device_plugin_validation_last_success_ts_seconds") or 0) > 1.7e9
        # (b)
        (validations / "plugin-ready").write_text("")
        # Budget 30 s: the exporter looks every 0.5 s here (--interval), a process of its own.
        wait_for(lambda: value("gpu_operator_node_plugin_ready") == 1, 30, what="plugin_ready 1")
        (validations / "driver-ready").unlink()
        wait_for(lambda: value("gpu_operator_node_driver_ready") == 0, REACT_S, what="driver_ready 0")
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)


def test_unreadable_node_is_minus_one_and_no_node_name_is_a_clear_error(
    control_plane: LocalControlPlane, node_dirs: tuple[Path, Path]
) -> None:
    validations, _ = node_dirs
    # (c) a node that does not exist: the read fails, the exporter says -1 and goes on.
    result = subprocess.run(
        exporter(control_plane, "--node", "no-such-node", "--validations-dir", str(validations), "--once"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    found = samples(result.stdout)
    assert found["gpu_operator_node_device_plugin_devices_total"] == [({"node": "no-such-node"}, -1.0)]
    # (d)
    env = {key: value for key, value in os.environ.items() if key != "NODE_NAME"}
    result = subprocess.run(
        exporter(control_plane, "--once"), capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 2
    assert "--node" in result.stderr and "NODE_NAME" in result.stderr
